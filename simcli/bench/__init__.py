"""Micro-benchmarks with torch.distributed (optional extra: pip install 'simcli[bench]').

Layout:

* :mod:`.stats`     pure maths: median/p10/p90 of per-iteration times, algbw/busbw, the alpha-beta fit
* :mod:`.results`   CSV written row by row as measured, with a metadata header
* :mod:`.launch`    spawn one process per rank on 127.0.0.1 (or join a torchrun world), timeouts, cleanup
* :mod:`.runs`      a command's worlds: sizes (or torchrun's), backend, each world in turn; a step record's prediction
* :mod:`.worker`    what each rank runs: process group, device, fault hook, dispatch to a task
* :mod:`.allreduce` the all_reduce timing loop
* :mod:`.step`      the data-parallel training step and the gradient identity check
* :mod:`.nccltests` reader of nccl-tests' ``all_reduce_perf`` text table and ``-J`` JSON

Only :mod:`.worker`, :mod:`.allreduce` and :mod:`.step` import torch, and only
inside the rank processes (or under torchrun); the parent imports none of it
unless it checks that torch is installed (:func:`require_torch`) or which backend
and memory it has (:mod:`.runs`, inside those functions).
"""

from __future__ import annotations

import importlib.util

from ..base.types import InputError

__all__ = ["require_torch", "INSTALL_HINT"]

INSTALL_HINT = (
    "simcli bench needs torch: pip install 'simcli[bench]' (on a CPU-only machine first "
    "`pip install torch==2.13.0` for the CPU build)"
)


def require_torch() -> str:
    """Return torch's version, or raise InputError with the one line that says how to install it."""

    if importlib.util.find_spec("torch") is None:
        raise InputError(INSTALL_HINT)
    try:
        import torch  # heavy
    except ImportError as e:  # installed but broken
        raise InputError(f"{INSTALL_HINT} (import torch failed: {e})") from None
    return str(torch.__version__)
