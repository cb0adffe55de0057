"""`lnbench plot`: PNG pictures of result files (perf bandwidth, compare ratios, verify error margins).

Needs matplotlib (`pip install 'matplotlib>=3.7'`); reads only result files, never runs anything."""
