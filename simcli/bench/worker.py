"""One rank of a benchmark world: ``python -m simcli.bench.worker`` (spawned) or in-process (torchrun).

Reads its task and config from the environment that :mod:`simcli.bench.launch`
sets (or that torchrun sets, for RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT),
initialises the process group, runs the task and, on rank 0, sends each
measured record as it is measured. Exit codes: 0 ok, 1 error (one line on
stderr starting with ``simcli-worker:``), 3 gradient identity check failed.
"""

from __future__ import annotations

import datetime
import gc
import json
import mmap
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable

from .allreduce import measure_allreduce
from .dist import Dist
from .launch import FAULT_ENV, IdentityError
from .step import measure_step

__all__ = ["init", "run_task", "main"]


def _parse_fault(spec: str | None, rank: int, world: int) -> tuple[int, int, str] | None:
    if not spec:
        return None
    parts = spec.split(":")
    r, idx, mode = int(parts[0]), int(parts[1]), parts[2]
    if len(parts) > 3 and int(parts[3]) != world:
        return None
    return (r, idx, mode)


def pick_backend(backend: str) -> str:
    import torch  # heavy

    if backend == "auto":
        return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > 0 else "gloo"
    return backend


def init(
    backend: str,
    rank: int,
    world_size: int,
    *,
    local_rank: int,
    local_world_size: int,
    timeout_s: float,
    progress_path: str | None = None,
    fault: str | None = None,
    emit_fn: Callable[[dict], None] | None = None,
    init_method: str = "env://",
) -> Dist:
    """Join the process group; pick this rank's device (cuda:LOCAL_RANK under nccl)."""
    import torch  # heavy
    import torch.distributed as dist  # heavy

    backend = pick_backend(backend)
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    # the group's own timeout is a backstop behind the launcher's watchdog (no progress for timeout_s): were they
    # equal, a healthy peer of a hung rank could time out its recv first, and the report would name the peer
    kwargs: dict[str, Any] = {"timeout": datetime.timedelta(seconds=2.0 * max(timeout_s, 1.0) + 10.0)}
    if backend == "nccl":
        kwargs["device_id"] = device
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size, **kwargs)
    prog = None
    if progress_path:
        f = open(progress_path, "r+b")
        prog = mmap.mmap(f.fileno(), 8 * world_size)
    return Dist(
        rank,
        world_size,
        local_rank,
        local_world_size,
        backend,
        device,
        emit_fn,
        prog,
        _parse_fault(fault, rank, world_size),
    )


def run_task(task: str, d: Dist, config: dict[str, Any]) -> None:
    if task == "allreduce":
        measure_allreduce(d, **config)
    elif task == "step":
        measure_step(d, **config)
    else:  # pragma: no cover - the CLI only sends these two
        raise ValueError(f"unknown task {task!r}")


def shutdown() -> None:
    """Destroy the process group while the interpreter is still fully alive, joining gloo's threads.

    Gloo runs each collective on a worker thread, which drops its reference to the finished work (and to
    the work's tensors) just *after* ``wait()`` has returned on the main thread. When that is the last
    reference to a tensor that owns a Python object, the worker thread must take the GIL to free it. If the
    main thread has reached interpreter finalisation by then, a non-main thread that asks for the GIL is
    ended with ``pthread_exit``, whose unwinding crosses a ``noexcept`` C++ frame: ``std::terminate``
    aborts the rank with signal 6 ("terminate called without an active exception"; seen in a core dump,
    torch 2.13 / gloo). Destroying the group joins those threads only if nothing else holds it; collect
    garbage first so that freed DDP modules let go of it. That is not always enough (see ``end_rank``).
    """

    import torch.distributed as dist  # heavy

    gc.collect()
    dist.destroy_process_group()


def end_rank(code: int) -> None:
    """End a rank without interpreter finalisation, as ``multiprocessing`` ends its children: a spawned rank here,
    a rank torchrun launched at the end of ``simcli.cli.app.main``.

    ``shutdown`` is not enough on its own: constructing a DistributedDataParallel module leaves references
    to the process group inside torch (torch 2.13: the group's refcount stays raised after the module and
    its reducer are freed and collected), so its destructor never runs and its threads never join. Any of
    them may still be freeing a finished collective's tensors when the interpreter finalises, and that
    aborts the rank (see ``shutdown``). Everything this rank produces has been written and flushed by now.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _watch_parent(parent: int) -> None:
    """Exit when the process that spawned this rank is gone (no orphans if it is SIGKILLed)."""

    def loop() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=loop, daemon=True, name="simcli-parent-watch").start()


def main() -> int:
    env = os.environ
    parent = env.get("SIMCLI_BENCH_PARENT")
    if parent:
        _watch_parent(int(parent))
    task = env["SIMCLI_BENCH_TASK"]
    config = json.loads(env["SIMCLI_BENCH_CONFIG"])
    config.pop("progress_unit", None)
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    out = None
    if env.get("SIMCLI_BENCH_RESULT_FD"):
        out = os.fdopen(int(env["SIMCLI_BENCH_RESULT_FD"]), "w", buffering=1)

    def emit(rec: dict) -> None:
        if out is not None:
            out.write(json.dumps({"type": "record", "record": rec}) + "\n")
            out.flush()

    import torch  # heavy

    if env.get("SIMCLI_BENCH_THREADS"):
        torch.set_num_threads(int(env["SIMCLI_BENCH_THREADS"]))
    try:
        d = init(
            config.pop("backend"),
            rank,
            world,
            local_rank=int(env.get("LOCAL_RANK", rank)),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", world)),
            timeout_s=float(env.get("SIMCLI_BENCH_TIMEOUT", "300")),
            progress_path=env.get("SIMCLI_BENCH_PROGRESS"),
            fault=env.get(FAULT_ENV),
            emit_fn=emit,
        )
        run_task(task, d, config)
        d.finished()
        shutdown()
    except IdentityError as e:
        sys.stderr.write(f"simcli-worker: {e}\n")
        return 3
    except Exception as e:  # one line for the parent's message; the traceback stays in the rank's log
        traceback.print_exc()
        sys.stderr.write(f"simcli-worker: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}\n")
        return 1
    finally:
        if out is not None:
            out.close()
    return 0


if __name__ == "__main__":
    end_rank(main())
