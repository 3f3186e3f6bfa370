"""The root of the typer application: the root options, and the table of every command, imported when it runs.

Each command module owns a ``typer.Typer`` (a named group such as ``bench`` or ``plot``, or a bag of
top-level commands) and imports only :mod:`.common`, :mod:`.options` and the shared modules, never this module
nor another command module. :data:`COMMANDS` names each command's module, imported only when that command
runs (or its help or completion is asked for): ``simcli speedup`` imports :mod:`.speedup` and no other command
module. Heavy dependencies (torch, matplotlib, pandas) are imported inside the commands.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from .. import __version__
from .common import CONTEXT, Lazy, LazyGroup, SimcliGroup, State, examples, pause_collector, resume_collector

#: every command in the order --help lists them: its module, and the line --help shows (its help's first sentence)
COMMANDS = {
    "speedup": Lazy("speedup", "Predict step time, speedup S(k) and efficiency E(k) = S(k)/k for each device count k."),
    "comm": Lazy("speedup", "Predicted collective time, algbw and busbw per (k, message size), in nccl-tests' terms."),
    "algorithms": Lazy(
        "algorithms", "Which all-reduce algorithm is fastest at each (k, message size), and the crossover sizes."
    ),
    "explain": Lazy(
        "algorithms",
        "Every term of the step on k devices: forward, backward, each tier's terms, T_comm, hidden, exposed, n*.",
    ),
    "compare": Lazy(
        "compare",
        "Every combination of the comma-separated alternatives, side by side: step time, speedup, efficiency and the "
        "gain (throughput over the first combination at the same k).",
    ),
    "calibrate": Lazy(
        "calibrate",
        "Fit a profile's latency and bandwidth (compute rate, device spread) to measurements; write the profile.",
    ),
    "validate": Lazy(
        "validate",
        "Compare a profile's predictions with measurements: error per row, median and max error per k and size.",
    ),
    "check": Lazy(
        "check",
        "Per size: measured beside what NCCL should reach on the profile, OK / MODEL / LOW / HIGH, the limiting tier.",
    ),
    "profiles": Lazy("catalog", "List, show and validate hardware profiles.", app="profiles_app", group=True),
    "models": Lazy("catalog", "Built-in workloads.", app="models_app", group=True),
    "bench": Lazy(
        "bench", "Measure all-reduce and training steps with torch.distributed; import nccl-tests output.", group=True
    ),
    "plan": Lazy(
        "plan",
        "Answer a sizing question: the most devices at an efficiency, the profile value that reaches one, the time "
        "and cost of a whole run, or the best configuration of a grid (plan best); each with the reason (the "
        "dominant term), a memory check and the command that shows the curve.",
        app="plan_app",
        group=True,
    ),
    "plot": Lazy(
        "plot",
        "Draw pictures (PNG, SVG or PDF by the file's suffix): speedup curves, time breakdowns, all-reduce time and "
        "busbw, the fastest algorithm per (k, size).",
        group=True,
    ),
}


class _Root(LazyGroup, SimcliGroup):
    """simcli itself: SimcliGroup's one-line errors and guarded stdout, its commands imported when they run."""

    lazy = COMMANDS


app = typer.Typer(
    cls=_Root,  # typer's own usage errors in simcli's one-line form; stdout guarded (issue 12); lazy commands
    name="simcli",
    help="Simulate data-parallel training speed: step time, all-reduce cost and speedup over k devices.",
    epilog=examples("simcli speedup --devices 1..64", "simcli explain -k 64 --profile dgx-h100 --model resnet50"),
    context_settings=CONTEXT,
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (bash, zsh, fish, powershell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"simcli {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show a traceback on errors.")] = False,
) -> None:
    State.debug = debug


def main() -> None:
    """Console-script entry point."""
    pause_collector()
    code: int = 0
    try:
        app()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        raise
    except KeyboardInterrupt:  # pragma: no cover - typer maps most of these already
        typer.echo("simcli: interrupted", err=True)
        code = 130
        sys.exit(130)
    finally:
        resume_collector()  # a usage error, --help or --version ends before any command's body resumed it
        if "torch.distributed" in sys.modules and all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):
            # a rank torchrun launched (simcli bench under torchrun): gloo's threads may still be freeing a finished
            # collective's tensors, and interpreter finalisation then aborts the rank with signal 6, as it did a
            # spawned rank before it ended this way (simcli.bench.worker.end_rank)
            from ..bench.worker import end_rank  # lazy

            end_rank(code)
