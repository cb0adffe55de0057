"""How a run runs: the device it runs on and what the run records about it (`device`, `metadata`, `clocks`),
signals and process lifetime (`processes`), the one worker mechanism of verify, perf and abi-compare (`pool`:
a worker module run again, spawned or forked, its output in files; `workers`: one spec per worker in timed turns;
`units`: a queue of units dealt to free workers), several GPUs and shards (`gpus`, `shard`), progress and the
time left (`progress`, `eta`, `upfront`, `calibration`: estimates from what earlier runs on this machine took).

Layer 3 (lnbench.layers), above the emulator: it imports the leaf utilities, settings and the emulator, never
the kernels, backends, measurement or a command. The package's own __init__ imports nothing.
"""
