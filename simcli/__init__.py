"""simcli: simulate data-parallel training speed.

The Python API the CLI is built on::

    from simcli import resolve_profile, get_model, Scenario, simulate
    sc = Scenario(profile=resolve_profile("dgx-a100"), workload=get_model("resnet50").workload())
    res = simulate(sc, [1, 2, 4, 8, 16, 32, 64])
    res.speedup, res.efficiency          # numpy arrays, one value per k
    df = res.to_frame()                  # pandas DataFrame (pandas imported on demand)
"""

from importlib import import_module

from .version import __version__

#: the public names and the module each comes from; imported on first use (PEP 562), so that ``import simcli``
#: and the command line's start-up pay only for what they touch
_API = {
    "Device": ".base.types",
    "InputError": ".base.types",
    "Profile": ".base.types",
    "SimcliError": ".base.types",
    "Tier": ".base.types",
    "Workload": ".base.types",
    "load_profile": ".io.profiles",
    "resolve_profile": ".io.profiles",
    "build_workload": ".io.workloads",
    "get_model": ".io.workloads",
    "Result": ".step.engine",
    "Scenario": ".step.engine",
    "simulate": ".step.engine",
}


def __getattr__(name: str):
    if name in _API:
        value = getattr(import_module(_API[name], __name__), name)
        globals()[name] = value  # once: the next access is a plain attribute
        return value
    raise AttributeError(f"module 'simcli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


__all__ = [
    "Scenario",
    "Result",
    "simulate",
    "Profile",
    "Device",
    "Tier",
    "Workload",
    "SimcliError",
    "InputError",
    "load_profile",
    "resolve_profile",
    "get_model",
    "build_workload",
    "__version__",
]
