"""Build a wheel, install it into a fresh virtual environment and run the console script from there.

The venv has no access to the source tree (it runs in a temporary directory) and no editable
install: the system's site-packages are added as a plain path (so numpy, typer... are found)
without running their .pth hooks, so an editable simcli in the system environment cannot leak in.
"""

import json
import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _source_copy(dest: Path) -> Path:
    """What the build reads (pyproject.toml, README.md, simcli/, hardware_profiles/), copied to ``dest``: setuptools
    writes build/ and an .egg-info folder beside its sources, and two runs building in the checkout at once (two CI
    passes, -n 2, a developer's run) collided there ('File exists: build/bdist.linux-x86_64/wheel/...')."""
    import shutil

    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "hardware_profiles")  # simcli/hardware_profiles: a link
    shutil.copytree(ROOT / "simcli", dest / "simcli", ignore=skip)
    shutil.copytree(ROOT / "hardware_profiles", dest / "hardware_profiles")
    return dest


@pytest.mark.slow
def test_wheel_installs_and_runs(tmp_path):
    wheels = tmp_path / "wheels"
    src = _source_copy(tmp_path / "src")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    (wheel,) = wheels.glob("simcli-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "simcli/hardware_profiles/dgx-h100.yaml" in names
    assert "simcli/io/data/models.yaml" in names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "_system_site.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "--ignore-installed",
            "-q",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SIMCLI_PROFILE_PATH")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # no user profiles
    where = subprocess.run(
        [str(py), "-c", "import simcli; print(simcli.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(env_dir)), f"simcli imported from {where}, not from the venv"
    exe = env_dir / "bin" / "simcli"
    r = subprocess.run(
        [str(exe), "speedup", "--devices", "1..64", "--format", "json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    recs = json.loads(r.stdout)
    assert len(recs) == 64 and recs[0]["speedup"] == 1.0
    r = subprocess.run([str(exe), "profiles", "list"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "built-in" in r.stdout and "dgx-h100" in r.stdout


def test_the_package_version_is_the_one_pyproject_builds():
    import re

    from simcli.version import __version__

    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == __version__
