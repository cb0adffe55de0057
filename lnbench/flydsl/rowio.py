"""Row views, vector loads/stores and the streaming tile loop shared by the kernels (no runtime `if`s:
module level).

A row is viewed as `chunks` aligned vectors of `vec` elements through a buffer descriptor whose
byte count bounds the access: chunks past the row end read 0 and their stores are dropped, and
a row past M gets a byte count of 0, so the whole row is masked without a branch.
"""
from __future__ import annotations

import os
from typing import Callable

import flydsl.expr as fx

from lnbench.constants import ELEM_BYTES
# FlyDSL 0.5's builder behind a rewritten `for i in range(...)` (scf.for with loop-carried values). Module-level
# helpers are not AST-rewritten (primer pitfall 6), so the streaming loop calls it directly.
from flydsl.compiler.ast_rewriter import InsertEmptyYieldForSCFFor as _ScfFor
from flydsl.compiler.ast_rewriter import ReplaceIfWithDispatch as _ScfIf

DTYPES = {"f32": fx.Float32, "f16": fx.Float16, "bf16": fx.BFloat16}


def copy_atom(vec: int, dtype_name: str):
    """Buffer copy atom moving `vec` elements in one instruction (16 bytes max)."""
    bits = vec * ELEM_BYTES[dtype_name] * 8
    return fx.make_copy_atom(fx.rocdl.BufferCopy(bits), DTYPES[dtype_name])


def chunked(ptr, n: int, vec: int, nbytes):
    """Buffer view of n elements at `ptr` (a typed fx.Pointer) split into (vec, n // vec) chunks.

    nbytes: the descriptor byte count (traced Int32/Int64 or Python int) bounding the access.
    """
    view = fx.rocdl.make_buffer_tensor(ptr.view(fx.make_layout(n, 1)), num_records_bytes=nbytes)
    return fx.logical_divide(view, fx.make_layout(vec, 1))


def tile_view(ptr, t, lanes: int, vec: int, nbytes):
    """Tile t of a row at `ptr` (its chunks t*lanes .. t*lanes+lanes-1) as a chunked view indexed by the lane.

    The tile's offset moves the (uniform, SGPR) descriptor base, so a lane's byte offset is the same for every
    tile of every buffer: one VGPR of addresses however many tiles a streaming loop visits. t: a traced Int32
    or an int; nbytes bounds this tile (the rest of the row for the last one, 0 for a row past M)."""
    return chunked(ptr + fx.Int64(t) * (lanes * vec), lanes * vec, vec, nbytes)


def load_f32(atom, chunks_view, idx, vec: int, dtype_name: str):
    """Load chunk `idx` and widen it to a vector of fp32."""
    r = fx.make_rmem_tensor(vec, DTYPES[dtype_name])
    fx.copy(atom, fx.slice(chunks_view, (None, idx)), r)
    v = fx.memref_load_vec(r)
    return v if dtype_name == "f32" else v.to(fx.Float32)


def load_raw(atom, chunks_view, idx, vec: int, dtype_name: str):
    """Load chunk `idx` in the tensor dtype (half the registers of fp32 for 16-bit types)."""
    r = fx.make_rmem_tensor(vec, DTYPES[dtype_name])
    fx.copy(atom, fx.slice(chunks_view, (None, idx)), r)
    return fx.memref_load_vec(r)


def widen(v, dtype_name: str):
    return v if dtype_name == "f32" else v.to(fx.Float32)


def _target_arch() -> str:
    """The arch being compiled for: lnbench's compile env (and FlyDSL) set FLYDSL_GPU_ARCH while tracing."""
    return os.environ.get("FLYDSL_GPU_ARCH") or os.environ.get("ARCH") or ""


def to_bf16(value, vec: int):
    """fp32 vector -> bf16, rounding to nearest even. Archs without a packed bf16 convert (gfx942) get the
    rounding as integer arithmetic on the bits (u + 0x7FFF + lsb, top half kept; two results per dword):
    2-3 instructions per element where the compiler's generic lowering takes 5-6 (it also quiets NaN
    payloads, which these kernels never produce: their NaNs come out of fp32 arithmetic, already quiet)."""
    if _target_arch().startswith("gfx95") or vec % 2:
        return value.to(fx.BFloat16)
    u = value.bitcast(fx.Uint32)
    r = u + ((u >> 16) & 1) + 0x7FFF                     # the bf16 result in the top half
    halves = r.bitcast(fx.Uint16)                        # the top halves of two results: one v_perm_b32
    return halves.shuffle(halves, list(range(1, 2 * vec, 2))).bitcast(fx.BFloat16)


def store_from_f32(atom, chunks_view, idx, value, vec: int, dtype_name: str) -> None:
    """Narrow an fp32 vector to the tensor dtype (RNE) and store it as chunk `idx`."""
    r = fx.make_rmem_tensor(vec, DTYPES[dtype_name])
    if dtype_name == "bf16":
        value = to_bf16(value, vec)
    elif dtype_name == "f16":
        value = value.to(fx.Float16)
    fx.memref_store_vec(value, r)
    fx.copy(atom, r, fx.slice(chunks_view, (None, idx)))


def store_f32_at(ptr, size: int, index, value, nbytes) -> None:
    """Store one fp32 at ptr[index] of a `size`-element view bounded by `nbytes`; an index past the bound
    drops the store. With a uniform ptr and nbytes the descriptor is uniform (no per-lane loop): one writer
    lane is picked by giving the others an index past the bound."""
    view = chunked(ptr, size, 1, nbytes)
    r = fx.make_rmem_tensor(1, fx.Float32)
    fx.memref_store_vec(fx.full(1, value, fx.Float32), r)
    fx.copy(fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Float32), r, fx.slice(view, (None, index)))


def load_f32_at(ptr, size: int, index, nbytes):
    """Load one fp32 ptr[index] of a `size`-element view bounded by `nbytes` (0.0 past the bound)."""
    view = chunked(ptr, size, 1, nbytes)
    r = fx.make_rmem_tensor(1, fx.Float32)
    fx.copy(fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Float32), fx.slice(view, (None, index)), r)
    return fx.memref_load_vec(r)[0]


def load_scalar_f32(ptr, index, nbytes):
    """Load one fp32 ptr[index] (0.0 when nbytes is 0)."""
    return load_f32_at(ptr + fx.Int64(index), 1, 0, nbytes)


def runtime_loop(count: int, body: Callable, carry: tuple) -> tuple:
    """scf.for i in [0, count) (i an fx.Int32), not unrolled: carry = body(i, *carry) each iteration.

    `carry` is a tuple of traced values (scalars, vectors, lists of them) whose types the body keeps."""
    names = tuple(f"carry{k}" for k in range(len(carry)))

    def fn(iv, _names, *inner):
        out = body(fx.Int32(iv), *inner)
        return tuple(out) if names else None

    out = _ScfFor.scf_for_dispatch(fx.Int32(0), fx.Int32(count), fx.Int32(1), fn, result_names=names,
                                   result_values=tuple(carry), unroll=1)
    if not names:
        return ()
    return tuple(out) if len(names) > 1 else (out,)


def when(cond, body: Callable[[], None]) -> None:
    """scf.if cond: body() (no results): lanes where cond is false skip the body's memory accesses, and a
    wave where it is false in every lane skips the body."""
    _ScfIf.scf_if_dispatch(cond, body)


def tile_loop(first: int, count: int, step: int, body: Callable, carry: tuple = ()) -> tuple:
    """Visit tiles first .. first+count-1 in order: carry = body(t, *carry), t a traced Int32 or an int.

    A runtime loop of count // step iterations with `step` tiles unrolled in each (their loads in flight
    together), then the remaining count % step tiles unrolled; code size does not grow with the row."""
    iters, rem = divmod(count, step)
    if iters > 1:
        def one(i, *c):
            base = i * step + first
            for u in range(step):
                c = tuple(body(base + u, *c))
            return c
        carry = runtime_loop(iters, one, carry)
    elif iters == 1:
        for u in range(step):
            carry = tuple(body(first + u, *carry))
    for u in range(rem):
        carry = tuple(body(first + iters * step + u, *carry))
    return carry
