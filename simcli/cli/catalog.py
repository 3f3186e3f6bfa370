"""`simcli profiles` (list, show, validate hardware profiles) and `simcli models` (built-in workloads)."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..base.types import InputError
from ..base.units import fmt_count
from ..io.files import check_output_path, write_atomic
from ..io.formats import to_csv, to_json
from ..io.profiles import (
    describe,
    list_profiles,
    load_profile,
    profile_from_dict,
    profile_to_dict,
    read_yaml,
    resolve_profile,
)
from ..io.schema import json_schema
from ..io.workloads import presets
from . import options as o
from .common import emit, examples, handle_errors, new_app

profiles_app = new_app(
    help="List, show and validate hardware profiles.",
    epilog=examples("simcli profiles list", "simcli profiles show dgx-h100"),
    no_args_is_help=True,
)
models_app = new_app(help="Built-in workloads.", epilog=examples("simcli models list"), no_args_is_help=True)


@profiles_app.command("list", epilog=examples("simcli profiles list", "simcli profiles list -f json"))
@handle_errors
def profiles_list(format: o.FormatOpt = o.Format.table) -> None:
    """Every profile --profile can find: name, device, devices per node, where it comes from."""

    recs = []
    for e in list_profiles():
        try:
            p = load_profile(e.path, origin=e.origin)
            recs.append(
                {
                    "name": e.name,
                    "device": p.device.name,
                    "devices_per_node": p.node_size,
                    "tiers": len(p.network),
                    "origin": e.origin,
                    "path": e.path,
                    "error": None,
                }
            )
        except InputError as err:
            recs.append(
                {
                    "name": e.name,
                    "device": None,
                    "devices_per_node": None,
                    "tiers": None,
                    "origin": e.origin,
                    "path": e.path,
                    "error": str(err),
                }
            )
    from ..io.render import Column  # lazy

    _listing(
        recs,
        format,
        [
            Column("name", "name", justify="left"),
            Column("device", lambda r: r["device"] or f"invalid: {r['error']}", justify="left"),
            Column("devices/node", "devices_per_node", short="/node"),
            Column("tiers", "tiers", priority=2),
            Column(
                "source",
                lambda r: "built-in" if r["origin"] == "built-in" else r["path"],
                justify="left",
                priority=3,
            ),
        ],
    )


def _listing(recs: list[dict], format: "o.Format", columns: list, *, caption: str | None = None) -> None:
    """A list command's answer: JSON or CSV of the records, or their table (one place for every list)."""
    if format is not o.Format.table:
        sys.stdout.write(to_json(recs) if format is o.Format.json else to_csv(recs))
        return
    from ..io.render import print_table, table  # lazy

    print_table(table(recs, columns, caption=caption))


@profiles_app.command("show", epilog=examples("simcli profiles show dgx-h100"))
@handle_errors
def profiles_show(
    profile: Annotated[
        str, typer.Argument(metavar="PROFILE", help="Profile name or path.", autocompletion=o.complete_profile)
    ],
    format: o.FormatOpt = o.Format.table,
) -> None:
    """Every value of one profile, with units."""

    p = resolve_profile(profile)
    if format is o.Format.table:
        from ..io.render import kv_table, print_table  # lazy

        print_table(kv_table(describe(p), title=f"profile {p.name}"))
        return

    if format is o.Format.json:
        sys.stdout.write(to_json(profile_to_dict(p)))
    else:
        sys.stdout.write(to_csv([{"field": k, "value": v} for k, v in describe(p)]))


@profiles_app.command("validate", epilog=examples("simcli profiles validate my-cluster.yaml"))
@handle_errors
def profiles_validate(
    files: Annotated[list[str], typer.Argument(metavar="FILE...", help="Profile YAML files.")],
) -> None:
    """Check profile files; every error names the file, the field and the value. Exit 2 if any is invalid."""
    from ..io import rules  # lazy

    bad = 0
    for f in files:
        try:
            p = load_profile(f)
            bare = rules.bare_bandwidths(read_yaml(f, "profile"))
            if bare:  # a bandwidth is read in B/s without its unit: 'memory_bandwidth: 3.35' is 3.35 B/s
                bad += 1
                for b in bare:
                    typer.echo(
                        f"simcli: error: {f}: {b} has no unit and reads as B/s; write it with its unit "
                        "('3.35 TB/s', '400 Gb/s')",
                        err=True,
                    )
                continue
            for w in rules.tier_order(p, f):
                rules.suspicious(w)
            typer.echo(f"{f}: ok ({p.name}: {p.device.name}, {len(p.network)} tier(s))")
        except InputError as e:
            bad += 1
            for line in getattr(e, "all_errors", None) or (str(e),):  # every error of the file, not the first
                typer.echo(f"simcli: error: {line}", err=True)
    if bad:
        raise typer.Exit(2)


@profiles_app.command("schema", epilog=examples("simcli profiles schema -o profile.schema.json"))
@handle_errors
def profiles_schema(output: o.Output = None, force: o.Force = False) -> None:
    """The profile format as a JSON Schema (draft 2020-12), for editors that complete and check YAML.

    For example, VS Code's YAML extension: add '# yaml-language-server: $schema=profile.schema.json' as the
    first line of a profile, after 'simcli profiles schema -o profile.schema.json'.
    """

    emit(json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n", output, force)


@profiles_app.command("detect", epilog=examples("simcli profiles detect -o my-host.yaml"))
@handle_errors
def profiles_detect(
    output: Annotated[
        Optional[str],
        o.option("--output", "-o", help="Write the profile (YAML) here, atomically [default: stdout]."),
    ] = None,
    force: o.Force = False,
    name: Annotated[
        Optional[str],
        o.option("--name", help="Name of the profile [default: the output file's stem, else 'detected']."),
    ] = None,
) -> None:
    """Write a profile of this machine: what is detected (GPUs, links, NICs, cores) and what is assumed, marked."""

    import yaml  # lazy

    from ..io.detect import detect  # lazy

    if output:
        check_output_path(output, force)
    pname = name or (Path(output).stem if output else "detected")
    data = detect(pname, date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    text = (
        "# written by simcli profiles detect: DETECTED values were read off this machine, ASSUMED ones are "
        "to be measured\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)
    )
    profile_from_dict(yaml.safe_load(text), pname)  # check before writing
    if not output:
        sys.stdout.write(text)
        return
    p = write_atomic(output, text, force=force)
    prof = load_profile(p)
    typer.echo(f"wrote {p} ({prof.name}: {prof.device.name}, {len(prof.network)} tier(s); checked: it loads)", err=True)


@models_app.command("list", epilog=examples("simcli models list", "simcli models list -f csv"))
@handle_errors
def models_list(format: o.FormatOpt = o.Format.table) -> None:
    """Built-in models: parameters, training FLOPs per sample, default batch and source."""

    recs = []
    for m in presets().values():
        recs.append(
            {
                "name": m.name,
                "kind": m.kind,
                "params": m.params,
                "seq_len": m.seq_len,
                "flops_per_sample": m.flops_per_sample(),
                "batch_per_device": m.batch_per_device,
                "description": m.description,
                "source": "; ".join(m.sources),
            }
        )
    from ..io.render import Column  # lazy

    _listing(
        recs,
        format,
        [
            Column("name", "name", justify="left"),
            Column("kind", "kind", justify="left"),
            Column("params", "params", fmt_count),
            Column("seq", "seq_len", priority=3),
            Column("train FLOP/sample", "flops_per_sample", lambda v: fmt_count(v) + "FLOP", short="FLOP/sample"),
            Column("batch/device", "batch_per_device", priority=2, short="batch"),
            Column("description", "description", justify="left", priority=4),
        ],
        caption="Training FLOPs = 3 x forward (CNNs: forward = 2 x MACs); transformers 6·N·seq_len.",
    )
