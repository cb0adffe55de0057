"""`lnbench store` (record result files in the results store) and `lnbench history` (per series the latest
value, its trend and its change points; verify: since which commit a case fails)."""
