"""Command groups of the CLI, one module per area.

Each module here defines ``register(app, bench_app)``, adding its commands to the main Typer app
and, for benchmarks, to the ``bench`` group. ``scaleahead.cli`` calls every module's ``register``.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer


def register_all(app: typer.Typer, bench_app: typer.Typer) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(app, bench_app)
