"""The command line (typer). Only this package imports typer.

Layout: :mod:`.options` declares every option once (aliases and option groups), :mod:`.common` holds the
error-to-exit-code map and output helpers, one module per command family owns its ``typer.Typer``, and
:mod:`.app` (the root) registers them. No command module imports :mod:`.app`.
"""

from .app import app, main

__all__ = ["app", "main"]
