"""`lnbench env`: devices, software versions, the emulator and every backend's availability.

Modules: `facts` (what this machine has, as rows) and `command` (the click command `env_command`)."""
