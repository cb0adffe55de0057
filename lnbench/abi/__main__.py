"""`python -m lnbench.abi [OPTIONS]`: the abi-compare command without the lnbench group (same options)."""
from lnbench.abi.command import abi_compare_command

if __name__ == "__main__":  # pragma: no cover
    abi_compare_command(prog_name="lnbench abi-compare")
