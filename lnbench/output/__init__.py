"""Where results go: the terminal tables (`tables`), result files written all or nothing with one live run per
path (`files`, `claims`), results kept elsewhere when they cannot be written or encoded (`fallback`), and
Markdown summaries (`markdown`). A running command's checkpoints are lnbench.scaffold.sink's.

Layer 0 (leaf utilities): imports only lnbench.errors, lnbench.results, lnbench.machine and its own modules.
"""
