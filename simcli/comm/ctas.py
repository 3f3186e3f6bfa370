"""NCCL_MIN_CTAS and NCCL_MAX_CTAS: the channels (CTAs) NCCL's kernels run on, as the communicator's
``config.minCTAs``/``config.maxCTAs`` set them.

Source, the same text in every carried release (NVIDIA/nccl v2.20.3-1 and v2.29.7-1):

* ``src/init.cc`` (v2.20.3-1 lines 1388-1389, 1565-1573, 1592-1600): ``NCCL_MIN_CTAS``/``NCCL_MAX_CTAS`` override
  the config's minCTAs/maxCTAs, each capped at MAXCHANNELS (32), and a minimum above the maximum is lowered to it.
* ``src/graph/connect.cc`` ``ncclTopoPostset`` (v2.20.3-1 lines 464-468): ``comm->nChannels =
  min(NCCL_MAX_NCHANNELS, nChannels, maxCTAs)`` and then ``copyChannels(comm, nChannels, max(NCCL_MIN_NCHANNELS,
  minCTAs), ...)``: the rings and trees are copied until there are at least minCTAs of them.
* ``src/transport/nvls.cc`` (v2.20.3-1 line 258; v2.26.2-1 line 178): ``comm->nvlsChannels = max(minCTAs,
  min(maxCTAs, NCCL_NVLS_NCHANNELS))``.
* ``src/graph/tuning.cc`` reads the *graphs'* channels (``graphs[a]->nChannels``), not these: NCCL's choice does not
  change with them. ``src/enqueue.cc`` (getAlgoInfo, v2.20.3-1 lines 1531-1560) starts from ``comm->collChannels``
  and drops channels while ``nBytes < nc·nThreads·threadThreshold``; NVLS runs all of ``comm->nvlsChannels``.

So in simcli the two settings move the runtime channels (a ring's or tree's bandwidth at a size is its full
bandwidth x the channels launched / the runtime channels, :func:`simcli.comm.nccl_choice.nccl_collective`) and
NVLS's concurrent operations (its pipeline fill), and leave the tuner's view alone.
"""

from __future__ import annotations

import numpy as np

from ..base.types import NcclSpec

__all__ = ["MAX_CHANNELS", "runtime_channels", "nvls_channels"]

#: MAXCHANNELS (src/include/device.h v2.20.3-1): the most channels a communicator has
MAX_CHANNELS = 32


def _limits(spec: NcclSpec) -> tuple[float, float]:
    """(minCTAs, maxCTAs) as init.cc leaves them: each at most MAXCHANNELS, the minimum at most the maximum."""
    hi = float(min(spec.max_ctas, MAX_CHANNELS)) if spec.max_ctas is not None else float(MAX_CHANNELS)
    lo = float(min(spec.min_ctas, MAX_CHANNELS)) if spec.min_ctas is not None else 1.0
    return min(lo, hi), hi


def runtime_channels(channels: np.ndarray, spec: NcclSpec) -> np.ndarray:
    """The ring/tree channels the kernels run on (``comm->nChannels``) given what ncclTopoPostset makes without the
    settings: at most maxCTAs, then copied up to minCTAs."""
    if spec.min_ctas is None and spec.max_ctas is None:
        return channels
    lo, hi = _limits(spec)
    return np.maximum(np.minimum(np.asarray(channels, dtype=np.float64), hi), lo)


def nvls_channels(spec: NcclSpec, channels: np.ndarray | float | None = None) -> np.ndarray | float:
    """NVLS's channels (``comm->nvlsChannels``): ``channels`` (the release's count; the profile's
    ``nvls_channels``, NCCL_NVLS_NCHANNELS, where not given) within [minCTAs, maxCTAs]."""
    n = float(spec.nvls_channels) if channels is None else channels
    if spec.min_ctas is None and spec.max_ctas is None:
        return n
    lo, hi = _limits(spec)
    return np.maximum(lo, np.minimum(hi, n)) if isinstance(n, np.ndarray) else max(lo, min(hi, n))
