"""deploy/base/prometheusrule.yaml: the alerts pass promtool's unit tests (tests/deploy/alerts-cases.yaml),
read only metrics the daemon exports, and work on what a real Prometheus scrapes from the daemon's
/metrics endpoint (labels as stored after the scrape, every rule evaluating without error)."""

from __future__ import annotations

import copy
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaleahead.observability import Health, Metrics, serve

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "base" / "prometheusrule.yaml"
CASES = Path(__file__).with_name("alerts-cases.yaml")


def promtool() -> str:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool (Debian's prometheus package) is needed: run `make test`, which installs it.")
    return exe


def rule_groups() -> dict[str, Any]:
    doc = yaml.safe_load(RULES.read_text())
    assert doc["kind"] == "PrometheusRule"
    return dict(doc["spec"])


def alerts(groups: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in groups["groups"] for r in g["rules"]}


def promtool_tests(groups: dict[str, Any], tmp: Path) -> subprocess.CompletedProcess[str]:
    """Write the rules and the cases (each expected alert completed with its rule's description) and run them."""
    rules = alerts(groups)
    cases = yaml.safe_load(CASES.read_text())
    for test in cases["tests"]:
        for check in test["alert_rule_test"]:
            for exp in check["exp_alerts"]:
                description = rules[check["alertname"]]["annotations"]["description"]
                assert "{{" not in description, "descriptions are static; the summary carries the values"
                exp["exp_annotations"] = {"summary": exp.pop("summary"), "description": description}
    (tmp / "rules.yaml").write_text(yaml.safe_dump(groups))
    (tmp / "cases.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], **cases}))
    return subprocess.run(
        [promtool(), "test", "rules", "cases.yaml"], cwd=tmp, capture_output=True, text=True, timeout=120
    )


def test_the_rules_are_valid(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups()))
    res = subprocess.run([promtool(), "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_alerts_pass_their_promtool_unit_tests(tmp_path: Path) -> None:
    res = promtool_tests(rule_groups(), tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    checks = [c for t in yaml.safe_load(CASES.read_text())["tests"] for c in t["alert_rule_test"]]
    firing = {c["alertname"] for c in checks if c["exp_alerts"]}
    quiet = {c["alertname"] for c in checks if not c["exp_alerts"]}
    assert firing == quiet == set(alerts(rule_groups())), "every alert is tested both firing and quiet"


def test_the_unit_tests_catch_an_alert_that_trusts_a_standby_replica(tmp_path: Path) -> None:
    # Without the leader filter, the standby's stale gauges page someone: the cases must fail.
    groups = copy.deepcopy(rule_groups())
    for rule in alerts(groups).values():
        rule["expr"] = rule["expr"].replace(" * on (job, instance) group_left () (scaleahead_leader == 1)", "")
    res = promtool_tests(groups, tmp_path)
    assert res.returncode != 0
    assert "ScaleaheadWorkloadInFallback" in res.stdout + res.stderr


def exported_names() -> set[str]:
    names = set()
    for metric in Metrics().registry.collect():
        names.add(metric.name)
        names |= {s.name for s in metric.samples}
    return names


def test_the_rules_read_only_metrics_and_labels_the_daemon_exports() -> None:
    exported = exported_names()
    # the label names each metric is declared with (most have no sample before a cycle)
    labels = {name for m in vars(Metrics()).values() for name in getattr(m, "_labelnames", ())}
    for name, rule in alerts(rule_groups()).items():
        used = set(re.findall(r"\bscaleahead_[a-z_0-9]+", rule["expr"]))
        assert used, name
        assert used <= exported, f"{name} reads unknown metrics {used - exported}"
        grouped = {x.strip() for by in re.findall(r"by \(([^)]*)\)", rule["expr"]) for x in by.split(",")}
        # job and instance come from the scrape; shard from the ServiceMonitor's relabeling
        assert grouped - {"job", "instance", "shard"} <= labels, f"{name} groups by labels no metric has"
    monitor = (Path(__file__).resolve().parents[2] / "deploy" / "base" / "servicemonitor.yaml").read_text()
    assert "targetLabel: shard" in monitor


# -- a real Prometheus scraping the daemon's endpoint ---------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())["data"]


def test_a_real_prometheus_scrapes_the_endpoint_and_evaluates_every_rule(tmp_path: Path) -> None:
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.fail("Debian's prometheus package is not installed: run `make test`, which installs it.")
    metrics = Metrics()
    for job in ("retrain", "prune"):
        metrics.add_job(job)
    metrics.leader.set(0)  # a standby, and no other replica: ScaleaheadNoLeader goes pending
    metrics.job_ended("retrain", "error", time.time())  # ScaleaheadJobFailing goes pending (for: 5m)
    metrics.job_ended("prune", "ok", time.time())
    endpoint = serve(metrics, Health(60.0, time.time), "127.0.0.1", 0)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups()))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yaml")],
        "scrape_configs": [
            {"job_name": "scaleahead", "static_configs": [{"targets": [f"127.0.0.1:{endpoint.server_address[1]}"]}]}
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                exe,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            states: dict[str, str] = {}
            while time.monotonic() < deadline:
                assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
                try:
                    states = {a["labels"]["alertname"]: a["state"] for a in _get(url + "/api/v1/alerts")["alerts"]}
                except OSError:
                    states = {}
                if "ScaleaheadJobFailing" in states and "ScaleaheadNoLeader" in states:
                    break
                time.sleep(0.5)
            assert states.get("ScaleaheadJobFailing") == "pending", states
            assert states.get("ScaleaheadNoLeader") == "pending", states
            assert "ScaleaheadAbsent" not in states
            # The job's name survives the scrape next to Prometheus's own `job` label.
            series = _get(url + '/api/v1/query?query=scaleahead_job_runs_total{result="error"}')["result"]
            by_job = {s["metric"]["job_name"]: (s["metric"]["job"], s["value"][1]) for s in series}
            assert by_job == {"retrain": ("scaleahead", "1"), "prune": ("scaleahead", "0")}
            rules = [r for g in _get(url + "/api/v1/rules")["groups"] for r in g["rules"]]
            assert len(rules) == len(alerts(rule_groups()))
            assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
            # Every dashboard query parses and runs (the per-workload gauges are filtered to the leader).
            board = json.loads((REPO / "deploy" / "grafana" / "scaleahead-dashboard.json").read_text())
            for panel in board["panels"]:
                for target in panel.get("targets", []):
                    expr = target["expr"].replace("$workload", ".*")
                    got = urllib.request.urlopen(url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
                    assert json.loads(got.read())["status"] == "success", expr
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            endpoint.shutdown()
