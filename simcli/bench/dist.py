"""This rank's place in a benchmark world (:class:`Dist`): built by the worker, used by the tasks."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .launch import FAULT_ENV, PROGRESS_DONE

__all__ = ["Dist"]


@dataclass
class Dist:
    """This rank's place in the world and the little services the tasks use."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str
    device: Any  # torch.device
    emit_fn: Callable[[dict], None] | None = None
    _progress: Any = field(default=None, repr=False)
    _fault: tuple[int, int, str] | None = None

    def emit(self, record: dict) -> None:
        """Rank 0 hands one measured record to whoever writes the results."""
        if self.rank == 0 and self.emit_fn is not None:
            self.emit_fn(record)

    def fault(self, mode: str) -> bool:
        """Is the test hook asking this rank for ``mode`` (e.g. "grad": perturb the averaged gradient)?"""
        return self._fault is not None and self._fault[0] == self.rank and self._fault[2] == mode

    def checkpoint(self, index: int) -> None:
        """Mark that this rank starts unit ``index`` (a message size or a step); the fault hook acts here."""
        if (
            self._fault is not None
            and self._fault[0] == self.rank
            and self._fault[1] == index
            and self._fault[2] in ("exit", "hang")
        ):
            if self._fault[2] == "hang":
                while True:
                    time.sleep(3600)
            sys.stderr.write(f"simcli-worker: test fault hook ({FAULT_ENV}) made rank {self.rank} exit\n")
            sys.stderr.flush()
            os._exit(17)
        self._mark(index + 1)

    def finished(self) -> None:
        """Mark that this rank has measured everything (what is left is the shutdown)."""
        self._mark(PROGRESS_DONE)

    def _mark(self, value: int) -> None:
        if self._progress is not None:
            self._progress[8 * self.rank : 8 * self.rank + 8] = value.to_bytes(8, "little")

    def sync(self) -> None:
        """Wait for the device (GPU kernels are asynchronous); nothing to do on CPU."""
        if self.device.type == "cuda":
            import torch  # heavy

            torch.cuda.synchronize(self.device)
