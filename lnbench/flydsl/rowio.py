"""Row views and vector loads/stores shared by the kernels (no runtime `if`s: module level).

A row is viewed as `chunks` aligned vectors of `vec` elements through a buffer descriptor whose
byte count bounds the access: chunks past the row end read 0 and their stores are dropped, and
a row past M gets a byte count of 0, so the whole row is masked without a branch.
"""
from __future__ import annotations

import flydsl.expr as fx

DTYPES = {"f32": fx.Float32, "f16": fx.Float16, "bf16": fx.BFloat16}
ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2}


def dsl_dtype(name: str):
    return DTYPES[name]


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


def store_from_f32(atom, chunks_view, idx, value, vec: int, dtype_name: str) -> None:
    """Narrow an fp32 vector to the tensor dtype (RNE) and store it as chunk `idx`."""
    r = fx.make_rmem_tensor(vec, DTYPES[dtype_name])
    fx.memref_store_vec(value if dtype_name == "f32" else value.to(DTYPES[dtype_name]), r)
    fx.copy(atom, r, fx.slice(chunks_view, (None, idx)))


def store_scalar_f32(ptr, index, value, nbytes) -> None:
    """Store one fp32 at ptr[index]; nbytes=0 drops the store (used to pick one writer lane)."""
    view = chunked(ptr + fx.Int64(index), 1, 1, nbytes)
    r = fx.make_rmem_tensor(1, fx.Float32)
    fx.memref_store_vec(fx.full(1, value, fx.Float32), r)
    fx.copy(fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Float32), r, fx.slice(view, (None, 0)))


def load_scalar_f32(ptr, index, nbytes):
    """Load one fp32 ptr[index] (0.0 when nbytes is 0)."""
    view = chunked(ptr + fx.Int64(index), 1, 1, nbytes)
    r = fx.make_rmem_tensor(1, fx.Float32)
    fx.copy(fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Float32), fx.slice(view, (None, 0)), r)
    return fx.memref_load_vec(r)[0]
