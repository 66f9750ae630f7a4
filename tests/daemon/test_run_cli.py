"""`scaleahead run`, `retrain` and `bench speed` through the real console entry point."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from scaleahead.policy import parse_policies
from scaleahead.sharding import shard_of

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "policy.yaml"
# The CLI tests run the baseline family (an LSTM fit takes minutes; its loading is tested below).
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "SCALEAHEAD_FORECAST__MODEL": "seasonal_naive"}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_once_prints_one_cycle_with_reasons_and_phase_timings(tmp_path: Path) -> None:
    out = cli(
        "run", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s", "--target", "memory",
        "--db", f"sqlite:///{tmp_path / 'a.db'}", "--once", "--virtual",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["role"] == "leader"
    assert set(doc["phase_ms"]) >= {"history", "forecast", "state", "plan", "record", "act"}
    # One workload; the real demand at the trace's start asks for more than the one replica the
    # in-memory cluster starts with, and that cluster applies a scale-to.
    (action,) = doc["actions"]
    assert (action["kind"], action["target"], action["from"], action["noop"]) == (
        "ScaleTo",
        "Deployment/default/web",
        1,
        False,
    )
    assert action["to"] > 1 and action["reason_code"] == "forecast" and action["reason"]
    assert doc["results"] == [{"target": "Deployment/default/web", "outcome": "applied", "detail": "in memory"}]


def test_run_with_an_unavailable_source_says_what_to_do(tmp_path: Path) -> None:
    out = cli(
        "run", "--policies", str(EXAMPLE), "--history", "carrier-pigeon", "--db", f"sqlite:///{tmp_path / 'b.db'}"
    )
    assert out.returncode == 2
    assert "--history" in out.stderr and "trace:NAME" in out.stderr


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--interval", "0"], "--interval 0 is not a positive number of seconds"),
        (["--interval", "-10"], "--interval -10 is not a positive number of seconds"),
        (["--ticks", "0"], "--ticks 0 would run no cycle"),
        (["--port", "70000"], "--port 70000 is not a TCP port"),
    ],
)
def test_run_refuses_an_interval_tick_count_or_port_that_cannot_work(
    tmp_path: Path, option: list[str], says: str
) -> None:
    db = tmp_path / "c.db"
    out = cli("run", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s", "--target", "memory", "--virtual",
              "--db", f"sqlite:///{db}", *option)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr
    assert not db.exists()  # refused before anything was recorded


def test_run_with_a_bad_policy_folder_exits_2(tmp_path: Path) -> None:
    out = cli("run", "--policies", str(tmp_path), "--history", "trace:nasa-10s", "--target", "memory")
    assert out.returncode == 2
    assert "no *.yaml" in out.stderr


def test_the_daemon_serves_health_and_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    # Run as the shard of two that owns the example's workload: /metrics says which shard it is.
    shard = shard_of(parse_policies(EXAMPLE.read_text())[0].workload.key, 2)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(EXAMPLE),
            "--history", "trace:nasa-10s", "--target", "memory", "--db", f"sqlite:///{tmp_path / 'c.db'}",
            "--port", str(port), "--interval", "1", "--shard", f"{shard}/2",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**ENV, "SCALEAHEAD_LOOP__CAPACITY": "*=40", "SCALEAHEAD_LOOP__WARM_MEMORY_BUDGET_MB": "300"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        ready = False
        while time.monotonic() < deadline and not ready:
            try:
                ready = urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.3)
        assert ready, "the daemon became ready"
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert "scaleahead_leader 1.0" in body
        assert f"scaleahead_shard_index {shard}.0" in body and "scaleahead_shard_count 2.0" in body
        assert "scaleahead_workloads 1.0" in body
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    events = [rec.get("event") for rec in logs]
    assert "cycle" in events and "signal" in events
    assert events[-1] == "stopped", "the last thing it did was stop cleanly"
    cycle = next(rec for rec in logs if rec.get("event") == "cycle")
    assert {"time", "level", "logger", "message", "phase_ms", "lateness_s"} <= cycle.keys()
    # the limits meant for all shards: this shard's part (it has the only workload, so all of the
    # capacity; no warm pool, so the budget is split evenly)
    (limits,) = [rec for rec in logs if rec.get("event") == "shard_limits"]
    assert limits["capacity"] == {"*": 40} and limits["warm_memory_budget_mb"] == 150.0


def test_retrain_registers_a_challenger_and_opens_a_rollout(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    out = cli("retrain", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s", "--db", db)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["rollouts"]
    from storage import Store

    store = Store(db)
    assert store.model(doc["model_version_id"]).status == "challenger"
    assert store.rollouts()[0].challenger == str(doc["model_version_id"])


def test_bench_speed_writes_every_section_6_key(tmp_path: Path) -> None:
    out = cli(
        "bench", "speed", "--sizes", "20", "--cycle-sizes", "20", "--runs", "1", "--train-series", "4",
        "--json", str(tmp_path / "speed.json"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "speed.json").read_text())
    assert set(doc) >= {"forecast_ms", "plan_ms", "cycle_ms", "fetch_s", "train_s_per_1000_series_day", "peak_rss_mb"}
    assert set(doc["forecast_ms"]) == {"20"} and doc["cycle_memory_ms"]["20"] > 0
    # section 6's cycle reads from a real Prometheus: without --tsdb it is null, not the memory cycle
    assert doc["cycle_ms"] == {"20": None}
    for key in ("plan_quota_ms", "plan_shared_ms", "plan_cpu_quota_ms", "plan_cpu_shared_ms"):
        assert doc[key]["20"] > 0, key  # a namespace quota on pods or CPU, with room or short
    assert doc["fetch_s"] is None and any("Prometheus" in n for n in doc["notes"])
    assert doc["peak_rss_mb"] > 0
    assert doc["warm_budget_rebuild_ms"]["1000"] > 0  # the loop's hourly warm-budget rebuild, 1,000 functions
    assert doc["warm_budget_replay_ms"]["1000"] > 0  # the same, handed the loop's calibration
    assert set(doc["invocation_fit_ms"]["1000"]) == {"cycle", "hourly", "hazard_only"}
    assert all(v > 0 for v in doc["invocation_fit_ms"]["1000"].values())


def test_run_once_that_planned_no_workload_from_data_exits_1_with_a_summary(tmp_path: Path) -> None:
    import http.server
    import threading

    class Failing(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(500)
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"boom")

        do_GET = do_POST

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**ENV, "SCALEAHEAD_PROMETHEUS__URL": f"http://127.0.0.1:{server.server_address[1]}"}
    try:
        out = subprocess.run(
            [sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(EXAMPLE), "--history", "prometheus"]
            + ["--target", "memory", "--db", f"sqlite:///{tmp_path / 'a.db'}", "--once", "--log-format", "text"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert out.returncode == 1, out.stderr  # was 0: the errors were only in the JSON
    doc = json.loads(out.stdout)  # the summary is still printed, the fallback plan recorded
    assert doc["fallbacks"] == {"Deployment/default/web": "current"} and doc["plan_id"] == 1
    err = " ".join(out.stderr.split())
    assert "no workload could be planned from data" in err and "HTTP 500" in err and "Traceback" not in err


@pytest.mark.parametrize("virtual", [["--virtual"], []], ids=["virtual", "real-time"])
def test_run_at_before_the_trace_starts_is_refused_as_plan_refuses_it(tmp_path: Path, virtual: list[str]) -> None:
    db = tmp_path / "a.db"
    out = cli(
        "run", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s", "--target", "memory", "--once",
        "--at", "1990-01-01", "--db", f"sqlite:///{db}", *virtual,
    )  # fmt: skip
    plan = cli(
        "plan", "--policy", str(EXAMPLE), "--history", "nasa-10s", "--at", "1990-01-01", "--db", f"sqlite:///{db}"
    )
    assert out.returncode == plan.returncode == 2, out.stderr  # was 0, on the fallback
    err = " ".join(out.stderr.split())
    assert "'nasa-10s' has no data before --at 1990-01-01T00:00:00Z" in err and "Choose a later --at" in err
    assert err == " ".join(plan.stderr.split())
    assert not db.exists()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--once", "--ticks", "5"], "--ticks 5 does not go with --once"),
        (["--namespace", "foo", "--ticks", "1"], "--namespace foo does not go with --policies"),
    ],
    ids=["once-ticks", "policies-namespace"],
)
def test_run_refuses_options_that_do_not_go_together(tmp_path: Path, options: list[str], says: str) -> None:
    db = tmp_path / "a.db"
    out = cli(
        "run", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s", "--target", "memory", "--virtual",
        "--db", f"sqlite:///{db}", *options,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr  # both were accepted silently
    assert says in " ".join(out.stderr.split()) and "Drop" in out.stderr
    assert not db.exists()


def test_a_champion_that_cannot_be_loaded_at_start_is_warned_about_once(tmp_path: Path) -> None:
    """A damaged LSTM champion: the start-up falls back (``model_fallback``), and the first minute's
    registry check does not load and warn about the same version again (``champion_not_loaded``);
    it is tried again only after UNLOADABLE_RETRY_S (10 min)."""
    from storage import Store

    db = tmp_path / "c.db"
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    store = Store(f"sqlite:///{db}")
    mid = store.register_model("lstm-bad", "lstm", artifact_path=str(bad), status="champion")
    store.close()
    env = {**ENV, "SCALEAHEAD_FORECAST__MODEL": "lstm", "SCALEAHEAD_FORECAST__FALLBACK_MODEL": "seasonal_naive"}

    def run(ticks: int) -> list[dict]:
        out = subprocess.run(
            [sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s",
             "--target", "memory", "--virtual", "--no-server", "--ticks", str(ticks), "--log-format", "json",
             "--db", f"sqlite:///{db}"],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        lines = [json.loads(x) for x in out.stderr.splitlines() if x.startswith("{")]
        return [x for x in lines if x.get("event") in ("model_fallback", "champion_not_loaded")]

    # 12 ticks of 10 s: past the first minute's registry check, before the 10-minute retry.
    events = [x["event"] for x in run(12)]
    assert events == ["model_fallback"], events
    # After 10 minutes it is tried (and warned about) again.
    later = run(70)
    assert [x["event"] for x in later] == ["model_fallback", "champion_not_loaded"], later
    assert later[1]["model_version_id"] == mid


def test_run_model_is_the_family_the_daemon_follows(tmp_path: Path) -> None:
    """`run --model window_mean` with forecast.model seasonal_naive and a registered
    seasonal_naive champion: until 2026-12-07 the first minute's registry check read
    forecast.model's family and switched production to its champion (`model_changed`), so the
    model asked for ran for one minute. --model is forecast.model for the process."""
    from storage import Store

    db = tmp_path / "m.db"
    store = Store(f"sqlite:///{db}")
    sn = store.register_model("sn-1", "seasonal_naive", status="champion")
    store.close()
    env = {**ENV, "SCALEAHEAD_FORECAST__MODEL": "seasonal_naive"}

    def events(*model: str) -> list[dict]:
        out = subprocess.run(
            [sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s",
             "--target", "memory", "--virtual", "--no-server", "--ticks", "12", "--log-format", "json",
             "--db", f"sqlite:///{db}", *model],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        lines = [json.loads(x) for x in out.stderr.splitlines() if x.startswith("{")]
        return [x for x in lines if x.get("event") == "model_changed"]

    assert events("--model", "window_mean") == []
    # Without --model the start runs forecast.model's champion: nothing to switch to either.
    assert events() == [] and sn == 1


def test_run_warns_about_a_capacity_entry_that_no_policy_tenant_has(tmp_path: Path) -> None:
    """Until 2026-12-06 a loop.capacity entry naming no tenant (a typo; a name other than a namespace,
    with the cluster's policies) limited nothing, silently."""
    out = subprocess.run(
        [
            sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s",
            "--target", "memory", "--db", f"sqlite:///{tmp_path / 'w.db'}", "--once", "--virtual",
        ],
        capture_output=True, text=True, timeout=300,
        env={**ENV, "SCALEAHEAD_LOOP__CAPACITY": "shpo=10,default=5,*=40", "SCALEAHEAD_LOG__FORMAT": "json"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    logs = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    (unused,) = [rec for rec in logs if rec.get("event") == "capacity_unused"]
    assert unused["tenants"] == ["shpo"] and unused["level"] == "warning"
    assert "limits nothing" in unused["message"] and "default" in unused["message"]


def test_the_capacity_check_names_an_entry_again_only_after_it_was_in_use() -> None:
    import logging

    from scaleahead.commands.run import _capacity_names_checker
    from scaleahead.settings import Settings

    settings = Settings()
    settings.loop.capacity = {"shop": 10, "web": 5, "*": 40}
    check = _capacity_names_checker(settings, None)
    shop = parse_policies(
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\nmetadata: {name: a}\n"
        "spec:\n  tenant: shop\n  target: {name: a}\n  demand: {query: 'x'}\n  capacityPerReplica: 2\n"
    )
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logger = logging.getLogger("scaleahead")
    logger.addHandler(handler)
    try:
        check(shop)  # web is unused
        check(shop)  # still: not named again
        check([])  # shop is unused now too: only shop is new
        check(shop)
        check([])  # shop unused again after it was in use: named again
    finally:
        logger.removeHandler(handler)
    named = [r.tenants for r in seen if getattr(r, "event", "") == "capacity_unused"]  # type: ignore[attr-defined]
    assert named == [["web"], ["shop"], ["shop"]]
    quiet: list[logging.LogRecord] = []
    handler.emit = quiet.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        _capacity_names_checker(settings, "shop")([])  # with --namespace: one namespace's policies only
    finally:
        logger.removeHandler(handler)
    assert quiet == []


def test_text_logs_keep_the_fields_of_the_json_lines(tmp_path: Path) -> None:
    """`--log-format text`: a cycle's line carries its fields as key=value (it was just "cycle")."""
    out = cli(
        "run", "--once", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s", "--target", "memory",
        "--no-server", "--db", f"sqlite:///{tmp_path / 'a.db'}", "--log-format", "text",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if "scaleahead.daemon: cycle " in x]
    assert " event=cycle " in line and " changes=1 " in line and " errors=0 " in line, line
    phases = json.loads(line.split(" phase_ms=", 1)[1].split(" cycle_ms=", 1)[0])
    assert "plan" in phases and "forecast" in phases


def test_run_once_that_cannot_reach_the_lease_is_an_error_not_a_quiet_standby(tmp_path: Path) -> None:
    """`run --once --target kubernetes` with an API server that refuses connections printed
    {"role": "standby"} and exited 0 (a docs audit read it as success): now the summary says why
    (`standby_reason`), stderr says what to check, and the exit code is 1."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    out = cli(
        "run", "--once", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s", "--target", "kubernetes",
        "--kubeconfig", str(kubeconfig), "--no-server", "--db", f"sqlite:///{tmp_path / 'a.db'}",
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["role"] == "standby" and "Connection refused" in doc["standby_reason"]
    err = " ".join(out.stderr.split())
    assert "the leader Lease could not be read or written" in err and "Check --kubeconfig" in err
    assert "Traceback" not in err


def test_retrain_on_too_short_history_creates_no_database(tmp_path: Path) -> None:
    """Refused (exit 2, nothing registered) before the database is opened: the SQLite file was
    created and migrated first, although nothing was written to it (docs audit)."""
    trace = tmp_path / "short.csv"
    trace.write_text("timestamp,value\n" + "".join(f"{t},{5 + t % 3}\n" for t in range(0, 600, 10)))
    db = tmp_path / "r.db"
    out = cli("retrain", "--policies", str(EXAMPLE), "--history", f"trace:{trace}", "--db", f"sqlite:///{db}")
    err = " ".join(out.stderr.split())
    assert out.returncode == 2, out.stderr
    assert "Too little history to score a retrained model" in err and "Nothing was registered" in err
    assert not db.exists()


def test_sigterm_during_start_up_exits_0_with_a_stopped_line(tmp_path: Path) -> None:
    """Start-up reads the history first, which against a Prometheus that answers nothing takes a
    request timeout. A SIGTERM then got the default handler (exit 143, no log line) until
    2026-12-07, where docs/operations.md says a shutdown exits 0 (a review)."""
    from tests.conftest import silent_server

    with silent_server() as (port, held):
        env = {**ENV, "SCALEAHEAD_PROMETHEUS__URL": f"http://127.0.0.1:{port}",
               "SCALEAHEAD_PROMETHEUS__TIMEOUT_S": "60", "SCALEAHEAD_LOG__FORMAT": "json"}  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(EXAMPLE), "--history", "prometheus",
             "--target", "memory", "--no-server", "--db", f"sqlite:///{tmp_path / 's.db'}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not held and time.monotonic() < deadline:  # start-up is waiting on Prometheus
                time.sleep(0.05)
            assert held, "start-up read the history"
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    events = [json.loads(line).get("event") for line in err.splitlines() if line.startswith("{")]
    assert events[-1] == "stopped", events
