"""`lnbench config show`: the effective configuration as TOML (the loading and merging itself is
lnbench.settings, which every command uses)."""
