"""One profile schema (simcli.io.schema): it drives validation, serialisation, description and the JSON Schema."""

from __future__ import annotations

import json

import pytest
import yaml

from simcli.base.types import InputError
from simcli.cli import app
from simcli.io import schema as S
from simcli.io.profiles import (
    _DEVICE,
    _NCCL,
    _TIER,
    _TOP,
    describe,
    list_profiles,
    profile_from_dict,
    profile_to_dict,
    resolve_profile,
)


def test_the_parser_allows_exactly_the_schemas_keys():
    assert (_TOP, _DEVICE, _TIER, _NCCL) == tuple(S.keys(x) for x in (S.TOP, S.DEVICE, S.TIER, S.NCCL))


def test_every_field_is_complete():
    for sec in (S.TOP, S.DEVICE, S.TIER, S.NCCL):
        for f in sec:
            assert f.key and f.help and f.kind, f
            if f.kind == "quantity":
                assert f.unit in ("bytes", "bandwidth", "time", "flops"), f
            if f.kind == "choice":
                assert f.choices, f


@pytest.mark.parametrize("name", [e.name for e in list_profiles() if e.origin == "built-in"])
def test_builtins_round_trip_and_describe_every_given_field(name):
    p = resolve_profile(name)
    q = profile_from_dict(yaml.safe_load(yaml.safe_dump(profile_to_dict(p))), name)
    assert q.network == p.network and q.device == p.device and q.library == p.library and q.nccl == p.nccl
    rows = dict(describe(p))
    assert "device.mfu" in rows and "network[0].latency" in rows


def test_json_schema_accepts_the_builtins_and_refuses_what_the_parser_refuses(runner):
    jsonschema = pytest.importorskip("jsonschema")
    r = runner.invoke(app, ["profiles", "schema"])
    assert r.exit_code == 0, r.output
    sch = json.loads(r.stdout)
    jsonschema.Draft202012Validator.check_schema(sch)
    val = jsonschema.Draft202012Validator(sch)
    for e in list_profiles():
        if e.origin == "built-in":
            doc = profile_to_dict(resolve_profile(e.name))
            assert not list(val.iter_errors(doc)), e.name
    doc = profile_to_dict(resolve_profile("dgx-h100"))
    for bad in ({"bandwith": "1 GB/s"}, {"bandwidth": "400 Gbps/s"}, {"per": "rack"}, {"efficiency": 1.5}):
        d = json.loads(json.dumps(doc))
        d["network"][1].update(bad)
        assert list(val.iter_errors(d)), bad
        with pytest.raises(InputError):
            profile_from_dict(d, "x.yaml")
