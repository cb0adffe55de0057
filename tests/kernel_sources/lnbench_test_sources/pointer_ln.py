"""Test kernel source: Pointer ABI, forward and backward (the full builder contract)."""
from lnbench_test_sources.common import build_backward, build_forward


def build_layernorm_module(N, dtype_str, store_stats=False, eps=1e-5):
    return build_forward(N, dtype_str, store_stats, eps)


def build_layernorm_bwd_module(N, dtype_str):
    return build_backward(N, dtype_str)
