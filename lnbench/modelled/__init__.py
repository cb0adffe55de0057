"""Modelled performance on the emulated device: Instinct targets described by published figures (targets.py),
the occupancy a launch's registers and LDS allow (occupancy.py), and lower-bound floors per launch and target
(floors.py). Nothing here is a measurement: every number it makes is labelled `modelled` where it is shown."""
