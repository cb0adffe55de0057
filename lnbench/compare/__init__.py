"""`lnbench compare`: read two perf / abi-compare results and say, per case, whether NEW is faster, slower or
the same as BASE (results → cases → matching → statistics → table, CSV/JSON, Markdown)."""
