"""The SIMD extensions numpy dispatches to on this CPU beyond its build's baseline, space-separated (for
NPY_DISABLE_CPU_FEATURES); with --show, the baseline and the extensions numpy uses now."""

import sys

try:  # numpy >= 2
    from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__
except ImportError:  # numpy 1.x
    from numpy.core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__

used = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
if "--show" in sys.argv[1:]:
    print(f"numpy SIMD: baseline {' '.join(__cpu_baseline__)}; dispatched now: {' '.join(used) or 'nothing more'}")
else:
    print(" ".join(used))
