"""What every command module shares: context settings, the one error-to-exit-code map, output helpers.

Exit codes (as httpie's ExitStatus): 0 ok, 1 error, 2 bad input or usage, 130 Ctrl-C.
This module imports no other module of :mod:`simcli.cli` but :mod:`.options`, so command
modules can import it without a circle; :mod:`.app` imports the command modules.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, TypeVar

import typer

from ..model import SimcliError
from .options import command as _expand_groups

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"]}


class State:
    debug = False


def handle_errors(fn: F) -> F:
    """The one place where simcli's errors become exit codes and one line on stderr.

    Also expands option-group parameters (:func:`simcli.cli.options.command`).
    """
    fn = _expand_groups(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SimcliError as e:
            if State.debug:
                raise
            typer.echo(f"simcli: error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("simcli: interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def new_app(**kw: Any) -> typer.Typer:
    """A command group (or a bag of top-level commands, merged into the root by :mod:`.app`)."""
    kw.setdefault("context_settings", CONTEXT)
    return typer.Typer(**kw)


def show(renderable: object, output: str | None, force: bool) -> None:
    """Print a table to the terminal, or its plain text to ``output``."""
    from ..render import console, render_text

    if output:
        emit(render_text(renderable), output, force)
    else:
        console.print(renderable)


def emit(text: str, output: str | None, force: bool) -> None:
    """Print ``text`` to stdout, or write it atomically to ``output``."""
    if output:
        from ..output import write_atomic

        p = write_atomic(output, text, force=force)
        typer.echo(f"wrote {p}", err=True)
    else:
        sys.stdout.write(text)


def done(path: str) -> None:
    typer.echo(f"wrote {path}", err=True)


def warn(msg: str) -> None:
    typer.echo(f"simcli: warning: {msg}", err=True)
