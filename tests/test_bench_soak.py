"""`scaleahead bench soak` through the real console entry point: a short soak with fast churn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "bench", "soak", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )


def test_a_short_soak_with_churn_stays_bounded_and_writes_its_json(tmp_path: Path) -> None:
    out_file = tmp_path / "soak.json"
    out = cli(
        "--cycles", "400", "--workloads", "3", "--churn", "2", "--churn-every", "50", "--sample-every", "100",
        "--json", str(out_file),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out_file.read_text())
    assert set(doc) == {"params", "samples", "summary"}
    assert doc["params"]["model"] == "seasonal_naive"
    samples = doc["samples"]
    assert [s["cycle"] for s in samples] == [1, 100, 200, 300, 400]
    for key in (
        "rss_kb", "peak_rss_kb", "fds", "threads", "metric_series", "metric_series_removed", "cycle_ms_median",
        "sizes", "db_rows", "live_policies", "removed_workloads", "removed_since_report",
    ):  # fmt: skip
        assert key in samples[-1], key
    last = samples[-1]
    assert last["rss_kb"] > 0 and last["peak_rss_kb"] >= last["rss_kb"]
    # 7 churns (cycles 50..350) of 2 policies each were removed; the daemon saw them go
    assert last["removed_workloads"] >= 12
    assert last["live_policies"] == 5
    # the daemon did real work: plans and forecasts in the database, pruned by the short retention
    assert last["db_rows"]["plans"] > 0 and last["db_rows"]["workloads"] >= 5 + 12
    assert last["db_rows"]["forecasts"] < 400 * 5
    per_workload = [k for k in last["sizes"] if k not in ("retrained", "reports", "live_forgotten")]
    assert "recent" in per_workload and "live_pending" in per_workload and "backoff" in per_workload
    for name in per_workload:
        assert last["sizes"][name] <= last["live_policies"], (name, last["sizes"][name])
    assert last["sizes"]["by_workload"] == 5 and last["sizes"]["recent"] >= 3  # the stable ones decided
    assert all(s["metric_series_removed"] == 0 for s in samples)
    summary = doc["summary"]
    assert summary["verdicts"]["metric_series_removed"]["verdict"] == "bounded"
    assert summary["verdicts"]["recent"]["verdict"] == "bounded"
    assert set(summary["growth_per_1000_cycles"]) >= {"rss_kb", "recent", "live_pending"}
    # the printed table: a header, one row per sample, the growth line and one verdict per structure
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["cycle", "vt_h"]
    assert sum(1 for ln in lines if ln.split() and ln.split()[0].isdigit()) == 5
    assert any(ln.startswith("growth per 1,000 cycles") for ln in lines)
    assert any(ln.split()[:2] == ["bounded", "recent:"] for ln in lines if ln.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--churn-every", "0"], "--churn-every 0 is not a count of 1 or more"),
        (["--cycles", "100", "--sample-every", "200"], "--sample-every 200 is larger than --cycles 100"),
        (["--cycles", "0"], "--cycles 0 is not a count of 1 or more"),
        (["--churn", "-1"], "--churn -1 is not a count of 0 or more"),
        (["--cycles", "100", "--sample-every", "50", "--churn-every", "200"], "--churn-every 200 is larger"),
        (["--plan-retention-h", "0"], "--plan-retention-h 0 is not a finite number above 0"),
    ],
)
def test_bad_options_exit_2_with_a_clear_message(args: list[str], message: str) -> None:
    out = cli(*args, timeout=60)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert message in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


def test_db_writes_to_the_database_given_and_keeps_it(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "soak.db"
    out = cli("--cycles", "60", "--workloads", "2", "--churn", "1", "--churn-every", "30", "--sample-every", "30",
              "--db", f"sqlite:///{db}")  # fmt: skip
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(db) as conn:
        names = {r[0] for r in conn.execute("select namespace || '/' || name from workloads")}
    # the stable policies and both generations of the churning one the daemon read
    assert {"shop/stable0", "shop/stable1", "churn0/w0x0", "churn1/w1x0"} <= names, names


def test_an_unusable_db_url_exits_2_without_a_traceback() -> None:
    out = cli("--cycles", "20", "--sample-every", "10", "--churn-every", "10", "--db", "nonsense", timeout=60)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Database URL 'nonsense' is not usable" in out.stderr + out.stdout
    assert "Traceback" not in out.stderr
