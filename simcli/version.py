"""The package version, in one place (pyproject.toml repeats it; tests/test_packaging.py holds them equal)."""

__version__ = "0.1.0"
