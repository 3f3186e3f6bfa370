"""Every scenario value lives in the scenario (docs/ARCHITECTURE.md): no function below the command line declares a
default for a parameter named like a field of :class:`simcli.step.engine.Scenario`. A caller passes the scenario's
field (or the option's value) explicitly, so a default can never drift from the one Scenario and its option give."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from simcli.step.engine import Scenario

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "simcli"
FIELDS = frozenset(f.name for f in dataclasses.fields(Scenario))


def defaulted_parameters(tree: ast.AST) -> list[tuple[int, str, str, str]]:
    """(line, function, parameter, default as written) for every parameter with a default in ``tree``'s functions
    (methods, nested functions and lambdas included; positional-only, ordinary and keyword-only alike)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        a = node.args
        positional = [*a.posonlyargs, *a.args]
        pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True))
        pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        name = getattr(node, "name", "<lambda>")
        out += [(arg.lineno, name, arg.arg, ast.unparse(d)) for arg, d in pairs]
    return out


def test_the_scan_sees_every_kind_of_parameter():
    src = "def f(a, protocol=None, /, dtype='fp32', *, accum=1, x=2): pass\ng = lambda strategy='ddp': 0\n"
    found = {(fn, p, d) for _, fn, p, d in defaulted_parameters(ast.parse(src))}
    assert found == {
        ("f", "protocol", "None"),
        ("f", "dtype", "'fp32'"),
        ("f", "accum", "1"),
        ("f", "x", "2"),
        ("<lambda>", "strategy", "'ddp'"),
    }


def test_the_scenario_fields_are_read():
    assert {"profile", "workload", "dtype", "protocol", "algorithm", "reshard_after_forward", "optimizer"} <= FIELDS


def test_no_function_below_the_command_line_defaults_a_scenario_value():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("cli", "hardware_profiles"):
            continue
        for line, fn, param, default in defaulted_parameters(ast.parse(path.read_text(encoding="utf-8"))):
            if param in FIELDS:
                offenders.append(f"{path.relative_to(ROOT)}:{line} {fn}({param}={default})")
    assert not offenders, (
        "a function below simcli/cli/ defaults a value the Scenario defines; make it required and pass the "
        "scenario's field (or rename a different concept):\n  " + "\n  ".join(offenders)
    )
