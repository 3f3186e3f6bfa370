"""What every command module shares: context settings, the one error-to-exit-code map, output helpers.

Exit codes (as httpie's ExitStatus): 0 ok, 1 error, 2 bad input or usage, 130 Ctrl-C (SIGINT),
143 SIGTERM, 129 SIGHUP (128 + the signal's number, as a shell reports a process the signal ended).
This module imports no other module of :mod:`simcli.cli` but :mod:`.options` and :mod:`.progress`, so command
modules can import it without a circle; :mod:`.app` imports the command modules.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import gc
import importlib
import math
import os
import re
import signal
import sys
import threading
import warnings
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, MutableMapping, Sequence, TypeVar, cast

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from ..base.types import NCCL_TABLES_VERSION, InputError, NonFiniteResult, SimcliError
from ..comm.nccl_choice import FASTER_MARGIN
from ..io.files import claims, write_atomic
from ..io.formats import to_csv, to_json
from ..io.inputs import SkippedFile, files_read, tracking
from ..io.stdout import escape_controls, guard_stdio
from .options import command as _expand_groups
from .progress import suspended

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"]}


class State:
    debug = False
    wide = False  # --wide of the command being run (OutputOptions): show() draws every column
    collector_paused = False  # main() paused the cyclic garbage collector for the start-up


def pause_collector() -> None:
    """Start-up without the cyclic garbage collector: parsing imports pydantic and the command's modules, some
    10^5 objects that all live to the end, and each full collection on the way walks all of them (a tenth of a
    command's start-up; ``benchmarks/bench_startup.py``). :func:`resume_collector` ends the pause."""
    if gc.isenabled():
        gc.disable()
        State.collector_paused = True


def resume_collector() -> None:
    """End of start-up (the command's body begins): what start-up built is moved out of the collector's sight
    (``gc.freeze``: it is never garbage) and collection resumes, so a long command's cycles are still freed."""
    if State.collector_paused:
        State.collector_paused = False
        gc.freeze()
        gc.enable()


def handle_errors(fn: F) -> F:
    """The one place where simcli's errors become exit codes and one line on stderr.

    Also expands option-group parameters (:func:`simcli.cli.options.command`).
    """
    fn = _expand_groups(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        resume_collector()

        from ..io.rules import SuspiciousInput  # lazy

        # warnings said once the command has answered (a suspicious input's, a stand-in MFU's): an error is one line
        _DEFERRED.clear()
        failed = False
        try:
            with warnings.catch_warnings(), _signals_as_interrupts():
                # numpy's overflow/invalid-value warnings never reach stderr: the finiteness gate
                # (simcli.io.formats.finite_gate) refuses what they would have warned about, in one line
                warnings.filterwarnings(
                    "ignore", message=r"(overflow|invalid value|divide by zero|underflow) encountered"
                )
                warnings.simplefilter("always", SkippedFile)
                warnings.simplefilter("always", SuspiciousInput)
                warnings.showwarning = functools.partial(_show_warning, pending=_DEFERRED)
                _check_options(kwargs)
                State.wide = bool(kwargs.get("wide", False))
                return fn(*args, **kwargs)
        except SimcliError as e:
            failed = True
            if State.debug:
                raise
            msg = str(e)
            if isinstance(e, NonFiniteResult):
                msg += _given_inputs()
            typer.echo(f"simcli: error: {escape_controls(msg, keep_newlines=False)}", err=True)
            raise typer.Exit(e.exit_code) from None
        except OverflowError as e:  # a number past float64 or int64 wherever it was computed: bad input, not a crash
            failed = True
            if State.debug:
                raise
            typer.echo(f"simcli: error: {overflow_line(e)}", err=True)
            raise typer.Exit(2) from None
        except Terminated as e:
            typer.echo(f"simcli: terminated by {e.name}", err=True)
            raise typer.Exit(128 + e.signum) from None
        except KeyboardInterrupt:
            typer.echo("simcli: interrupted", err=True)
            raise typer.Exit(130) from None
        finally:
            if not failed:  # an error is the one line of a refused input; its warnings would only add noise
                for msg in dict.fromkeys(_DEFERRED):
                    warn(msg)
            _DEFERRED.clear()

    return cast(F, wrapper)


def overflow_line(e: OverflowError) -> str:
    """The one line for an OverflowError (a value past float64 or int64 met in parsing or arithmetic): what
    overflowed and the inputs given, for the user to bring into a realistic range."""

    what = str(e).strip() or "a number is too large"
    return escape_controls(
        f"a value is beyond what simcli computes with ({what}){_given_inputs()}; give values in a realistic range",
        keep_newlines=False,
    )


def _show_warning(
    message: Any,
    category: Any,
    filename: str = "",
    lineno: int = 0,
    file: Any = None,
    line: Any = None,
    pending: list[str] | None = None,
) -> None:
    """Every warning raised below the CLI (a skipped file, a library's RuntimeWarning) as one 'simcli: warning:'
    line on stderr (warnings.showwarning's signature: a ``file`` argument is accepted and ignored); a suspicious
    input's (simcli.io.rules.SuspiciousInput) is kept in ``pending`` and said when the command ends."""
    from ..io.rules import SuspiciousInput  # lazy

    if pending is not None and isinstance(category, type) and issubclass(category, SuspiciousInput):
        pending.append(str(message))
        return
    warn(str(message))


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the command is (as SIGINT raises KeyboardInterrupt), so that every
    ``finally`` runs: a bench keeps its rows and stops its ranks; the exit status is 128 + the signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


@contextlib.contextmanager
def _signals_as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP handled as SIGINT is, while a command runs (in the main thread only)."""

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None]

    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    old = {}
    for s in sigs:
        try:
            old[s] = signal.signal(s, raise_terminated)
        except (ValueError, OSError):  # pragma: no cover - not the main interpreter
            pass
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _given_inputs() -> str:
    """'; from the inputs --mfu 1e-320, profile p.yaml': the options given on the command line and the files read,
    for a result the finiteness gate refused (one of them produced it)."""

    ctx = _click().globals.get_current_context(silent=True)
    given: list[str] = []
    if ctx is not None:
        for p in ctx.command.params:
            try:
                src = ctx.get_parameter_source(p.name)
            except Exception:  # noqa: BLE001 - a context without sources: nothing to name
                src = None
            if src is not None and src.name == "COMMANDLINE" and getattr(p, "param_type_name", "") == "option":
                v = ctx.params.get(p.name)
                if isinstance(v, bool) or v is None:
                    continue
                name = next((o for o in p.opts if o.startswith("--")), p.opts[0])
                given.append(f"{name} {getattr(v, 'value', v)}")
    given += [f"file {f}" for f in dict.fromkeys(files_read())]
    return f" (the inputs given: {', '.join(given)})" if given else ""


def _click() -> Any:
    """The click that typer runs on (typer >= 0.24 vendors it as ``typer._click``)."""
    try:
        return importlib.import_module("typer._click")
    except ImportError:  # pragma: no cover - older typer uses click itself
        return importlib.import_module("click")


def _raw_value(args: list[str], opts: list[str]) -> str | None:
    """The text the user gave for an option (``--iters 0`` or ``--iters=0``), for the error line."""
    for i, a in enumerate(args):
        for opt in opts:
            if a == opt and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(opt + "=") and opt.startswith("--"):
                return a[len(opt) + 1 :]
            if not opt.startswith("--") and a.startswith(opt) and len(a) > len(opt):
                return a[len(opt) :]
    return None


def usage_line(e: Any, args: list[str]) -> str:
    """typer's and click's own usage errors in simcli's one-line form: 'OPTION: VALUE ... how to fix'."""

    click = _click()
    ctx = getattr(e, "ctx", None)
    see = f"see '{ctx.command_path} -h'" if ctx is not None else "see 'simcli -h'"
    msg = str(getattr(e, "message", e)).strip()
    param = getattr(e, "param", None)
    if isinstance(e, click.exceptions.NoSuchOption):
        close = f" (did you mean {', '.join(e.possibilities)}?)" if e.possibilities else ""
        return f"{e.option_name}: no such option{close}; {see}"
    m = re.match(r"No such command '([^']*)'\.?(?: Did you mean '([^']*)'\?)?", msg)
    if m:
        close = f" (did you mean {m.group(2)}?)" if m.group(2) else ""
        return f"{m.group(1)}: no such command{close}; {see}"
    m = re.match(r"Got unexpected extra argument(?:s|\(s\))? \((.*)\)", msg)
    if m:
        return f"{m.group(1)}: unexpected argument; {see}"
    m = re.match(r"Option '(.*)' requires an? (argument|value)", msg)
    if m:
        return f"{m.group(1)}: needs a value; {see}"
    if param is not None:
        opts = [o for o in getattr(param, "opts", []) if o.startswith("--")] or list(getattr(param, "opts", []))
        is_option = getattr(param, "param_type_name", "") == "option"
        name = opts[0] if opts and is_option else getattr(param, "human_readable_name", None) or param.name
        if isinstance(e, click.exceptions.MissingParameter):
            return f"{name}: required; {see}"
        value = _raw_value(args, list(getattr(param, "opts", [])))
        shown = value if value is not None else "the value"
        msg = re.sub(r"^Value error, ", "", msg).rstrip(".")
        for pattern, text in (
            (r"Input should be greater than or equal to (\S+)", "{v} is below the minimum {n}"),
            (r"Input should be less than or equal to (\S+)", "{v} is above the maximum {n}"),
            (r"Input should be greater than (\S+)", "{v} must be greater than {n}"),
            (r"Input should be less than (\S+)", "{v} must be less than {n}"),
            (r"Input should be a valid integer", "{q} is not a whole number"),
            (r"Input should be a valid number", "{q} is not a number"),
            (r".* is not in the range (.*)", "{v} is not in the range {n}"),
            (r".* is not a valid integer", "{q} is not a whole number"),
            (r".* is not a valid float", "{q} is not a number"),
        ):
            m = re.match(pattern, msg)
            if m:
                n = m.group(1) if m.groups() else ""
                return f"{name}: " + text.format(v=shown, q=repr(shown) if value is not None else shown, n=n)
        return f"{name}: {msg}"
    return f"{msg.rstrip('.')}; {see}"


class SimcliGroup(TyperGroup):
    """The root command: typer's own errors become one line, and stdout is guarded, on every entry path.

    * a usage error (``--iters 0``, ``--mode weird``, ``-f yaml``, an unknown option): ``simcli: error:
      --iters: 0 is below the minimum 1``, exit 2, as simcli's own input errors;
    * stdout goes through :class:`simcli.io.stdout.GuardedStream`: closed (``>&-``) or refusing writes
      (``> /dev/full``) is one line and exit 1, a stdout that cannot encode 'α' gets 'alpha';
    * a reader that went away (``| head -1``, BrokenPipeError): quiet, exit 1 (as typer does).
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        click = _click()
        argv = list(sys.argv[1:] if args is None else args)
        _guard_completion(self)
        undo = guard_stdio()
        code: Any = 0
        try:
            try:
                with tracking(), claims():  # the files it reads are never its output; the outputs it claims are its own
                    rv = super().main(
                        args=argv,
                        prog_name=prog_name,
                        complete_var=complete_var,
                        standalone_mode=False,
                        windows_expand_args=windows_expand_args,
                        **extra,
                    )
                code = rv if isinstance(rv, int) else 0
                sys.stdout.flush()
            except click.exceptions.NoArgsIsHelpError as e:  # a group named alone: its help, as before
                e.show()
                code = e.exit_code
            except click.exceptions.UsageError as e:
                typer.echo(f"simcli: error: {usage_line(e, argv)}", err=True)
                code = 2
            except click.exceptions.ClickException as e:
                typer.echo(f"simcli: error: {e.format_message()}", err=True)
                code = e.exit_code
            except typer.Abort:
                typer.echo("simcli: interrupted", err=True)
                code = 130
            except SimcliError as e:  # raised outside a command, e.g. while flushing stdout at the end
                typer.echo(f"simcli: error: {e}", err=True)
                code = e.exit_code
            except OverflowError as e:  # in an option's conversion, before any command ran
                typer.echo(f"simcli: error: {overflow_line(e)}", err=True)
                code = 2
            except CompletionUnavailable as e:
                typer.echo(f"simcli: error: {e}", err=True)
                code = 1
        except BrokenPipeError:
            _quiet_pipe()
            code = 1
        finally:
            undo()
        if standalone_mode:
            sys.exit(code)
        return code


# --------------------------------------------------------------------------- commands imported when they run


@dataclasses.dataclass(frozen=True)
class Lazy:
    """A command whose module is imported only when it runs (or its own help or completion is asked for).

    ``simcli.cli.<module>`` holds it on its typer app ``app``: as the command of that name (a top-level command
    such as ``speedup``, or one that registers itself on a group, such as ``plan best``), or, with ``group``, the
    whole app is the group (``plot``). ``help`` is the first sentence of the command's help, the line its
    parent's ``--help`` lists without importing it (tests/cli/test_cli.py holds the two equal).
    """

    module: str
    help: str
    app: str = "app"
    group: bool = False

    def load(self, name: str, parent: TyperGroup) -> Any:
        """The click command, built as typer builds the commands of a registered app (``add_typer``)."""
        app = getattr(importlib.import_module(f"{__package__}.{self.module}"), self.app)
        if self.group:
            return typer.main.get_group_from_info(
                typer.models.TyperInfo(app, name=name),
                pretty_exceptions_short=app.pretty_exceptions_short,
                suggest_commands=parent.suggest_commands,
                rich_markup_mode=parent.rich_markup_mode,
            )
        for info in app.registered_commands:
            if (info.name or typer.main.get_command_name(info.callback.__name__)) == name:
                return typer.main.get_command_from_info(
                    info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=parent.rich_markup_mode
                )
        raise LookupError(f"simcli.cli.{self.module}.{self.app} registers no command {name!r}")


class _Commands(MutableMapping[str, Any]):
    """A group's commands by name, each lazy one imported on first access; in order: the group's own commands,
    then the lazy ones as the table lists them. ``in`` and iteration import nothing."""

    def __init__(self, group: TyperGroup, own: Mapping[str, Any], lazy: Mapping[str, Lazy]) -> None:
        self._group, self._lazy, self._loaded = group, lazy, dict(own)
        self._order = [*(n for n in own if n not in lazy), *lazy]

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            if name not in self._lazy:
                raise KeyError(name)
            self._loaded[name] = self._lazy[name].load(name, self._group)
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __setitem__(self, name: str, cmd: Any) -> None:
        self._loaded[name] = cmd
        if name not in self._order:
            self._order.append(name)

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._order.remove(name)

    def listed(self, name: str) -> Any:
        """The command as a listing shows it: the loaded one, or a stand-in with its help line."""
        if name in self._loaded or name not in self._lazy:
            return self[name]
        return TyperCommand(name=name, help=self._lazy[name].help)


class LazyGroup(TyperGroup):
    """A group whose commands in ``lazy`` (name -> :class:`Lazy`) are imported when they run: ``--help`` lists
    their help lines and completion offers their names without importing any of them."""

    lazy: ClassVar[Mapping[str, Lazy]] = {}

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.commands = _Commands(self, self.commands, self.lazy)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """typer's listing (``TyperGroup.format_commands``), of the help lines rather than the commands."""
        listed = cast(_Commands, self.commands).listed
        commands = [(n, c) for n in self.list_commands(ctx) if not (c := listed(n)).hidden]
        if commands:
            limit = formatter.width - 6 - max(len(n) for n, _ in commands)
            with formatter.section("Commands"):
                formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in commands])

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        """typer's completion of a group (``TyperGroup.shell_complete``), naming commands without importing them."""
        item = importlib.import_module(f"{_click().__name__}.shell_completion").CompletionItem
        names = [n for n in self.list_commands(ctx) if n.startswith(incomplete)]
        listed = cast(_Commands, self.commands).listed
        found = [item(n, help=c.get_short_help_str()) for n in names if not (c := listed(n)).hidden]
        return found + _click().Command.shell_complete(self, ctx, incomplete)


#: the shells typer writes a completion script for (typer._completion_shared._completion_scripts)
COMPLETION_SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


class CompletionUnavailable(Exception):
    """--install-completion or --show-completion where no shell it supports runs simcli (exit 1: the environment)."""


def _guard_completion(group: Any) -> None:
    """typer's --install-completion prints 'Shell None is not supported.' on stdout (exit 1) when simcli's parent is
    not a shell it knows (a script, an IDE, cron), and --show-completion a similar line: each becomes one line on
    stderr naming the shell found and how to get the script anyway, exit 1, nothing on stdout or in any file."""
    for p in getattr(group, "params", []):
        if p.name not in ("install_completion", "show_completion") or getattr(p, "_simcli_guarded", False):
            continue
        p.callback = _completion_callback(p.callback, p.name)
        p._simcli_guarded = True


def _completion_callback(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if not value or ctx.resilient_parsing:
            return value
        shell = value if isinstance(value, str) else _shell_name()
        if shell not in COMPLETION_SHELLS:
            found = f"its shell is {shell}" if shell else "it does not run under a shell simcli can detect"
            option = "--" + name.replace("_", "-")
            raise CompletionUnavailable(
                f"{option}: {found}, and completion is written for bash, zsh, fish or PowerShell only; run it from "
                "one of them, or print a script by name: _SIMCLI_COMPLETE=source_bash simcli (source_zsh, source_fish)"
            )
        return original(ctx, param, value)

    return callback


def _shell_name() -> str | None:
    """The shell simcli runs under, as typer detects it (shellingham), or None."""
    try:
        from typer._completion_shared import _get_shell_name  # compat
    except ImportError:  # pragma: no cover - another typer: let its own callback decide
        return "bash"
    return _get_shell_name()


def _quiet_pipe() -> None:
    """After BrokenPipeError: point stdout at /dev/null so that the interpreter's last flush stays quiet."""

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


#: the largest whole number any option takes: 2**53, the largest integer float64 (the engine's arithmetic) holds
#: exactly; Python's ints are unbounded, numpy's int64 is not (issue 12: `explain -k 1e20` overflowed)
MAX_INT = 2**53


#: the largest magnitude of a number option (``--price-per-device-hour``, ``--tokens``, ``--flops-per-sample``, ...):
#: a product of a few such values (tokens x FLOPs per token x price, about 10^90) stays far inside float64's
#: 1.8e308, so what is computed after the engine (cost, hours, fitted errors) is finite. No quantity simcli models
#: comes near it: 2e12 tokens, 2e15 FLOPs per sample, 1e12 parameters (docs/commands.md, "Bounds on numbers").
MAX_FLOAT = 1e30


def _option_name(name: str) -> str:
    ctx = _click().globals.get_current_context(silent=True)
    for p in getattr(getattr(ctx, "command", None), "params", []):
        if p.name == name:
            longs = [o for o in p.opts if o.startswith("--")]
            return (longs or p.opts or [name])[0]
    return "--" + name.replace("_", "-")


def _check_options(kwargs: dict[str, Any]) -> None:
    """Refuse, for every command at once (one line, exit 2): a whole-number option beyond :data:`MAX_INT`, a
    number option that is NaN or infinite (``--lr inf`` as ``--lr nan``) or beyond :data:`MAX_FLOAT` in magnitude
    (``--price-per-device-hour 1e308``), and an empty text value (``-o ''``,
    ``-k ''``) where the option has a meaning only with a value."""

    for name, v in kwargs.items():
        vals = v if isinstance(v, (list, tuple)) else [v]
        for x in vals:
            if isinstance(x, int) and not isinstance(x, bool) and abs(x) > MAX_INT:
                raise InputError(f"{_option_name(name)}: {x} is more than simcli models (at most 2**53 = {MAX_INT:,})")
            if isinstance(x, float) and not math.isfinite(x):
                raise InputError(f"{_option_name(name)}: {x} is not a finite number; give a number")
            if isinstance(x, float) and abs(x) > MAX_FLOAT:
                raise InputError(
                    f"{_option_name(name)}: {x:g} is beyond what simcli computes with (at most {MAX_FLOAT:g} in "
                    "magnitude, so that costs, times and fits made from it stay finite); give a realistic value"
                )
            if isinstance(x, str) and not x.strip() and not isinstance(x, enum.Enum):
                raise InputError(f"{_option_name(name)}: an empty value; give a value or leave the option out")


def examples(*commands: str) -> str:
    """A command's ``--help`` epilog: one or two real examples, each on its own line as typed (click's ``\\b`` keeps
    the formatter from joining them into one paragraph). The one way every command shows its examples."""
    head = "Example:" if len(commands) == 1 else "Examples:"
    return "\b\n" + head + "\n" + "\n".join(f"  $ {c}" for c in commands)


def _argument_type(self: Any, ctx: Any) -> Any:
    """An argument's help line: its metavar (FILE, PROFILE, ...) says what it takes, without typer's '<str>'."""
    return None if self.metavar is not None else _typer_argument_type(self, ctx)


_typer_argument_type = TyperArgument.display_type_rich
TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign]  # typer's help, patched on purpose


def new_app(**kw: Any) -> typer.Typer:
    """A command group (or a bag of top-level commands, merged into the root by :mod:`.app`)."""
    kw.setdefault("context_settings", CONTEXT)
    return typer.Typer(**kw)


def show(renderable: object, output: str | None, force: bool) -> None:
    """Print a table to the terminal, or its plain text to ``output``; with ``--wide`` every column, however wide."""
    from ..io.render import Wide, console, render_text  # lazy

    if State.wide:
        renderable = Wide(renderable)
    if output:
        emit(render_text(renderable), output, force)
    else:
        with suspended():
            console.print(renderable, crop=not State.wide)


def emit(text: str | Iterable[str], output: str | None, force: bool) -> None:
    """Print ``text`` (or an iterable of chunks, streamed) to stdout, or write it atomically to ``output``."""
    if output:
        p = write_atomic(output, text, force=force)
        done(str(p))
    elif isinstance(text, str):
        with suspended():
            sys.stdout.write(text)
    else:
        for chunk in text:
            sys.stdout.write(chunk)


def answer(
    out: Any, view: Callable[[], Any], doc: Callable[[], Any], *, rows: Callable[[], tuple[list, list[str]]]
) -> None:
    """An answer as ``out`` (an OutputOptions) asks: the rich ``view()`` on the terminal or as text into --output,
    or the data: ``doc()`` as JSON, ``rows()`` (records, comment lines) as CSV."""
    if out.format.value == "table":
        show(view(), out.output, out.force)  # --wide honoured as every other table does
        return

    if out.format.value == "json":
        text = to_json(doc())
    else:
        recs, comments = rows()
        text = to_csv(recs, comments=comments)
    emit(text, out.output, out.force)


def done(path: str) -> None:
    with suspended():
        typer.echo(f"wrote {path}", err=True)


def warn(msg: str) -> None:
    with suspended():
        typer.echo(f"simcli: warning: {escape_controls(msg, keep_newlines=False)}", err=True)


#: the longest warning line simcli writes on a command's default path (issue 39: the table starts on the first
#: screen of an 80x24 terminal); the details are in ``explain`` and the records
WARNING_WIDTH = 160


#: warnings a command says after it has answered (handle_errors prints them on success and drops them on an error)
_DEFERRED: list[str] = []


def warn_mfu_fallback(scenarios: Iterable[Any]) -> None:
    """One stderr line per (profile, model, dtype) whose workload family has no MFU for the device's generation in
    simcli/io/data/families.yaml (Scenario.mfu_fallback), naming the figure that stands in for it; said when the
    command has answered, so that an error stays the only line."""
    seen = set()
    for sc in scenarios:
        fb = sc.mfu_fallback
        key = (sc.profile.name, sc.workload.name, fb and fb["dtype"])
        if fb is None or key in seen:
            continue
        seen.add(key)
        gen = f"{fb['generation']} GPUs" if fb["generation"] else "an unknown GPU generation"
        tail = (
            f": no {fb['family']} MFU for {gen} ({fb['dtype']}) in families.yaml; uses {fb['source']} = "
            f"{fb['mfu']:g}, a {fb['measured_on']} figure"
        )
        head = f"{sc.workload.name} on {sc.profile.name}"
        room = WARNING_WIDTH - len("simcli: warning: ") - len(tail)
        if len(head) > room:
            head = head[: max(room - 3, 0)] + "..."
        if head + tail not in _DEFERRED:
            _DEFERRED.append(head + tail)


def where_k(ks: Iterable[int], most: int = 4) -> str:
    """The device counts a warning is about: 'k = 8', 'k = 9, 41, 50' (up to ``most``), else 'k = 8..512 (7 k)'."""
    ks = sorted({int(x) for x in ks})
    if len(ks) <= most:
        return "k = " + ", ".join(map(str, ks))
    return f"k = {ks[0]}..{ks[-1]} ({len(ks)} k)"


def warn_nccl_faster(rows: Iterable[dict[str, Any]], step: bool = True, see: str | None = None) -> None:
    """One short stderr line for a whole command (at most WARNING_WIDTH characters): where NCCL's own pick costs
    more, in simcli's model, than another of its pairs (simcli.step.notes.nccl_faster, simcli.comm.grid's
    ``faster``). It names the profiles, the k and where the details are (which message, NCCL's pick, the
    NCCL_ALGO/NCCL_PROTO of the cheaper pair and both times): ``simcli explain -k K`` for a step's messages, the
    records' ``faster`` for single collectives, or ``see``.

    Each row: profile, devices (and the details, not said here). ``step``: the rows are a step's messages (said past
    STEP_MARGIN of the step), else single collectives (FASTER_MARGIN).
    """
    from ..step.notes import STEP_MARGIN  # lazy

    rows = list(rows)
    if not rows:
        return
    profs = ", ".join(dict.fromkeys(str(r["profile"]) for r in rows))
    ks = sorted({int(r["devices"]) for r in rows})
    by = f"> {STEP_MARGIN:.0%} of the step" if step else f"> {FASTER_MARGIN:.0%} of the collective"
    if see is None:
        see = f"'simcli explain -k {ks[0]}' says which" if step else "-f json: 'faster' per row"

    old = next((r for r in rows if r.get("release") and r["release"] != NCCL_TABLES_VERSION), None)
    for most in (6, 4, 0):
        if old is not None:  # an older release's tuner: name it and the pair (a faster link can pick a slower one)
            pick = "/".join(x for x in (old.get("algorithm"), old.get("protocol")) if x)
            alt = "/".join(x for x in (old.get("faster_algorithm"), old.get("faster_protocol")) if x)
            msg = f"{profs}: at {where_k(ks, most)} NCCL {old['release']} picks {pick}, {alt} is faster by {by}; {see}"
        else:
            msg = f"{profs}: at {where_k(ks, most)} another NCCL pair beats NCCL's own choice by {by}; {see}"
        if len("simcli: warning: " + msg) <= WARNING_WIDTH:
            break
    warn(msg)
