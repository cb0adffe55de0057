"""An emulated CDNA device: FlyDSL's real launch path against a stand-in HIP library, and the
compiled gfx942/gfx950 code objects executed by a wave64 instruction-set emulator.

Layout (one job per module):
  codeobject  ELF, msgpack metadata and kernel descriptors
  decode      machine code -> pre-decoded instructions (tinygrad's CDNA decoder)
  state       per-wave registers, LDS, scratch
  ops_*       the semantics, one handler per opcode family, by instruction class
  registry    the opcode registry the ops_* modules fill; semantics binds decoded instructions to it
  memory      host memory seen by kernels, the allocation map and the memory checker
  machine     the scheduler: workgroups, waves in lockstep, barriers
  hip         the stand-in libamdhip64.so.7 (C source, built with ziglang), its loader and callback
  runtime     what lnbench's wrappers call: activate(arch), launch_scope(buffers)
"""
from lnbench.emu.errors import EmulatorFault, EmulatorUnavailable

__all__ = ["EmulatorFault", "EmulatorUnavailable"]
