"""The command line (typer). Only this package imports typer.

Layout: :mod:`.options` declares every option once (aliases and option groups), :mod:`.common` holds the
error-to-exit-code map and output helpers, one module per command family owns its ``typer.Typer``, and
:mod:`.app` (the root) lists them in a table (``app.COMMANDS``): a command's module is imported only when it
runs. No command module imports :mod:`.app` or another command module.
"""

import gc as _gc

# The import of the command line (typer, rich, numpy and simcli's own) runs without the cyclic garbage
# collector: nothing it builds is garbage, and each full collection on the way would walk all of it. main()
# keeps it paused until the command's body begins (simcli.cli.common.pause_collector).
_collecting = _gc.isenabled()
_gc.disable()
try:
    from .app import app, main
finally:
    if _collecting:
        _gc.enable()

__all__ = ["app", "main"]
