"""Test kernel source: pointer_ln with a planted second variance pass in the forward (more work, same values):
`lnbench compare --fail-if-slower` on modelled perf runs must catch it."""
from lnbench_test_sources.common import build_backward, build_forward


def build_layernorm_module(N, dtype_str, store_stats=False, eps=1e-5):
    return build_forward(N, dtype_str, store_stats, eps, fault="heavy")


def build_layernorm_bwd_module(N, dtype_str):
    return build_backward(N, dtype_str)
