"""Every command and option of the CLI, and every exported metric, is documented.

The project's rule is that every public behaviour is in docs/ and in --help. These tests walk the
Typer app: each command has a description, each option a help text and a mention in the section
of docs/cli.md that names the command; each metric of ``Metrics`` is named in docs/operations.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from scaleahead.cli import app
from scaleahead.observability import Metrics

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _commands() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in sorted(cmd.commands.items()):
                walk(sub, [*path, name])
        else:
            out.append((" ".join(path), cmd))

    walk(typer.main.get_command(app), [])
    return out


COMMANDS = _commands()


def _options(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if getattr(p, "param_type_name", "") == "option"]


def _sections(name: str) -> str:
    """The sections of docs/cli.md whose text names ``scaleahead <name>``."""
    text = (DOCS / "cli.md").read_text()
    pattern = re.compile(re.escape(f"scaleahead {name}") + r"(?![\w-])")
    return "\n".join(s for s in re.split(r"\n(?=## )", text) if pattern.search(s))


def test_the_app_has_commands() -> None:
    assert len(COMMANDS) > 20


@pytest.mark.parametrize(("name", "cmd"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_command_and_option_has_a_help_text(name: str, cmd: Any) -> None:
    assert (cmd.help or "").strip(), f"scaleahead {name} has no description"
    for p in cmd.params:
        assert (getattr(p, "help", None) or "").strip(), f"scaleahead {name}: {p.name} has no help text"


@pytest.mark.parametrize(("name", "cmd"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_option_is_in_the_commands_section_of_docs_cli_md(name: str, cmd: Any) -> None:
    text = _sections(name)
    assert text, f"docs/cli.md has no section naming scaleahead {name}"
    missing = [
        "/".join(p.opts + p.secondary_opts)
        for p in _options(cmd)
        if not any(re.search(re.escape(o) + r"(?![\w-])", text) for o in p.opts + p.secondary_opts)
    ]
    assert not missing, f"docs/cli.md does not mention {missing} of scaleahead {name}"


def test_every_exported_metric_is_in_docs_operations_md() -> None:
    text = (DOCS / "operations.md").read_text()
    names = []
    for family in Metrics().registry.collect():
        # prometheus_client exports a counter as <name>_total; the docs name what a query uses
        shown = f"{family.name}_total" if family.type == "counter" else family.name
        names.append(shown)
    missing = [n for n in names if not re.search(re.escape(n) + r"(?![\w])", text)]
    assert names and not missing, f"docs/operations.md does not name the metrics {missing}"


def test_every_logged_event_is_in_docs_operations_md() -> None:
    """The list of events in docs/operations.md ("Endpoints and logs") presents itself as complete:
    until 2026-12-06 it missed history_too_many_points, series_off_grid and webhook_client_refused
    (found by the observability audit, which compared the code's events with it)."""
    root = DOCS.parent
    text = (DOCS / "operations.md").read_text()
    events: set[str] = set()
    for package in ("scaleahead", "actuator", "storage", "forecaster", "planner"):
        for path in (root / package).rglob("*.py"):
            events |= set(re.findall(r'"event": *"([A-Za-z_]+)"', path.read_text()))
    assert len(events) > 50, events
    missing = sorted(e for e in events if f"`{e}`" not in text and f"event={e}`" not in text)
    assert not missing, f"docs/operations.md does not list the events {missing}"


def test_help_shows_no_type_beside_a_flag_and_the_type_beside_an_option(cli: Any) -> None:
    """``--once`` takes no value: its help line had ``<bool>`` beside it (typer 0.29's rich help),
    as if ``--once true`` were expected; options that take a value keep their type."""
    code, out, _ = cli("run", "--help")
    assert code == 0
    lines = {line.split()[1]: line for line in out.splitlines() if line.lstrip("│ ").startswith("--")}
    for flag in ("--once", "--dry-run", "--no-server", "--help"):
        assert "<bool>" not in lines[flag], lines[flag]
    assert "<str>" in lines["--model"] and "<float>" in lines["--interval"]


def test_the_cli_imports_on_a_typer_without_the_rich_type_method() -> None:
    """The flag patch applies only where typer has ``display_type_rich``: pyproject allows older
    releases without it, where the import (every command) failed (audit)."""
    import subprocess
    import sys

    code = (
        "import typer.core\n"
        "for k in typer.core.TyperOption.__mro__:\n"
        "    if 'display_type_rich' in vars(k):\n"
        "        delattr(k, 'display_type_rich')\n"
        "import scaleahead.cli\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
