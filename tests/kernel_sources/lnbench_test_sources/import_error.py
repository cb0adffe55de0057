"""Test kernel source that cannot be imported (a dependency it needs is missing)."""
import lnbench_test_sources_missing_dependency  # noqa: F401


def build_layernorm_module(N, dtype_str, store_stats=False, eps=1e-5):
    raise AssertionError("never reached")
