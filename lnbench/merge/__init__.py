"""`lnbench merge`: the result files of one command's parts (`--shard K/N`) joined into one result (the click
command `merge_command` in `command`)."""
