"""`lnbench plot`: PNG pictures of result files (perf bandwidth, compare ratios, verify error margins).

Needs matplotlib (`pip install -e ".[plot]"`); reads only result files, never runs anything."""
