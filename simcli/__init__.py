"""simcli: simulate data-parallel training speed.

The Python API the CLI is built on::

    from simcli import resolve_profile, get_model, Scenario, simulate
    sc = Scenario(profile=resolve_profile("dgx-a100"), workload=get_model("resnet50").workload())
    res = simulate(sc, [1, 2, 4, 8, 16, 32, 64])
    res.speedup, res.efficiency          # numpy arrays, one value per k
    df = res.to_frame()                  # pandas DataFrame (pandas imported on demand)
"""

from .base.types import Device, InputError, Profile, SimcliError, Tier, Workload  # noqa: E402
from .io.profiles import load_profile, resolve_profile  # noqa: E402
from .io.workloads import build_workload, get_model  # noqa: E402
from .step.engine import Result, Scenario, simulate  # noqa: E402
from .version import __version__  # noqa: E402

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
