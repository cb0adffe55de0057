"""Where results go: the terminal tables (`tables`), result files written all or nothing with one live run per
path (`files`, `claims`), results kept elsewhere when they cannot be written or encoded (`fallback`), Markdown
summaries (`markdown`), and a running command's checkpoints (`sink`).

Layer 0 (leaf utilities) but `sink`, layer 7 (command plumbing): the others import only lnbench.errors,
lnbench.results and each other; `sink` may import everything below the commands (lnbench.layers).
"""
