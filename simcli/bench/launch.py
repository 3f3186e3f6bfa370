"""Launching a world of ranks: spawned here on 127.0.0.1, or joined under torchrun.

Spawn mode (the default): for each world size k, k fresh processes
``python -m simcli.bench.worker`` with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
set as torchrun sets them, a free TCP port on 127.0.0.1 and therefore a fresh
process group per world size. Rank 0 sends its measured records to this
process over a pipe, one JSON line each, as soon as they are measured.

Robustness:

* every rank runs in its own session (so Ctrl-C reaches only this process,
  which then stops every rank and exits 130), and exits by itself when this
  process disappears (a watchdog thread in the worker);
* a rank that exits non-zero, or a world that runs past ``timeout_s``, stops
  the whole world: SIGTERM to every rank's process group, SIGKILL after a grace
  period, no process left behind; the error names the rank and the world size;
* every rank publishes how far it got (a counter in a shared file), so that a
  hung rank is told apart from the ranks waiting for it in a collective.

torchrun mode: RANK, WORLD_SIZE and MASTER_ADDR in the environment mean that a
launcher made the world; this process is one rank and joins it.
"""

from __future__ import annotations

import functools
import json
import mmap
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar, cast

from ..base.types import InputError, SimcliError

__all__ = [
    "BenchError",
    "torchrun_env",
    "free_port",
    "check_port",
    "check_world_size",
    "run_world",
    "FAULT_ENV",
    "GRACE_S",
]

F = TypeVar("F", bound=Callable[..., Any])

#: test hook: "RANK:INDEX:MODE[:WORLD]" makes rank RANK exit (MODE=exit) or hang (MODE=hang) when it
#: reaches fault point INDEX (the INDEX-th message size, or timed step) in a world of WORLD ranks;
#: MODE=grad perturbs that rank's averaged gradient before the identity check (INDEX ignored)
FAULT_ENV = "SIMCLI_BENCH_FAULT"
#: seconds between SIGTERM and SIGKILL when a world is stopped
GRACE_S = 3.0
#: worker exit code for a failed gradient identity check (the message says what differed)
EXIT_IDENTITY = 3
#: seconds the ranks of a world get to start (import torch, join the process group) before --timeout applies
STARTUP_S = 120.0
#: what a rank writes into its progress slot once it has measured everything (what is left is shutdown)
PROGRESS_DONE = 2**63 - 1


class IdentityError(RuntimeError):
    """The data-parallel identity failed: ranks disagree, or the averaged gradient is not the global one.

    Defined here, not in the worker module, because that module also runs as ``__main__``.
    """


class BenchError(SimcliError):
    """A benchmark world failed (a rank crashed, hung, or a check failed): exit code 1."""


def torchrun_env(env: Mapping[str, str] | None = None) -> dict[str, int | str] | None:
    """The world a launcher (torchrun, SLURM wrappers) put us in, or None when spawning ourselves."""
    env = os.environ if env is None else env
    if not all(k in env for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):
        return None
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local_rank = int(env.get("LOCAL_RANK", rank))
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        raise InputError(
            f"RANK={env['RANK']!r} / WORLD_SIZE={env['WORLD_SIZE']!r} in the environment are not "
            "whole numbers; unset them or launch with torchrun"
        ) from None
    if not (0 <= rank < world):
        raise InputError(f"RANK={rank} is not in 0..WORLD_SIZE-1={world - 1}; check the launcher's environment")
    return {
        "rank": rank,
        "world_size": world,
        "local_rank": local_rank,
        "local_world_size": local_world,
        "master_addr": env["MASTER_ADDR"],
        "master_port": env.get("MASTER_PORT", "29500"),
    }


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel says is free now (another process may still take it: see run_world's retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port(port: int, host: str = "127.0.0.1") -> None:
    """Refuse a --port that is out of range or already in use."""
    if not 1 <= port <= 65535:
        raise InputError(f"--port: {port} is not a TCP port (1..65535); leave --port out to pick a free one")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise InputError(
                f"--port: {host}:{port} is busy ({e.strerror}); choose another port or leave "
                "--port out to pick a free one"
            ) from None


def check_world_size(k: int, backend: str, oversubscribe: bool, *, devices: int | None) -> None:
    """Refuse a world this host cannot sensibly run: more ranks than GPUs, or far more than CPU cores."""
    if backend == "nccl":
        if devices is not None and k > devices:
            raise InputError(
                f"--world-sizes: {k} ranks need {k} GPUs for nccl but this host has {devices}; "
                "ask for at most that many, or use --backend gloo"
            )
        return
    cores = os.cpu_count() or 1
    cap = max(4, 2 * cores)
    if k > cap and not oversubscribe:
        raise InputError(
            f"--world-sizes: {k} ranks on {cores} CPU core(s) would measure the scheduler, not "
            f"the network (at most {cap} here); ask for fewer, or pass --oversubscribe"
        )


@dataclass
class _Rank:
    rank: int
    proc: subprocess.Popen
    log: Path
    returncode: int | None = None
    ended_at: float | None = None


@dataclass
class WorldResult:
    records: list[dict[str, Any]] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)


def _last_line(path: Path, limit: int = 300) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    # prefer the worker's own one-line report over a traceback's last frame
    for ln in reversed(lines):
        if ln.startswith("simcli-worker:"):
            return ln.split(":", 1)[1].strip()[:limit]
    return lines[-1][:limit] if lines else ""


def _stop(ranks: list[_Rank], grace: float = GRACE_S) -> None:
    """SIGTERM every live rank's process group, SIGKILL what is left after ``grace`` seconds, reap all."""
    for r in ranks:
        if r.proc.poll() is None:
            try:
                os.killpg(r.proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + grace
    for r in ranks:
        left = max(0.0, deadline - time.monotonic())
        try:
            r.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            pass
    for r in ranks:
        # the group too: a rank's own children (none today) must not survive it
        try:
            os.killpg(r.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        r.proc.wait()


def _on_a_free_port(fn: F) -> F:
    """``fn`` (:func:`run_world`) with ``port`` 0 run on a free port, picked again (up to 3 times) where another
    process takes it between the pick and the ranks' bind; a port given is tried once."""

    @functools.wraps(fn)
    def run(k: int, task: str, config: Mapping[str, Any], *, port: int = 0, **kw: Any) -> Any:
        attempts = 1 if port else 3
        for attempt in range(attempts):
            p = port or free_port()
            try:
                return fn(k, task, config, port=p, **kw)
            except _PortTaken:
                if attempt == attempts - 1:
                    raise BenchError(
                        f"world size {k}: port {p} on 127.0.0.1 was taken by another process "
                        f"{attempts} times; free some ports or pass --port"
                    ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    return cast(F, run)


class _PortTaken(Exception):
    pass


#: the launcher's variables a rank must not inherit from the shell (torchrun's, torchelastic's): the world sets its own
_LAUNCHER_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GROUP_RANK",
    "ROLE_RANK",
    "TORCHELASTIC_RUN_ID",
)


def _world_env(
    k: int,
    task: str,
    config: Mapping[str, Any],
    *,
    port: int,
    timeout_s: float,
    progress_path: Path,
    threads: int | None,
    extra_env: Mapping[str, str] | None,
) -> dict[str, str]:
    """The environment every rank of a world of ``k`` starts with (each adds its RANK and LOCAL_RANK)."""
    base_env = dict(os.environ)
    for key in _LAUNCHER_VARS:
        base_env.pop(key, None)
    base_env.update(
        {
            "WORLD_SIZE": str(k),
            "LOCAL_WORLD_SIZE": str(k),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "SIMCLI_BENCH_TASK": task,
            "SIMCLI_BENCH_CONFIG": json.dumps(dict(config)),
            "SIMCLI_BENCH_PROGRESS": str(progress_path),
            "SIMCLI_BENCH_PARENT": str(os.getpid()),
            "SIMCLI_BENCH_TIMEOUT": str(timeout_s),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if sys.platform.startswith("linux"):  # every rank is on this host: keep gloo on the loopback interface
        base_env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if threads:
        base_env["SIMCLI_BENCH_THREADS"] = str(threads)
    base_env.update(extra_env or {})
    return base_env


def _spawn_ranks(ranks: list[_Rank], k: int, base_env: Mapping[str, str], *, wfd: int, tmpdir: Path) -> None:
    """Start the k workers, each logging to its file; rank 0 also gets the result pipe's write end. Each started rank
    is appended to ``ranks`` as it starts, so that a failure half-way stops the ones already running."""
    for r in range(k):
        env = dict(base_env, RANK=str(r), LOCAL_RANK=str(r))
        if r == 0:
            env["SIMCLI_BENCH_RESULT_FD"] = str(wfd)
        log = tmpdir / f"rank{r}.log"
        with open(log, "wb") as lf:
            proc = subprocess.Popen(
                [sys.executable, "-m", "simcli.bench.worker"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=lf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(wfd,) if r == 0 else (),
            )
        ranks.append(_Rank(r, proc, log))


@dataclass
class _ResultPipe:
    """The read end of rank 0's result pipe: the bytes read so far, dispatched line by line into ``result``."""

    fd: int
    result: WorldResult
    on_record: Callable[[dict[str, Any]], None]
    buf: bytes = b""
    eof: bool = False

    def poll(self, timeout_s: float) -> None:
        """Read what is there within ``timeout_s`` and dispatch the whole lines."""
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if ready:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.eof = True
            self.buf += chunk
            self.buf = _dispatch(self.buf, self.result, self.on_record)

    def drain(self) -> None:
        """Rows rank 0 sent before the end are still in the pipe: read them all and dispatch them, a last line
        without its newline too."""
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0)
            if not ready:
                break
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self.buf += chunk
        buf = self.buf
        _dispatch(buf + b"\n" if buf and not buf.endswith(b"\n") else buf, self.result, self.on_record)


def _slowest_unit(prog: list[int]) -> int:
    """The unit the slowest rank still working has reached (-1: every rank is done)."""
    return min(v for v in prog if v != PROGRESS_DONE) if any(v != PROGRESS_DONE for v in prog) else -1


def _watch(
    k: int,
    ranks: list[_Rank],
    pipe: _ResultPipe,
    *,
    progress_path: Path,
    timeout_s: float,
    config: Mapping[str, Any],
    on_progress: Callable[[int], None] | None,
) -> str | None:
    """Read rank 0's records and watch the ranks until all of them end well (None), one fails or the world stops
    making progress (the failure's description)."""
    start = time.monotonic()
    last_prog: list[int] | None = None
    last_change = start
    while True:
        if not pipe.eof:
            pipe.poll(0.05)
        else:
            time.sleep(0.05)
        now = time.monotonic()
        for r in ranks:
            if r.returncode is None and r.proc.poll() is not None:
                r.returncode, r.ended_at = r.proc.returncode, now
        failed = [r for r in ranks if r.returncode not in (None, 0)]
        if failed:
            return _describe_failure(k, failed, ranks, progress_path=progress_path, config=config)
        if all(r.returncode == 0 for r in ranks):
            return None
        # a watchdog, not a stopwatch: --timeout is how long the world may go without any rank starting a new
        # unit (a size, a step); before every rank has started, the start-up (torch import, rendezvous) gets
        # at least STARTUP_S
        prog = _progress(progress_path, k)
        if prog != last_prog:
            last_prog, last_change = prog, now
            if on_progress is not None:
                on_progress(_slowest_unit(prog))
        started = min(prog) > 0
        limit = timeout_s if started else max(timeout_s, STARTUP_S)
        if now - last_change > limit:
            return _describe_timeout(k, ranks, progress_path, timeout_s=limit, config=config, started=started)


@_on_a_free_port
def run_world(
    k: int,
    task: str,
    config: Mapping[str, Any],
    *,
    timeout_s: float,
    on_record: Callable[[dict[str, Any]], None],
    port: int = 0,
    threads: int | None = None,
    extra_env: Mapping[str, str] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> WorldResult:
    """Spawn k ranks running ``task`` with ``config``; stream rank 0's records to ``on_record``.

    ``on_progress`` (optional) gets the unit (a size, a timed step) the slowest rank has reached, when it changes.
    ``port`` 0: a free port, picked again where it is taken before the ranks bind it (:func:`_on_a_free_port`).

    Raises :class:`BenchError` naming the rank and the world size when a rank
    fails or the world runs past ``timeout_s``. KeyboardInterrupt stops every
    rank before it propagates.
    """
    result = WorldResult()
    tmp = tempfile.TemporaryDirectory(prefix=f"simcli-bench-k{k}-")
    tmpdir = Path(tmp.name)
    progress_path = tmpdir / "progress"
    progress_path.write_bytes(b"\0" * (8 * k))
    rfd, wfd = os.pipe()
    ranks: list[_Rank] = []
    base_env = _world_env(
        k,
        task,
        config,
        port=port,
        timeout_s=timeout_s,
        progress_path=progress_path,
        threads=threads,
        extra_env=extra_env,
    )
    pipe = _ResultPipe(rfd, result, on_record)
    failure: str | None = None
    try:
        _spawn_ranks(ranks, k, base_env, wfd=wfd, tmpdir=tmpdir)
        os.close(wfd)
        wfd = -1
        failure = _watch(
            k,
            ranks,
            pipe,
            progress_path=progress_path,
            timeout_s=timeout_s,
            config=config,
            on_progress=on_progress,
        )
    finally:
        _stop(ranks)
        if wfd >= 0:
            os.close(wfd)
        try:
            pipe.drain()
        finally:
            os.close(rfd)
        logs = {r.rank: _last_line(r.log) for r in ranks}
        tmp.cleanup()
    if failure is not None:
        if not result.records and any(
            "address already in use" in v.lower() or "eaddrinuse" in v.lower() for v in logs.values()
        ):
            raise _PortTaken()
        raise BenchError(failure)
    return result


def _dispatch(buf: bytes, result: WorldResult, on_record: Callable[[dict[str, Any]], None]) -> bytes:
    *lines, rest = buf.split(b"\n")
    for line in lines:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue  # a half line from a rank killed mid-write
        if msg.get("type") == "record":
            rec = msg["record"]
            result.records.append(rec)
            on_record(rec)
        else:
            result.infos.append(msg)
    return rest


def _progress(path: Path, k: int) -> list[int]:
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 8 * k, access=mmap.ACCESS_READ) as m:
            return [int.from_bytes(m[8 * i : 8 * i + 8], "little") for i in range(k)]
    except (OSError, ValueError):
        return [0] * k


def _unit(config: Mapping[str, Any]) -> str:
    return str(config.get("progress_unit", "step"))


def _describe_failure(
    k: int, failed: list[_Rank], ranks: list[_Rank], *, progress_path: Path, config: Mapping[str, Any]
) -> str:
    prog = _progress(progress_path, k)
    # the first to fail is the cause; the others lost their peer. Among ranks that ended in the same
    # poll, the one that got least far is the cause.
    first = min(failed, key=lambda r: (r.ended_at or 0.0, prog[r.rank]))
    msg = _last_line(first.log)
    code = first.returncode
    what = (
        f"exited with code {code}"
        if code is not None and code >= 0
        else f"was killed by signal {-code if code is not None else '?'}"
    )
    if code == EXIT_IDENTITY:
        what = "failed the gradient identity check"
    where = _where(prog[first.rank], config)
    return (
        f"world size {k}: rank {first.rank} {what}{where}" + (f": {msg}" if msg else "") + "; stopped the other ranks"
    )


def _where(progress: int, config: Mapping[str, Any]) -> str:
    """Where a rank got to, from its progress slot: units are counted over every timed phase."""
    if progress == PROGRESS_DONE:
        return " after it had finished measuring (while shutting down)"
    if not progress:
        return " before its first " + _unit(config)
    return f" at {_unit(config)} {progress}"


def _describe_timeout(
    k: int,
    ranks: list[_Rank],
    progress_path: Path,
    *,
    timeout_s: float,
    config: Mapping[str, Any],
    started: bool = True,
) -> str:
    prog = _progress(progress_path, k)
    live = [r.rank for r in ranks if r.returncode is None]
    lo = min(prog[r] for r in live) if live else 0
    stuck = [r for r in live if prog[r] == lo]
    who = (
        f"rank {stuck[0]} stopped{_where(lo, config)}"
        if len(stuck) == 1 and len(live) > 1
        else f"rank(s) {', '.join(map(str, stuck))} did not finish"
    )
    what = (
        f"no progress for {timeout_s:g} s (--timeout)"
        if started
        else f"the ranks did not all start within {timeout_s:g} s"
    )
    return f"world size {k}: timed out: {what}; {who} (it hangs or is far too slow); stopped every rank"
