"""`lnbench inspect`: compile-only facts of every FlyDSL kernel variant, and with `--execute` what each launch
executes on the emulated device (the click command `inspect_command` in `command`)."""
