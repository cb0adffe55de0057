"""`lnbench env`: devices, software versions, the emulator and every backend's availability."""
from __future__ import annotations

from typing import TYPE_CHECKING

import click

from lnbench.cli_common import console, device_option, guarded

if TYPE_CHECKING:  # pragma: no cover
    from lnbench.run.device import Device


@click.command("env")
@device_option("Device to check backends on: cpu, cuda, cuda:N, emu[:gfx950] (default: the device each bare command "
               "would use: verify's, and perf's where that differs).")
@guarded
def env_command(device: str | None) -> int:
    """Print devices, software versions, the emulator, every backend's availability and the FlyDSL toolkit."""
    from lnbench.env.facts import backend_facts, device_facts, software_facts
    from lnbench.output.tables import Column, render_table
    from lnbench.run.device import activate, parse_device

    software = [{"item": k, "value": v} for k, v in software_facts().items()]
    render_table(console, "software", [Column("item", "item", justify="left"), Column("value", "value", justify="left")],
                 software)
    render_table(console, "devices", [Column(k, k, justify="left") for k in ("device", "name", "arch")], device_facts())
    columns = [Column(k, k, justify="left") for k in ("backend", "status", "reason", "ops", "description")]
    if device is not None:
        dev = activate(parse_device(device))  # an unusable emulator ends here (exit 2, one line) after the facts above
        render_table(console, f"backends on {dev.name}", columns, backend_facts(dev))
        return 0
    for dev, who in default_devices():
        render_table(console, f"backends on {dev.label}: what `{who}` uses here", columns, backend_facts(dev))
    return 0


def default_devices() -> list[tuple[Device, str]]:
    """The devices bare commands use here, each with the commands that use it: verify (and inspect --execute)
    prefers a device that runs the FlyDSL kernels (the emulated one on a machine without a ROCm GPU), perf and
    abi-compare's runtime part time on the GPU torch sees, else the cpu."""
    from lnbench.run.device import activate, parse_device, resolve_kernel_device

    kernel, timed = resolve_kernel_device(None), activate(parse_device(None))
    if kernel.name == timed.name:
        return [(kernel, "lnbench verify` and `lnbench perf")]
    return [(kernel, "lnbench verify"), (timed, "lnbench perf")]
