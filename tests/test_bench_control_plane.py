"""`scaleahead bench control-plane` through the real console entry point, on a tiny cluster."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scaleahead.bench.control_plane import SECTIONS, request_label

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
N = 20


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "scaleahead.cli", "bench", "control-plane", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a pid reused by another process is not our emulator
    cmdline = Path(f"/proc/{pid}/cmdline")
    return not cmdline.exists() or b"scaleahead.bench.kubeemu" not in cmdline.read_bytes()


def test_a_tiny_run_measures_every_section_and_stops_the_emulator(tmp_path: Path) -> None:
    out_file = tmp_path / "cp.json"
    out = cli("--sizes", str(N), "--repeat", "2", "--namespaces", "3", "--api-latency-ms", "2", "--json", str(out_file))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    doc = json.loads(out_file.read_text())
    assert doc["params"]["sizes"] == [N] and doc["params"]["repeat"] == 2
    assert doc["params"]["database"] == "sqlite" and "stores: sqlite" in out.stdout
    # the setting's default: up to 4 requests in flight (3 namespaces: 3 at most); 2 ms a request
    assert doc["params"]["concurrent_writes"] == 4 and doc["params"]["api_latency_s"] == 0.002
    cap = doc["params"]["status_max_writes"]
    size = doc["sizes"][str(N)]
    for name in SECTIONS:
        if name == "outcomes":
            continue  # a section of parts, below
        section = size[name]
        for key in ("median_cpu_s", "median_wall_s", "requests", "by_request", "peak_rss_mb", "runs"):
            assert key in section, (name, key)
        assert section["requests"] == sum(section["by_request"].values()), name
        assert len(section["runs"]) == (1 if name == "status_first" else 2), name
        assert section["median_cpu_s"] >= 0 and section["peak_rss_mb"] > 0
        assert name in out.stdout  # the human table has a row per section
    # the policies: one list of them and one of the HPAs; a reload with nothing changed says so
    assert size["policy_load"]["by_request"] == {
        "GET horizontalpodautoscalers (list)": 1,
        "GET predictivescalingpolicies (list)": 1,
    }
    assert size["policy_load"]["accepted"] == N and size["policy_load"]["rejected"] == 0
    assert size["policy_reload_unchanged"] == size["policy_reload_unchanged"] | {"changed": False, "requests": 0}
    # status: every object new, then (after the rest was written) nothing to write, then every one
    # changed; never more PATCHes than the cap
    first = size["status_first"]
    assert first["patches"] == min(N, cap) <= cap and first["patches"] + first["deferred"] == N
    assert size["status_steady"]["patches"] == 0 and size["status_steady"]["requests"] == 0
    changed = size["status_all_changed"]
    assert changed["patches"] == min(N, cap) <= cap
    assert changed["by_request"] == {"PATCH predictivescalingpolicies/status": changed["patches"]}
    assert changed["patches"] + changed["deferred"] == N
    # read_state: one GET per Deployment, one pod and quota list per namespace
    read = size["read_state"]
    assert read["workloads_read"] == N
    # 6-7 Deployments in each of 3 namespaces: more than KubernetesTarget.LIST_ABOVE, so one list each
    assert "GET deployments" not in read["by_request"] and read["by_request"]["GET deployments (list)"] == 3
    assert read["by_request"]["GET pods (list)"] == 3 and read["by_request"]["GET resourcequotas (list)"] == 3
    # apply_plan: every action applied or skipped; one PATCH per applied one; quotas once per namespace
    apply = size["apply_plan"]
    assert apply["actions"] == N and apply["applied"] + apply["skipped"] + apply["failed"] == N
    assert apply["applied"] + apply["skipped"] == N  # nothing fails against the emulator
    assert apply["by_request"].get("PATCH deployments/scale", 0) == apply["applied"]
    assert apply["by_request"]["GET resourcequotas (list)"] <= 3
    assert sum(apply["skipped_by_reason"].values()) == apply["skipped"]
    # SQLite: one journal transaction per write (its intent), and the plan's last outcomes at its end
    assert apply["journal_transactions"] == apply["applied"] + 1
    for run in apply["runs"]:
        assert run["applied"] + run["skipped"] == N
        assert run["by_request"].get("PATCH deployments/scale", 0) == run["applied"]
    # the journal alone: no request at all
    journal = size["journal"]
    assert journal["requests"] == 0 and journal["applied"] == N
    assert journal["median_cpu_ms_per_action"] > 0
    # the measured outcomes: every service scored once a cycle, one row each per bucket, an hour
    # of them summed to one per workload; no request to the API server
    outcomes = size["outcomes"]
    assert set(outcomes) == {"step", "write", "window"}
    assert outcomes["step"]["scored"] == N and outcomes["write"]["rows"] == N
    assert outcomes["window"]["workloads"] == N
    assert all(part["requests"] == 0 and len(part["runs"]) == 2 for part in outcomes.values())
    assert "outcomes.step" in out.stdout and "outcomes.window" in out.stdout
    # reconcile: every planned row read once, no write to a Deployment
    rec = size["reconcile"]
    assert rec["rows"] == N and sum(rec["states"].values()) == N
    assert rec["by_request"]["GET deployments/scale"] == N
    assert not any(k.startswith("PATCH deployments") for k in rec["by_request"])
    # the emulator ran in its own process and is gone
    assert len(doc["emulator_pids"]) == 1 and doc["emulator_pids"][0] != os.getpid()
    assert gone(doc["emulator_pids"][0])


def test_without_kmock_it_says_what_to_install_and_exits_2(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['kmock'] = None; "  # import kmock now raises ImportError
        "sys.argv = ['scaleahead', 'bench', 'control-plane', '--sizes', '5']; "
        "from scaleahead.cli import main; main()"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120, env=ENV, cwd=tmp_path
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert "kmock" in out.stderr and "pip install -e '.[dev]'" in out.stderr
    assert "size" not in out.stdout  # stopped before the table


def test_help_names_the_dev_extra() -> None:
    # rich markup took "[dev]" for a style tag: until 2026-12-06 --help said "pip install -e '.'"
    out = subprocess.run(
        [sys.executable, "-P", "-m", "scaleahead.cli", "bench", "control-plane", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**ENV, "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stderr
    assert "pip install -e '.[dev]'" in out.stdout, out.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--sizes", "0"], "--sizes '0' needs counts of at least 1"),
        (["--sizes", "ten"], "is not a comma-separated list of counts"),
        (["--repeat", "0"], "--repeat 0 is not a count of 1 or more"),
        (["--max-plan-age-s", "-1"], "--max-plan-age-s -1 is not a finite number above 0"),
        (["--concurrent-writes", "0"], "--concurrent-writes 0 is not a count of 1 or more"),
        (["--concurrent-writes", "33"], "--concurrent-writes 33 is above 32"),
        (["--api-latency-ms", "-1"], "--api-latency-ms -1.0 is not a latency between 0 and 10,000 ms"),
        (["--api-latency-ms", "nan"], "--api-latency-ms nan is not a latency"),
        (["--db-url", "sqlite:///cp.db"], "--db-url 'sqlite:///cp.db' is not a PostgreSQL URL"),
        (["--db-url", "not a url"], "--db-url 'not a url' is not a database URL"),
        (
            ["--db-url", "postgresql+psycopg://u:secret-pw@127.0.0.1:1/db?options=-cfoo%3Dbar"],
            "sets the connect option 'options'",
        ),
        (["--db-latency-ms", "1"], "--db-latency-ms needs --db-url"),
        (["--db-latency-ms", "-1"], "--db-latency-ms -1.0 is not a latency between 0 and 1,000 ms"),
        (
            ["--db-url", "postgresql+psycopg://u:secret-pw@/db?host=/run/postgresql", "--db-latency-ms", "1"],
            "--db-latency-ms needs a server reached over TCP",
        ),
        # an unreachable server: said before any emulator starts, the password not shown
        (["--db-url", "postgresql+psycopg://u:secret-pw@127.0.0.1:1/db"], "Cannot reach the database"),
    ],
)
def test_bad_options_are_refused_before_any_work(args: list[str], says: str) -> None:
    out = cli(*args, timeout=60)
    assert out.returncode == 2, out.stderr
    assert says in " ".join(out.stderr.split()) and "Traceback" not in out.stderr
    assert "secret-pw" not in out.stderr and "policy_load" not in out.stdout


def _bench_schemas(admin: str) -> list[str]:
    import psycopg

    with psycopg.connect(admin) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'scaleahead_bench_%'").fetchall()
    return [r[0] for r in rows]


def test_the_stores_can_be_postgresql_schemas_dropped_at_the_end(postgres_url: str, tmp_path: Path) -> None:
    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    out_file = tmp_path / "cp.json"
    out = cli("--sizes", str(N), "--namespaces", "3", "--db-url", postgres_url, "--json", str(out_file))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out_file.read_text())
    assert doc["params"]["database"].startswith("postgresql 15")
    assert "stores: postgresql 15" in out.stdout
    size = doc["sizes"][str(N)]
    # the same work as on SQLite: every action journaled and applied, every planned row reconciled
    assert size["apply_plan"]["applied"] + size["apply_plan"]["skipped"] == N
    assert size["journal"]["applied"] == N and size["outcomes"]["window"]["workloads"] == N
    # group commits on PostgreSQL: never more transactions than writes, and the plan's end
    assert 1 <= size["apply_plan"]["journal_transactions"] <= size["apply_plan"]["applied"] + 1
    assert size["reconcile"]["rows"] == N
    # and it was PostgreSQL that held them: nothing of the bench is left there
    assert _bench_schemas(admin) == []


def test_a_user_who_may_not_create_schemas_is_told_so(postgres_url: str) -> None:
    import psycopg

    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS cp_reader")
        conn.execute("CREATE ROLE cp_reader LOGIN")
    try:
        url = postgres_url.replace("postgresql+psycopg://postgres@", "postgresql+psycopg://cp_reader@")
        out = cli("--sizes", "3", "--namespaces", "1", "--db-url", url, timeout=120)
        said = " ".join(out.stderr.split())
        assert out.returncode == 2, out.stderr
        assert "Cannot create the schema scaleahead_bench_" in said and "may create schemas" in said
        assert "Traceback" not in out.stderr and _bench_schemas(admin) == []
        assert "policy_load" not in out.stdout  # refused before any work
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP ROLE IF EXISTS cp_reader")


@pytest.mark.parametrize(
    ("method", "url", "label"),
    [
        ("GET", "http://127.0.0.1:1/apis/apps/v1/namespaces/ns0/deployments/w0/scale", "GET deployments/scale"),
        ("GET", "http://127.0.0.1:1/apis/apps/v1/namespaces/ns0/deployments/w0", "GET deployments"),
        ("GET", "http://127.0.0.1:1/api/v1/namespaces/ns0/resourcequotas?limit=5", "GET resourcequotas (list)"),
        (
            "GET",
            "http://127.0.0.1:1/apis/scaleahead.io/v1alpha1/predictivescalingpolicies",
            "GET predictivescalingpolicies (list)",
        ),
        (
            "PATCH",
            "http://127.0.0.1:1/apis/scaleahead.io/v1alpha1/namespaces/ns1/predictivescalingpolicies/p1/status",
            "PATCH predictivescalingpolicies/status",
        ),
    ],
)
def test_requests_are_counted_by_method_and_resource(method: str, url: str, label: str) -> None:
    assert request_label(method, url) == label


def test_the_emulator_process_is_stopped_when_the_work_fails() -> None:
    from scaleahead.bench.control_plane import emulator

    seen: list[int] = []

    def work() -> None:
        with emulator(3, 2) as (url, pid):
            seen.append(pid)
            assert url.startswith("http://") and not gone(pid)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        work()
    assert seen and seen[0] != os.getpid() and gone(seen[0])


def test_one_size_twice_and_a_password_with_a_question_mark(postgres_url: str) -> None:
    """Each store its own schema when a size is given twice (one name each time: the second was
    refused as existing), and the schema is set on the URL as a URL's query (a '?' in the password
    ended up in the database's name when it was appended as text). Trust authentication: the
    password is not checked, only carried."""
    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    url = postgres_url.replace("postgresql+psycopg://postgres@", "postgresql+psycopg://postgres:pa?ss@")
    out = cli("--sizes", "3,3", "--namespaces", "1", "--db-url", url, timeout=200)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("reconcile") == 2 and "stores: postgresql" in out.stdout
    assert "pa?ss" not in out.stdout + out.stderr and _bench_schemas(admin) == []


def test_a_database_on_another_machine_through_the_delay_proxy(postgres_url: str, tmp_path: Path) -> None:
    """--db-latency-ms: the stores reach PostgreSQL through a proxy adding the round trip, which is
    measured and reported; the proxy is gone afterwards and the schemas are dropped."""
    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    out_file = tmp_path / "cp.json"
    args = ("--sizes", "3", "--namespaces", "1", "--db-url", postgres_url, "--db-latency-ms", "20")
    out = cli(*args, "--json", str(out_file), timeout=200)
    assert out.returncode == 0, out.stderr
    params = json.loads(out_file.read_text())["params"]
    assert params["db_latency_ms"] == 20.0
    trips = params["db_round_trip_ms"]
    assert trips["stores"] >= 20.0 > trips["direct"]  # the added 20 ms, and not on the direct path
    assert "through a proxy adding 20 ms" in out.stdout
    doc = json.loads(out_file.read_text())["sizes"]["3"]
    assert doc["journal"]["applied"] == 3 and doc["reconcile"]["rows"] == 3
    assert _bench_schemas(admin) == []
    assert not any(b"scaleahead.bench.netdelay" in c for c in _cmdlines())


def _cmdlines() -> list[bytes]:
    """Every running process's command line (one that ends meanwhile left out)."""
    out = []
    for p in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            out.append(p.read_bytes())
    return out
