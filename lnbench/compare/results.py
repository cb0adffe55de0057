"""Reading lnbench result files: moved to lnbench.results (the result model); these names stay for callers."""
from lnbench.results import (ABI_KIND as ABI, COMPARE_KIND as COMPARE, PERF_KIND as PERF,  # noqa: F401
                             VERIFY_KIND as VERIFY, ResultFile, load_result, require_columns, rows_of)

KINDS: tuple[str, ...] = (PERF, ABI, VERIFY, COMPARE)
