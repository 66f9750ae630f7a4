"""The CLI over a real Prometheus: ``history``, ``plan --prometheus`` and ``backfill --serve``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig, RangeRequest
from scaleahead.traces import load_series

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "policy.yaml"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_history_writes_the_range_as_a_series_csv_that_loads_back_equal(prom, tmp_path) -> None:
    out = tmp_path / "web.csv"
    # A row is the step that ends at its point: the point at web.start is the row at web.start - 10.
    r = cli(
        "history", "--prometheus", prom.url, "--query", 'nasa_requests{workload="web"}',
        "--start", iso(prom.web.start - 10), "--end", iso(prom.web.end - 20), "--step", "10s", "--output", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    back = load_series(str(out))
    assert back.start == prom.web.start - 10 and back.step_s == 10.0
    np.testing.assert_array_equal(back.values, prom.web.values)
    assert out.read_text().splitlines()[1].endswith(",")  # the outage: empty cells, not zeros


def test_history_writes_a_sample_beyond_float32_as_missing_so_the_csv_loads_back(prom, tmp_path) -> None:
    """Every Prometheus reader takes such a glitch as missing, and a series CSV refuses it: before
    2026-12-05 evening `history` wrote it, and `plan --history` of the file was refused."""
    out = tmp_path / "web.csv"
    base = 'nasa_requests{workload="web"}'
    i = int(np.flatnonzero(np.nan_to_num(prom.web.values) > 0)[100])
    at = prom.web.start + i * 10.0  # the sample of web.values[i], written out as row i (see above)
    query = f"{base} + 1e42 * (timestamp({base}) == bool {at:.0f})"
    r = cli(
        "history", "--prometheus", prom.url, "--query", query,
        "--start", iso(prom.web.start - 10), "--end", iso(prom.web.end - 20), "--step", "10s", "--output", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stdout.split())
    assert "1 value(s) beyond 3.4e+38" in said and "written as missing" in said, said
    assert "Workload ," not in " ".join((r.stdout + r.stderr).split())  # no workload here: "Query ..."
    back = load_series(str(out))
    expected = prom.web.values.copy()
    expected[i] = np.nan
    np.testing.assert_array_equal(back.values, expected)


def test_history_from_an_unreachable_server_exits_2_and_writes_nothing(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "x.csv"
    r = cli(
        "history", "--prometheus", f"http://127.0.0.1:{port}", "--query", "up", "--start", "0", "--end", "100",
        "--output", str(out), "--timeout", "1",
    )  # fmt: skip
    assert r.returncode == 2
    assert "cannot connect" in r.stderr and "'up'" in r.stderr and not out.exists()


def test_plan_from_prometheus_equals_plan_from_the_same_history_as_a_csv(prom, tmp_path) -> None:
    policy = tmp_path / "policy.yaml"
    text = EXAMPLE.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("query:"))
    policy.write_text(text.replace(old, '    query: nasa_requests{workload="web"}'))
    at = iso(prom.web.end)
    csv = tmp_path / "web.csv"
    assert cli(
        "history", "--prometheus", prom.url, "--query", 'nasa_requests{workload="web"}',
        "--start", iso(prom.web.end - 2 * 86400), "--end", iso(prom.web.end - 10), "--output", str(csv),
    ).returncode == 0  # fmt: skip
    from_prom = cli(
        "plan", "--policy", str(policy), "--prometheus", prom.url, "--at", at, "--output", "json",
        "--db", f"sqlite:///{tmp_path / 'a.db'}",
    )  # fmt: skip
    from_csv = cli(
        "plan", "--policy", str(policy), "--history", str(csv), "--at", at, "--output", "json",
        "--db", f"sqlite:///{tmp_path / 'b.db'}",
    )  # fmt: skip
    assert from_prom.returncode == 0, from_prom.stderr
    assert from_csv.returncode == 0, from_csv.stderr
    a, b = json.loads(from_prom.stdout), json.loads(from_csv.stdout)
    assert a["actions"] and a["actions"] == b["actions"] and a["created_at"] == at


def test_plan_needs_exactly_one_of_history_and_prometheus(prom, tmp_path) -> None:
    both = cli("plan", "--policy", str(EXAMPLE), "--history", "nasa-10s", "--prometheus", prom.url)
    neither = cli("plan", "--policy", str(EXAMPLE))
    assert both.returncode == neither.returncode == 2
    assert "exactly one of --history and --prometheus" in both.stderr


def test_plan_from_prometheus_with_no_data_exits_2_naming_the_query(prom, tmp_path) -> None:
    db = tmp_path / "a.db"
    r = cli(
        "plan", "--policy", str(EXAMPLE), "--prometheus", prom.url, "--at", iso(prom.web.end),
        "--db", f"sqlite:///{db}",
    )  # fmt: skip
    assert r.returncode == 2
    assert "default/web" in r.stderr and "http_requests_total" in r.stderr and "no data" in r.stderr
    assert not db.exists()


def test_backfill_serve_makes_a_trace_queryable_on_loopback(prom, tmp_path) -> None:
    csv = tmp_path / "slice.csv"
    w = prom.workers["w04"]
    rows = ["timestamp,value"] + [
        f"{int(t)},{'' if np.isnan(v) else int(v)}" for t, v in zip(w.times(), w.values, strict=True)
    ]
    csv.write_text("\n".join(rows) + "\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "scaleahead.cli", "backfill", "--trace", str(csv), "--tsdb", str(tmp_path / "tsdb"),
         "--metric", "demo_requests", "--labels", "app=demo,env=test", "--serve", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ,
    )  # fmt: skip
    try:
        with PrometheusClient(PrometheusConfig(f"http://127.0.0.1:{port}", retries=0)) as c:
            deadline = time.monotonic() + 60
            while not c.ready():
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.1)
            got = c.range_series(  # each step is stamped where it ends, when it is known
                RangeRequest("demo", 'demo_requests{app="demo",env="test"}', w.start + 10, w.end, 10.0)
            )
        np.testing.assert_array_equal(got.values, w.values)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert not _listening(port)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_retrain_from_prometheus_as_of_at_uses_only_history_before_it(prom, tmp_path) -> None:
    policy = tmp_path / "policy.yaml"
    text = EXAMPLE.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("query:"))
    policy.write_text(text.replace(old, '    query: nasa_requests{workload="web"}'))
    at = prom.web.end - 12 * 3600  # 12 hours before the newest point in Prometheus
    db = f"sqlite:///{tmp_path / 'r.db'}"
    out = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "retrain", "--policies", str(policy), "--history", "prometheus",
         "--at", iso(at), "--db", db],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "SCALEAHEAD_PROMETHEUS__URL": prom.url, "SCALEAHEAD_FORECAST__MODEL": "seasonal_naive",
             "SCALEAHEAD_JOBS__HISTORY_DAYS": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    from storage import Store

    model = Store(db).model(json.loads(out.stdout)["model_version_id"])
    assert model.data_end is not None and model.data_start is not None
    assert at - 60 <= model.data_end <= at, "trained on the history before --at, not up to now"


def test_plan_train_and_history_from_prometheus_use_the_timeout_and_concurrency_settings(tmp_path) -> None:
    """SCALEAHEAD_PROMETHEUS__TIMEOUT_S is the per-request timeout of plan and train --prometheus and of
    history (without --timeout), as of the control loop: a server that never answers fails after
    4 x 0.2 s, not 4 x 30 s."""
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = {**os.environ, "SCALEAHEAD_PROMETHEUS__TIMEOUT_S": "0.2", "SCALEAHEAD_PROMETHEUS__MAX_CONCURRENCY": "2"}
        for args in (
            ("plan", "--policy", str(EXAMPLE), "--prometheus", url, "--db", f"sqlite:///{tmp_path / 'p.db'}"),
            ("train", "--prometheus", url, "--policy", str(EXAMPLE), "--days", "1", "--out", str(tmp_path / "m")),
            ("history", "--prometheus", url, "--query", "up", "--start", "2026-01-01", "--end",
             "2026-01-01T01:00:00", "--output", str(tmp_path / "h.csv")),
        ):  # fmt: skip
            t0 = time.monotonic()
            r = subprocess.run(
                [sys.executable, "-m", "scaleahead.cli", *args], capture_output=True, text=True, timeout=60, env=env
            )
            assert time.monotonic() - t0 < 30, args[0]
            assert r.returncode == 2, (args[0], r.stderr)
            assert "0.2 s" in " ".join(r.stderr.split()), (args[0], r.stderr)
    assert not (tmp_path / "p.db").exists() and not (tmp_path / "h.csv").exists()


def test_history_over_a_range_of_more_points_than_a_series_csv_holds_is_refused_before_any_read(tmp_path) -> None:
    with socket.socket() as s:  # a server that would be read: it records every connection
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        s.settimeout(0.5)
        out = tmp_path / "h.csv"
        r = cli(
            "history", "--prometheus", f"http://127.0.0.1:{s.getsockname()[1]}", "--query", "up",
            "--start", "1900-01-01", "--end", "9999-01-01", "--output", str(out), "--timeout", "1",
        )  # fmt: skip
        try:
            s.accept()[0].close()
            connected = True
        except TimeoutError:
            connected = False
    assert r.returncode == 2, r.stderr  # was numpy's _ArrayMemoryError (190 GiB) after the reads
    err = " ".join(r.stderr.split())
    assert "25,557,975,361 points" in err and "at most 100,000,000" in err and "--step" in err
    assert "Traceback" not in err and not connected and not out.exists()


@pytest.mark.parametrize(
    "query", ['-1 - nasa_requests{workload="web"}', '0 * nasa_requests{workload="web"} / 0'], ids=["negative", "nan"]
)
def test_plan_from_prometheus_with_only_unusable_values_names_the_query_not_a_trace(prom, tmp_path, query) -> None:
    policy = tmp_path / "policy.yaml"
    text = EXAMPLE.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("query:"))
    policy.write_text(text.replace(old, f"    query: '{query}'"))
    db = tmp_path / "a.db"
    r = cli(
        "plan", "--policy", str(policy), "--prometheus", prom.url, "--at", iso(prom.web.end),
        "--db", f"sqlite:///{db}",
    )  # fmt: skip
    err = " ".join(r.stderr.split())
    assert r.returncode == 2, err
    # was "Trace 'default/web' has only missing values before --at. Choose another --at."
    assert f"Prometheus at {prom.url} answered the demand.query {query!r} of default/web" in err
    assert "no usable value" in err and "Check the query" in err and "Trace" not in err
    assert not db.exists()


def test_retrain_with_a_failed_history_read_is_refused_unless_allowed_and_names_what_it_left_out(
    prom, tmp_path
) -> None:
    """With Prometheus failing for some workloads, `retrain` exited 0 with a model fitted on the
    others, superseding the running retrained rollout; only a log line named the failure (audit of
    2026-12-05). A workload whose query finds no data is left out without refusing."""
    text = EXAMPLE.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("query:"))
    docs = [
        text.replace(old, f"    query: {query}").replace("name: web", f"name: {name}")
        for name, query in (
            ("web", 'nasa_requests{workload="web"}'),
            ("fresh", 'nasa_requests{workload="not-scraped-yet"}'),  # no data: a workload not scraped yet
            ("broken", "sum(nasa_requests{workload=})"),  # the read fails (Prometheus refuses the PromQL)
        )
    ]
    policies = tmp_path / "policies.yaml"
    policies.write_text("\n---\n".join(docs))
    db = f"sqlite:///{tmp_path / 'r.db'}"
    env = {
        **os.environ,
        "SCALEAHEAD_PROMETHEUS__URL": prom.url,
        "SCALEAHEAD_FORECAST__MODEL": "seasonal_naive",
        "SCALEAHEAD_JOBS__HISTORY_DAYS": "1",
    }
    args = [sys.executable, "-m", "scaleahead.cli", "retrain", "--policies", str(policies), "--history", "prometheus",
            "--at", iso(prom.web.end), "--db", db]  # fmt: skip
    refused = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert refused.returncode == 2, refused.stderr
    assert "broken" in refused.stderr and "--allow-failed-reads" in refused.stderr
    assert "Nothing was registered" in refused.stderr and "Traceback" not in refused.stderr
    assert "fresh" not in refused.stderr.split("error:")[-1], "no data is not a failed read"
    from storage import Store

    assert Store(db).models() == []

    allowed = subprocess.run([*args, "--allow-failed-reads"], capture_output=True, text=True, timeout=300, env=env)
    assert allowed.returncode == 0, allowed.stderr
    out = json.loads(allowed.stdout)
    reasons = {e["workload"].rsplit("/", 1)[-1]: e["reason"] for e in out["left_out"]}
    assert reasons == {"broken": "history_failed", "fresh": "no_data"}
    assert out["metrics"]["series"] == 1 and out["metrics"]["left_out"] == out["left_out"]
    assert Store(db).model(out["model_version_id"]).metrics["left_out"] == out["left_out"]
    warning = [line for line in allowed.stderr.splitlines() if line.startswith("warning:")]
    assert warning and "broken" in warning[0] and "fresh" in warning[0]


def test_history_writes_through_a_symlink_and_into_a_pipe_in_place(prom, tmp_path) -> None:
    """Until 2026-12-07 `history --output` always wrote a temporary file and renamed it over the
    path: a symlink became a plain file (its target untouched), /dev/stdout a regular file when run
    as root, and a pipe failed after the whole read (a review)."""
    import os

    target = tmp_path / "real.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    args = ("history", "--prometheus", prom.url, "--query", 'nasa_requests{workload="web"}',
            "--start", iso(prom.web.end - 600), "--end", iso(prom.web.end - 20), "--step", "10s")  # fmt: skip
    r = cli(*args, "--output", str(link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and target.read_text().startswith("timestamp,value\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = __import__("threading").Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    r = cli(*args, "--output", str(fifo))
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert got and got[0].startswith("timestamp,value\n") and fifo.exists() and not fifo.is_file()


def test_history_at_a_step_that_is_not_a_whole_second_keeps_the_first_point(prom, tmp_path) -> None:
    """At 1.2 s, `--start` on the grid: 51 points in a minute, the first at `--start` (a review of
    2026-12-07 found 50 written, the first dropped as just off the grid by float error)."""
    out = tmp_path / "fine.csv"
    start = prom.web.end - 3600 - (prom.web.end - 3600) % 60  # a whole minute, a multiple of 1.2 s
    r = cli("history", "--prometheus", prom.url, "--query", 'nasa_requests{workload="web"}',
            "--start", iso(start), "--end", iso(start + 60), "--step", "1.2s", "--output", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == 51, len(rows)
    assert rows[0].startswith(f"{float(start)!r},") and all(len(r.split(",")[0].split(".")[-1]) <= 6 for r in rows)
