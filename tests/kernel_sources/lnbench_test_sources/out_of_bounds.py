"""Test kernel source with a planted bug: the forward writes one element past the end of each row of y
(past the end of y on the last row), which the emulator's memory checker must catch."""
from lnbench_test_sources.common import build_backward, build_forward


def build_layernorm_module(N, dtype_str, store_stats=False, eps=1e-5):
    return build_forward(N, dtype_str, store_stats, eps, fault="oob")


def build_layernorm_bwd_module(N, dtype_str):
    return build_backward(N, dtype_str)
