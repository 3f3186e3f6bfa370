"""The root of the typer application: the root options, and every command module registered once.

Each command module owns a ``typer.Typer`` (a named group such as ``bench`` or ``plot``, or a bag of
top-level commands that is merged into the root) and imports only :mod:`.common` and :mod:`.options`,
never this module. Heavy dependencies (torch, matplotlib, pandas) are imported inside the commands.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from .. import __version__
from . import (
    algorithms,
    bench,
    calibrate,
    catalog,
    check,
    compare,
    plan,
    plan_best,  # noqa: F401 - registers `plan best` on plan.plan_app
    plan_measure,  # noqa: F401 - registers `plan measure` on plan.plan_app
    plot,
    speedup,
    validate,
)
from .common import CONTEXT, SimcliGroup, State, examples, pause_collector, resume_collector

app = typer.Typer(
    cls=SimcliGroup,  # typer's own usage errors in simcli's one-line form; stdout guarded (issue 12)
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


# top-level commands, in the order --help lists them
for _module in (speedup, algorithms, compare, calibrate, validate, check):
    app.add_typer(_module.app)
# command groups
app.add_typer(catalog.profiles_app, name="profiles")
app.add_typer(catalog.models_app, name="models")
app.add_typer(bench.app, name="bench")
app.add_typer(plan.plan_app, name="plan")
app.add_typer(plot.app, name="plot")


def main() -> None:
    """Console-script entry point."""
    pause_collector()
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - typer maps most of these already
        typer.echo("simcli: interrupted", err=True)
        sys.exit(130)
    finally:
        resume_collector()  # a usage error, --help or --version ends before any command's body resumed it
