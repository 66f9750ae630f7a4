"""A SQLite database that cannot be opened or written (a read-only file or folder): the error
says so and what to do, not "check that the server is running" or "try again" (a review of
2026-12-07). Opened read-only through SQLite's URI `mode=ro`, which refuses writes as a read-only
file does, also to root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "policy.yaml"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scaleahead.cli", *args], capture_output=True, text=True, timeout=300)


def test_a_database_that_cannot_be_opened_names_the_file_not_a_server(tmp_path: Path) -> None:
    out = cli("db", "upgrade", "--db", f"sqlite:///file:{tmp_path}/missing/ro.db?mode=ro&uri=true")
    said = " ".join(out.stderr.split())
    assert out.returncode == 2, out.stderr
    assert "Cannot open or write the SQLite database" in said and "writable" in said
    assert "server is running" not in said


def test_a_read_only_database_is_not_told_to_try_again(tmp_path: Path) -> None:
    db = tmp_path / "ro.db"
    assert cli("db", "upgrade", "--db", f"sqlite:///{db}").returncode == 0
    out = cli(
        "plan", "--policy", str(EXAMPLE), "--history", "nasa-10s", "--db", f"sqlite:///file:{db}?mode=ro&uri=true"
    )
    said = " ".join(out.stderr.split())
    assert out.returncode == 2, out.stderr
    assert "read-only" in said and "try again" not in said, said


def test_a_sqlite_path_starting_with_a_tilde_is_in_the_home_folder(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Until 2026-12-07 `--db sqlite:///~/x.db` made a folder named "~" in the working directory."""
    from storage import Store

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    Store("sqlite:///~/x.db").close()
    assert (tmp_path / "home" / "x.db").is_file() and not (tmp_path / "~").exists()
