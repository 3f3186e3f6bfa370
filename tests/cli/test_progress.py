"""Progress bars on stderr (simcli.cli.progress): drawn on a terminal after about a second, nothing otherwise."""

from __future__ import annotations

import io

from rich.console import Console

from simcli.cli import app
from simcli.cli import progress as P


def _terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=100, color_system=None), buf


def test_a_bar_counts_and_is_erased_when_done():
    console, buf = _terminal()
    with P.progress("fitting", total=3, console=console, delay=3600) as bar:
        assert not bar.shown  # before the delay: nothing drawn, only counted
        bar.advance()
        bar._start()  # what the timer does after DELAY_S (no sleep in a test)
        assert bar.shown
        bar.advance(2)
        bar.update(description="fitting tier 2")
        bar._bar.refresh()
        assert "fitting tier 2" in buf.getvalue() and "3/3" in buf.getvalue()
    assert not bar.shown and bar.completed == 3


def test_suspend_takes_the_bar_off_while_the_command_prints():
    console, _ = _terminal()
    with P.progress("work", console=console, delay=3600) as bar:
        bar._start()
        with P.suspended():
            assert not bar._bar.live.is_started
        assert bar._bar.live.is_started


def test_a_bar_inside_a_bar_draws_nothing():
    console, _ = _terminal()
    with P.progress("outer", console=console, delay=3600) as outer:
        with P.progress("inner", console=console, delay=3600) as inner:
            inner._start()
            assert not inner.shown and P._ACTIVE == [outer, inner]
    assert P._ACTIVE == []


def test_nothing_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(P, "enabled", lambda: False)
    with P.progress("work", total=2, delay=3600) as bar:
        bar._start()
        assert not bar.shown


def test_commands_print_what_they_did_when_stderr_is_captured(runner, tmp_path, monkeypatch):
    """A captured stderr (a pipe, 2>log, a test) is no terminal: a long CSV prints no bar, only 'wrote'."""
    import simcli.cli.speedup as sp

    # the path of millions of rows (streamed chunk by chunk under a bar) at 25,000 rows in chunks of 2,500, with
    # a bar drawn at once rather than after DELAY_S: what 250,000 rows in chunks of 100,000 checked, at a tenth
    monkeypatch.setattr(sp, "STREAM_CHUNK", 2_500)
    monkeypatch.setattr(P.Progress.__init__, "__kwdefaults__", {"delay": 0.0})
    out = tmp_path / "big.csv"
    r = runner.invoke(app, ["speedup", "-k", "1..25000", "-f", "csv", "-o", str(out), "-p", "dgx-h100"])
    assert r.exit_code == 0, r.output
    assert r.stderr == f"wrote {out}\n"
    assert out.read_text().count("\n") == 25001
