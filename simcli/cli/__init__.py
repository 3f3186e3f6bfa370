"""The command line (typer). Only this package imports typer."""

from .app import app, main

__all__ = ["app", "main"]
