"""Command groups of the CLI, one module per area.

Each module here defines ``register(app, bench_app)``, adding its commands to the main Typer app
and, for benchmarks, to the ``bench`` group. ``scaleahead.cli`` calls every module's ``register``.
"""

from __future__ import annotations

import importlib
import math
import os
import pkgutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from scaleahead.errors import UserError

#: ``--db`` of every command that opens the store: resolved as the daemon resolves it
#: (``storage.store.default_db_url``).
DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLAlchemy URL of the scaleahead database (default: SCALEAHEAD_STORAGE__URL, else "
        "SCALEAHEAD_DB_URL, else SQLite; docs/storage.md).",
    ),
]


def db_width(row: str, column: str) -> int:
    """The width of text column ``column`` of ``storage.schema.<row>`` (``RolloutRow``, ``group``): what a
    value written there may hold on PostgreSQL (SQLite keeps longer ones, PostgreSQL refuses the write)."""
    from storage import schema

    return int(getattr(getattr(schema, row).__table__.c[column].type, "length"))  # noqa: B009


def check_fits(option: str, value: str, row: str, column: str, hint: str) -> None:
    """A ``UserError`` now, before any work or write, when ``value`` is longer than the database column
    it is stored in (``db_width``): on PostgreSQL the write would fail half-way through the command."""
    width = db_width(row, column)
    if len(value) > width:
        raise UserError(
            f"{option} is {len(value)} characters ({value[:40]!r}...); the database keeps at most {width}.", hint
        )


def _table_or_json(value: str) -> str:
    if value not in ("table", "json"):
        raise typer.BadParameter(f"{value!r} is not known: use table or json.")
    return value


#: ``--output`` of the listing commands: table (default) or json, anything else refused.
OutputOpt = Annotated[str, typer.Option(help="table or json.", callback=_table_or_json)]


def check_output(path: Path | None, option: str, suffix: str | None = None) -> None:
    """A ``UserError`` now, before the work, unless ``path`` can be written where it says.

    A benchmark that ran for minutes must not fail at its last line because the folder of its
    output does not exist (and lose its results).
    """
    if path is None:
        return
    if suffix and path.suffix.lower() != suffix:
        raise UserError(f"{option} {path} does not end in {suffix}.", f"Give a file name ending in {suffix}.")
    if path.is_dir():
        raise UserError(f"{option} {path} is a folder.", "Give a file path.")
    if not path.parent.is_dir():
        raise UserError(f"The folder of {option} {path} does not exist.", "Create it first or choose another path.")
    if path.exists():  # written in place: the file must be writable, not its folder (/dev/stdout)
        if not os.access(path, os.W_OK):
            raise UserError(f"{option} {path} cannot be written (no permission).", "Choose another path.")
        return
    _check_writable(path.parent, option, path)


def check_folder(path: Path, option: str, create: bool = True) -> None:
    """A ``UserError`` now, before the work, unless ``path`` is (or can be made) a folder we can write in.

    It is made now, unless ``create`` is false: then a missing folder is only checked to be makeable
    (its nearest existing ancestor a writable folder), and the caller makes it when it writes there.
    """
    if path.exists() and not path.is_dir():
        raise UserError(f"{option} {path} is a file.", "Give a folder.")
    if not create and not path.exists():
        ancestor = path.absolute().parent
        while not ancestor.exists():
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise UserError(f"{option} {path} cannot be created ({ancestor} is a file).", "Choose another folder.")
        try:
            with tempfile.NamedTemporaryFile(dir=ancestor, prefix=".scaleahead-write-test-"):
                pass
        except OSError as exc:
            raise UserError(
                f"{option} {path} cannot be created: {ancestor} is not writable ({exc.strerror}).",
                "Choose another folder.",
            ) from exc
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path} cannot be created ({exc.strerror}).", "Choose another folder.") from exc
    _check_writable(path, option, path)


def _check_writable(folder: Path, option: str, path: Path) -> None:
    # A file made and removed in the folder: the one test that also holds for root on a read-only
    # filesystem, /sys or a full disk.
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".scaleahead-write-test-"):
            pass
    except OSError as exc:
        raise UserError(
            f"{option} {path} cannot be written: {folder} is not writable ({exc.strerror}).", "Choose another path."
        ) from exc


def check_positive(option: str, value: float | None, hint: str, zero: bool = False) -> None:
    """A ``UserError`` now, before any work, unless ``value`` is a finite number above 0 (or 0 itself
    when ``zero``); ``None`` (the option left out) passes. A count of 0, a negative interval or NaN
    ran the work and printed nonsense, or failed with a traceback at its end."""
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        if isinstance(value, int):
            raise UserError(f"{option} {value} is not a count of {0 if zero else 1} or more.", hint)
        raise UserError(f"{option} {value:g} is not a finite number {'of 0 or more' if zero else 'above 0'}.", hint)


def number_list(option: str, text: str | None, example: str) -> list[float]:
    """A comma-separated list of numbers from an option, or one clear error naming the option."""
    if not text:
        return []
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise UserError(
            f"{option} {text!r} is not a comma-separated list of numbers.", f"Give e.g. {example}."
        ) from exc


def share_steps(option: str, text: str, example: str = "0.25,0.5,1.0") -> tuple[float, ...]:
    """A canary's share steps: numbers rising within (0, 1] and ending at 1."""
    shares = tuple(number_list(option, text, example))
    if not shares or any(not 0 < x <= 1 for x in shares) or list(shares) != sorted(shares) or shares[-1] != 1.0:
        raise UserError(f"{option} {text!r} must rise within (0, 1] and end at 1.", f"Give e.g. {example}.")
    return shares


def register_all(app: typer.Typer, bench_app: typer.Typer) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(app, bench_app)
