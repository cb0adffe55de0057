"""How a run runs: the device it runs on and what the run records about it (`device`, `metadata`, `checkout`,
`clocks`), several GPUs and shards (`gpus`, `shard`), worker processes and signals (`processes`), progress and
the time left (`progress`, `eta`, `calibration`: estimates from what earlier runs on this machine took).

Each module keeps its layer (lnbench.layers): `processes`, `progress`, `eta`, `calibration`, `clocks` and
`checkout` are leaf utilities (layer 0); `device` and `metadata` sit above the emulator (layer 3); `gpus` and
`shard` are command plumbing (layer 7). The package's own __init__ imports nothing.
"""
