"""Every consumer of a registry reads it: a throwaway row added to each registry reaches the CLI's choices and
help, the default lists, the pictures' markers, the profile schema's enums and the fit's coefficients.

The rows are added in a fresh interpreter before any consumer is imported (help texts and choices are built when
the command modules import), exactly as a row written in the registry's file would be; the interpreter then asks
each consumer and prints what it saw as JSON. A consumer that types the names by hand misses the row and fails
here, naming the registry and the consumer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: adds one row to each registry (and to the views derived from it in the registry's own module), then imports
#: the consumers and records what each one shows
SCRIPT = r"""
import dataclasses, json, sys
import numpy as np
from simcli.comm import registry as rg, specs as sp
from simcli.step import strategies as st, update as up

def add(rows_name, module, row, *views):
    setattr(module, rows_name, getattr(module, rows_name) + (row,))
    for v in views:
        cur = getattr(module, v)
        if isinstance(cur, dict):
            cur[row.name] = row
        else:
            setattr(module, v, cur + (row.name,))

strat = dataclasses.replace(st.SPECS["fsdp"], name="zzstrat", label="ZZ", summary="zz strategy words", marker="P")
add("STRATEGY_SPECS", st, strat, "SPECS", "STRATEGIES", "SHARDED")
alg = dataclasses.replace(
    rg.SPECS["ps-sharded"], name="zzalg", label="zzlab", formula="zz formula",
    coefficients=lambda k: (3.0 * (np.asarray(k, dtype=float) - 1.0), np.ones(np.shape(k))),
)
add("REGISTRY", rg, alg, "SPECS")
rg.ALGORITHMS[alg.name] = alg.textbook
rg.CHOICES += (alg.name,)
rg.TEXTBOOK_CHOICES += (alg.name,)
opt = dataclasses.replace(up.SPECS["sgd"], name="zzopt", label="ZZ optimizer", state_bytes=2.0)
add("OPTIMIZER_SPECS", up, opt, "SPECS", "OPTIMIZERS")
extra = up.ExtraSpec(name="zzextra", summary="zz extra words", passes=(up.Pass("zz(grads)", 4, 4),), source="test")
up.EXTRA_SPECS += (extra,)
up.EXTRAS[extra.name] = 8.0
kind = dataclasses.replace(sp.LINK_KINDS["infiniband"], name="zzlink", summary="zz link words")
add("LINK_KIND_SPECS", sp, kind, "LINK_KINDS")
gen = sp.GpuGeneration(name="zzgen", words=("zz9000",), source="test")
add("GENERATION_SPECS", sp, gen, "GENERATIONS")
coll = dataclasses.replace(sp.COLLECTIVES["all_gather"], name="zz_coll", label="zz-coll")
add("COLLECTIVE_SPECS", sp, coll, "COLLECTIVES")
proto = dataclasses.replace(sp.PROTOCOL_SPECS[-1], name="zzproto", nccl="ZZ")
add("PROTOCOL_SPECS", sp, proto, "PROTOCOLS")

# ---- the consumers, imported only now
from typer.testing import CliRunner
from simcli.cli.app import app
from simcli.fits import fitting
from simcli.comm import nccl
from simcli.io import schema

runner = CliRunner()
def cli(*args):
    r = runner.invoke(app, list(args), env={"COLUMNS": "2000"})
    return r.exit_code, " ".join(r.output.replace("\u2502", " ").split())

seen = {}
_, seen["speedup_help"] = cli("speedup", "--help")
_, seen["plan_best_help"] = cli("plan", "best", "--help")
_, seen["comm_help"] = cli("comm", "--help")
code, out = cli("speedup", "-p", "dgx-h100", "-m", "llama2-7b", "-k", "8,16", "--strategy", "zzstrat",
                "--optimizer", "zzopt", "--update-extras", "zzextra", "-f", "json")
seen["speedup_runs"] = [code, [r.get("strategy") for r in json.loads(out)] if code == 0 else out]
_, seen["strategy_typo"] = cli("speedup", "--strategy", "zzstrt", "-k", "8")
code, out = cli("algorithms", "-p", "dgx-h100", "-k", "8", "-s", "1MiB", "-f", "json")
seen["algorithms"] = [code, out]
code, out = cli("plan", "best", "-p", "dgx-h100", "-m", "llama2-7b", "--global-batch", "512", "-k", "8,16",
                "-b", "1,2", "-f", "json")
seen["plan_best"] = [code, out]
seen["fit_coefficients"] = [list(map(float, c)) for c in fitting.coefficients("zzalg")(np.array([4.0]))]
seen["schema"] = json.dumps(schema.json_schema())
seen["generation"] = nccl.generation("ZZ9000 SXM")

# the plan-best picture: its points take the row's marker and a colour of their own
from simcli.decisions import plan_best as PB
from simcli.cli.options import ScenarioOptions
from simcli.plot import figures
sc = ScenarioOptions(profile="dgx-h100", model="resnet50").build()
grid = PB.Grid(strategies=("ddp", "zzstrat"), devices=np.array([8, 16]), micro_batches=(1, 2))
ans = PB.best(sc, grid, global_batch=512)
fig = figures.frontier_figure(ans, "t")
ax = fig.axes[0]
marks = {}
for coll_ in ax.collections:
    label = coll_.get_label()
    if label.startswith(("ddp", "zzstrat")):
        path = coll_.get_paths()[0].vertices.round(3).tolist()
        marks[label.split()[0]] = [path, coll_.get_facecolor()[0].round(3).tolist()]
import matplotlib.markers as mm
from matplotlib.path import Path as MPath
want = mm.MarkerStyle("P").get_path().transformed(mm.MarkerStyle("P").get_transform()).vertices.round(3).tolist()
seen["picture"] = {"strategies": sorted(marks), "zz_marker_is_P": marks.get("zzstrat", [None])[0] == want,
                   "colours_differ": len({str(v[1]) for v in marks.values()}) == len(marks)}
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "2000"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_strategy_row_reaches_help_default_list_engine_plan_best_and_its_picture(seen):
    assert "zzstrat (zz strategy words)" in seen["speedup_help"], "--strategy's help"
    assert "zzstrat" in seen["plan_best_help"].split("Strategies to search")[1][:400], "plan best's default list"
    code, strategies = seen["speedup_runs"]
    assert code == 0 and set(strategies) == {"zzstrat"}, strategies
    assert "zzstrat" in seen["strategy_typo"], "the unknown-strategy error's choices"
    code, out = seen["plan_best"]
    assert code == 0, out
    assert '"zzstrat"' in out, "plan best's default grid"
    pic = seen["picture"]
    assert pic["strategies"] == ["ddp", "zzstrat"] and pic["zz_marker_is_P"] and pic["colours_differ"], pic


def test_an_algorithm_row_reaches_choices_help_the_algorithms_table_and_the_fit(seen):
    assert "ps-sharded, zzalg, or auto" in seen["speedup_help"], "--algorithm's help"
    code, out = seen["algorithms"]
    assert code == 0 and "zzalg" in out, out[:500]
    assert seen["fit_coefficients"] == [[9.0], [1.0]], "fitting.coefficients reads the row's coefficients"


def test_optimizer_and_update_extra_rows_reach_their_options(seen):
    assert "zzopt" in seen["speedup_help"], "--optimizer's choices and help"
    assert "zzextra (zz extra words, 8 B/param)" in seen["speedup_help"], "--update-extras' help"
    assert seen["speedup_runs"][0] == 0, "the optimizer and the extra price"


def test_link_kind_generation_collective_and_protocol_rows_reach_schema_and_help(seen):
    schema = seen["schema"]
    assert '"zzlink"' in schema, "the profile schema's tier kinds"
    assert '"zzgen"' in schema, "the profile schema's nccl.generation choices"
    assert seen["generation"] == "zzgen", "nccl.generation matches the row's words"
    assert "zz_coll" in seen["comm_help"], "--collective's help"
    assert "zzproto" in seen["speedup_help"], "--protocol's help"
