"""What every run command is built on, above the command line's shared options (lnbench.cli_common): its set-up
(`setup`: config, kernel sources, preflight, shapes that fit, outputs reserved) and its result sink (`sink`: the
finished cases in the result files while it runs, an interrupt or a crash losing none).

Layer 7 (command plumbing), with cli_common and store: the commands (layer 8) import it; nothing below does.
"""
