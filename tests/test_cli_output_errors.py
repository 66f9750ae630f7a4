"""An output that cannot be written (a full disk): one paragraph and exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "policy.yaml"
FULL = Path("/dev/full")  # every write fails with ENOSPC


def run(*args: str, stdout: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *args], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300
    )


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ("crd", "--output", str(FULL)),
        ("config-doc", "--output", str(FULL)),
        ("crd", ">"),
        ("version", ">"),
        ("models", "list", "--db", "DB", ">"),
        ("plan", "--policy", str(EXAMPLE), "--history", "nasa-10s", "--output", "json", "--db", "DB", ">"),
    ],
    ids=["crd-output", "config-doc-output", "crd-stdout", "version-stdout", "models-list-stdout", "plan-json-stdout"],
)
def test_a_full_disk_is_one_paragraph_and_exit_2(args: tuple[str, ...], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'a.db'}"
    argv = [db if a == "DB" else a for a in args if a != ">"]
    assert run("db", "upgrade", "--db", db).returncode == 0  # models list opens an existing database only
    if args[-1] == ">":
        with FULL.open("w") as full:
            r = run(*argv, stdout=full.fileno())
    else:
        r = run(*argv)
    err = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stderr  # was an OSError traceback (exit 1), or exit 120 at shutdown
    assert "could not write" in err and "No space left on device" in err and "Free space" in err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_a_closed_pipe_is_still_exit_1_silently() -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        r = run("config-doc", stdout=write)
    finally:
        os.close(write)
    assert r.returncode == 1 and r.stderr == ""
