"""Test kernel source: pointer_ln, except that rows of 4096 or more never finish building: the builder waits until
the run is stopped (a stop signal ends the wait). A run holding such a case cannot end before a test stops it,
however fast the machine (tests/test_user_run.py's signal tests)."""
import time

from lnbench_test_sources.common import build_backward, build_forward

WIDE = 4096


def _stall(n):
    while n >= WIDE:
        time.sleep(1)


def build_layernorm_module(N, dtype_str, store_stats=False, eps=1e-5):
    _stall(N)
    return build_forward(N, dtype_str, store_stats, eps)


def build_layernorm_bwd_module(N, dtype_str):
    _stall(N)
    return build_backward(N, dtype_str)
