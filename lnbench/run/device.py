"""Where lnbench runs: one value answers where tensors live, which arch kernels compile for, which stream
launches go on, whether time means anything and how result rows are labelled.

    cpu, cuda, cuda:N     torch devices (a ROCm GPU is `cuda` in torch; kind "rocm" here)
    emu, emu:gfx942/950   the emulated AMD device: tensors in CPU memory, FlyDSL's real launch path
                          against a stand-in HIP library, kernels run by an instruction-set emulator
    null, null:gfx942/950 the null device: FlyDSL's real launch path against the same stand-in, but every
                          launch completes at once without executing (memory is host memory): host cost only
"""
from __future__ import annotations

import contextlib
import platform
from dataclasses import dataclass
from typing import ContextManager, Mapping

import torch

from lnbench.constants import ARCHES
from lnbench.emu import EmulatorUnavailable
from lnbench.errors import LnbenchUsageError, one_line
from lnbench.machine.install import install_hint
from lnbench.run.processes import check_stop

EMU = "emu"
NULL = "null"
DEFAULT_EMU_ARCH = ARCHES[0]
EMU_INSTALL_HINT = install_hint("emu")
KINDS: tuple[str, ...] = ("cpu", "cuda", "rocm", "emu", "null")


@dataclass(frozen=True)
class Device:
    """A device lnbench runs on. Commands ask it questions instead of testing its name."""

    name: str                    # "cpu", "cuda:0", "emu:gfx942", "null:gfx942"
    kind: str                    # one of KINDS
    torch_device: torch.device   # where tensors live (the CPU for the emulated and the null device)
    arch: str                    # gfx942 / sm_90 / x86_64

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("cuda", "rocm")

    @property
    def emulated(self) -> bool:
        return self.kind == EMU

    @property
    def is_null(self) -> bool:
        """The null device: launches go through FlyDSL's launch path and complete without executing."""
        return self.kind == NULL

    @property
    def executes_flydsl(self) -> bool:
        """FlyDSL kernels execute here (their outputs are results): a ROCm GPU, or the emulator."""
        return self.kind in ("rocm", EMU)

    @property
    def launches_flydsl(self) -> bool:
        """FlyDSL's launch path reaches a device here: where kernels execute, and the null device."""
        return self.executes_flydsl or self.is_null

    @property
    def times_are_real(self) -> bool:
        """Kernel (device) time means something: False on the emulator (its time says nothing about the
        hardware) and on the null device (nothing executes)."""
        return not (self.emulated or self.is_null)

    @property
    def host_times_are_real(self) -> bool:
        """Host time of a call (launch path, wrappers) means something: everywhere but on the emulator,
        whose launches run the kernel inside the call. On the null device it is all there is."""
        return not self.emulated

    @property
    def index(self) -> int:
        """GPU index (the current one when the name has none); -1 off the GPU. Part of compile-cache keys."""
        if not self.is_gpu:
            return -1
        index = self.torch_device.index
        return index if index is not None else torch.cuda.current_device()

    @property
    def label(self) -> str:
        """Human name for tables and result rows: 'AMD Instinct MI300X', 'cpu (x86_64)', 'emu:gfx942 (emulated)'."""
        if self.emulated:
            return f"{self.name} (emulated)"
        if self.is_null:
            return f"{self.name} (null device: launches complete without executing)"
        if self.is_gpu:
            return torch.cuda.get_device_name(self.torch_device)
        return f"cpu ({platform.machine()})"

    def stream(self) -> torch.cuda.Stream | None:
        """The stream launches go on: the current torch stream on a GPU, None (the null stream) elsewhere."""
        return torch.cuda.current_stream(self.torch_device) if self.is_gpu else None

    def guard(self) -> ContextManager[object]:
        """Make this the current device while compiling and launching (a no-op off the GPU)."""
        return torch.cuda.device(self.torch_device) if self.is_gpu else contextlib.nullcontext()

    def launch_scope(self, buffers: Mapping[str, torch.Tensor],
                     uninitialized: tuple[str, ...] = ()) -> ContextManager[object]:
        """What every compiled-kernel call runs inside. On the emulator: the named buffers are the memory the
        kernel may touch (those in `uninitialized` start with no byte written: initcheck), and a faulting launch
        raises EmulatorFault when the scope closes."""
        if not self.emulated:
            return contextlib.nullcontext()
        from lnbench.emu import runtime
        return runtime.launch_scope(buffers, uninitialized)

    def synchronize(self) -> None:
        """Wait for launched work (emulated launches finish before the call returns)."""
        if self.is_gpu:
            torch.cuda.synchronize(self.torch_device)


def emu_device(arch: str = DEFAULT_EMU_ARCH) -> Device:
    """The emulated device for `arch` (not activated: see resolve_device)."""
    if arch not in ARCHES:
        raise LnbenchUsageError(f"unsupported emulated arch {arch!r}; the emulator runs {', '.join(ARCHES)}")
    return Device(f"{EMU}:{arch}", EMU, torch.device("cpu"), arch)


def null_device(arch: str = DEFAULT_EMU_ARCH) -> Device:
    """The null device for `arch` (not activated: see resolve_device)."""
    if arch not in ARCHES:
        raise LnbenchUsageError(f"unsupported null-device arch {arch!r}; choose from {', '.join(ARCHES)}")
    return Device(f"{NULL}:{arch}", NULL, torch.device("cpu"), arch)


def compile_device(arches: list[str]) -> Device:
    """The device compile-only rows describe (inspect, abi-compare's static part): the target arch(es), on this host."""
    return Device("compile-only", "cpu", torch.device("cpu"), ",".join(arches))


def torch_device_info(device: torch.device) -> Device:
    """The Device of a torch device (a CPU device is plain cpu here, never the emulator)."""
    if device.type != "cuda":
        return Device(str(device), "cpu", device, platform.machine())
    props = torch.cuda.get_device_properties(device)
    if torch.version.hip is not None:
        return Device(str(device), "rocm", device, str(getattr(props, "gcnArchName", "unknown")).split(":")[0])
    return Device(str(device), "cuda", device, f"sm_{props.major}{props.minor}")


def parse_device(name: str | None) -> Device:
    """--device value -> Device, checked but not activated. None/auto = the GPU when torch sees one, else cpu."""
    if name is not None:
        name = name.strip().lower()                      # EMU, Cuda:0 and emu:GFX950 mean the same
    if name is None or name == "auto":
        return torch_device_info(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    if name == EMU:
        return emu_device(DEFAULT_EMU_ARCH)
    if name.startswith(f"{EMU}:"):
        return emu_device(name.partition(":")[2])
    if name == NULL:
        return null_device(DEFAULT_EMU_ARCH)
    if name.startswith(f"{NULL}:"):
        return null_device(name.partition(":")[2])
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise LnbenchUsageError(f"unknown device {name!r}; use cpu, cuda, cuda:N or emu[:gfx942|gfx950] "
                                f"(null[:gfx942|gfx950] for FlyDSL's host cost only)") from None
    if device.type not in ("cpu", "cuda"):
        raise LnbenchUsageError(f"unsupported device {name!r}; use cpu, cuda, cuda:N (ROCm GPUs are cuda:N in torch) "
                                f"or emu[:gfx942|gfx950] (null[:gfx942|gfx950] for FlyDSL's host cost only)")
    if device.type == "cpu" and device.index not in (None, 0):
        raise LnbenchUsageError(f"device {name!r}: the CPU is one device, use cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise LnbenchUsageError(f"device {name!r} asked for, but torch sees no GPU")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise LnbenchUsageError(f"device {name!r} does not exist: torch sees {torch.cuda.device_count()} GPU(s)")
    return torch_device_info(device)


def device_names_here() -> list[str]:
    """The --device names that run on this machine: cpu, each GPU torch sees, and, where the emulator can run,
    the emulated and null device of every arch."""
    names = ["cpu", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]
    if emulator_status()[0]:
        names += [f"{kind}:{arch}" for kind in (EMU, NULL) for arch in ARCHES]
    return names


def emulator_status() -> tuple[bool, str]:
    """(True, "") when the emulated device can run in this process, else (False, why). Never raises."""
    try:
        from lnbench.emu import runtime
    except ImportError as exc:
        return False, f"{one_line(exc)}: {EMU_INSTALL_HINT}"
    try:
        return runtime.availability()
    except Exception as exc:  # noqa: BLE001 - a broken emulator install must read "unavailable", not crash
        return False, one_line(exc)


def activate(device: Device) -> Device:
    """Make `device` usable: for the emulated or null device, check it can run here and set its arch and mode
    (a usage error if not). Either must be activated before FlyDSL first loads its runtime in the process."""
    if not (device.emulated or device.is_null):
        return device
    ok, reason = emulator_status()
    if ok:
        from lnbench.emu import runtime
        from lnbench.emu.machine import set_stop_check
        try:
            if device.is_null:
                runtime.activate_null(device.arch)
            else:
                runtime.activate(device.arch)
                set_stop_check(check_stop)       # a stop swallowed by a launch callback raises between steps
        except EmulatorUnavailable as exc:      # e.g. the HIP stand-in failed to build
            ok, reason = False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if not ok:
        raise LnbenchUsageError(f"device {device.name!r} is unavailable: {reason}")
    return device


def resolve_device(name: str | None) -> Device:
    """--device value -> an active Device; bad or unusable devices are one-line usage errors."""
    return activate(parse_device(name))


def resolve_kernel_device(name: str | None) -> Device:
    """Like resolve_device, but `auto` (or no name) prefers a device that runs the FlyDSL kernels: the GPU
    torch sees, else the emulated device where it is available, else the cpu."""
    if name not in (None, "auto") or torch.cuda.is_available() or not emulator_status()[0]:
        return resolve_device(name)
    try:
        return resolve_device(EMU)
    except LnbenchUsageError:                     # e.g. the HIP stand-in failed to build: plain cpu
        return resolve_device("cpu")


def active_emulated_arch() -> str | None:
    """The arch of the emulated device activated in this process, or None."""
    try:
        from lnbench.emu import runtime
    except ImportError:
        return None
    return runtime.current_arch()


def active_null_arch() -> str | None:
    """The arch of the null device activated in this process, or None."""
    try:
        from lnbench.emu import runtime
    except ImportError:
        return None
    return runtime.null_arch()


def device_of(tensor: torch.Tensor) -> Device:
    """The device that runs kernels on `tensor`'s memory: its GPU, else the active emulated or null device,
    else cpu."""
    if tensor.device.type == "cpu":
        arch = active_emulated_arch()
        if arch is not None:
            return emu_device(arch)
        arch = active_null_arch()
        if arch is not None:
            return null_device(arch)
    return torch_device_info(tensor.device)
