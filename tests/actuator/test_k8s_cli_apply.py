"""`scaleahead plan --apply --kubeconfig FILE [--dry-run]` end to end: CLI -> emulated cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kubeemu import DEPLOYMENTS, deployment
from typer.testing import CliRunner

from scaleahead.cli import app
from scaleahead.errors import UserError
from storage import Store

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "policy.yaml"
ENV = {"SCALEAHEAD_ACTUATION__NAMESPACE": "default"}


def kubeconfig(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: emu, cluster: {{server: '{url.rstrip('/')}'}}}}]\n"
        "users: [{name: me, user: {token: test}}]\n"
        "contexts: [{name: emu, context: {cluster: emu, user: me}}]\n"
        "current-context: emu\n"
    )
    return path


def args(tmp_path: Path, kubeconfig_path: Path, *extra: str) -> list[str]:
    return [
        "plan", "--policy", str(EXAMPLE), "--history", "nasa-10s", "--current", "1", "--apply",
        "--kubeconfig", str(kubeconfig_path), "--db", f"sqlite:///{tmp_path / 'j.db'}", "--output", "json", *extra,
    ]  # fmt: skip


def here(*argv: str):
    """The same Typer app in this process (faster than a new process)."""
    return CliRunner().invoke(app, list(argv), env=ENV)


def test_plan_apply_scales_the_deployment_and_journals_the_outcome(kube, tmp_path):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(1))
    out = subprocess.run(  # through the real entry point, in a new process
        [sys.executable, "-m", "scaleahead.cli", *args(tmp_path, kubeconfig(tmp_path, kube.url))],
        capture_output=True, text=True, timeout=120, env={**os.environ, **ENV},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)["results"][0]
    assert res["outcome"] == "applied", res
    replicas = kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"]
    assert 1 < replicas <= 21  # the example policy's maxStepUp is 20
    assert kube.cluster.writes() == [("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale")]
    rows = Store(f"sqlite:///{tmp_path / 'j.db'}").actions()
    assert [(a.target, a.state) for a in rows] == [("Deployment/default/web", "applied")]


def test_plan_apply_dry_run_prints_the_diff_and_writes_nothing(kube, tmp_path):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(1))
    out = here(*args(tmp_path, kubeconfig(tmp_path, kube.url), "--dry-run"))
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["dry_run"] is True
    assert doc["results"][0]["outcome"] == "dry-run"
    assert doc["results"][0]["detail"].startswith("Deployment/default/web spec.replicas: 1 -> ")
    assert kube.cluster.writes() == []
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 1


def test_plan_apply_to_a_missing_deployment_fails_with_the_fix(kube, tmp_path):
    out = here(*args(tmp_path, kubeconfig(tmp_path, kube.url)))
    assert out.exit_code == 1, out.output  # was 0: a script went on as if the plan had been applied
    res = json.loads(out.stdout)["results"][0]
    assert res["outcome"] == "failed"
    assert "Deployment/default/web does not exist (404)" in res["detail"]
    assert "1 failed" in out.stderr and "not everything was applied" in out.stderr


def test_plan_apply_that_cannot_see_the_kill_switch_applies_nothing_and_exits_1(kube, tmp_path):
    from kubeemu import Fault

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(1))
    kube.cluster.faults.append(Fault("GET", "/configmaps/scaleahead-kill-switch", status=500, times=10))
    out = here(*args(tmp_path, kubeconfig(tmp_path, kube.url)))
    assert out.exit_code == 1, out.output
    res = json.loads(out.stdout)["results"][0]
    assert res["outcome"] == "skipped" and "cannot read ConfigMap" in res["detail"]
    assert "the kill switch could not be read" in out.stderr
    assert kube.cluster.writes() == []


def test_plan_apply_with_no_api_server_there_says_so_and_records_nothing(tmp_path):
    """Found by a newcomer audit: each read failed on its own, with the client's exception cut in
    the middle and advice about RBAC and the kill switch, and the plan was recorded as skipped."""
    import socket

    with socket.socket() as s:  # an API server that is not there
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    out = here(*args(tmp_path, kubeconfig(tmp_path, url)))
    assert isinstance(out.exception, UserError)  # main() prints it as one paragraph, exit code 2
    assert f"Cannot reach the Kubernetes API server at {url}: NewConnectionError:" in out.exception.message
    assert "Connection refused" in out.exception.message and "RBAC" not in out.exception.message
    assert not (tmp_path / "j.db").exists()


def test_plan_apply_with_a_bad_kubeconfig_fails_with_a_user_error_naming_the_file(tmp_path):
    bad = tmp_path / "nope.yaml"
    bad.write_text("not: [a kubeconfig")
    out = here(*args(tmp_path, bad))
    assert isinstance(out.exception, UserError)  # main() prints it as one paragraph, exit code 2
    assert "nope.yaml" in out.exception.message and "--kubeconfig" in out.exception.message


def test_a_kubeconfig_environment_variable_naming_no_file_is_named(tmp_path):
    """Found by a newcomer audit: the error said "the default kubeconfig", not which file."""
    missing = tmp_path / "none.yaml"
    argv = ["actuator", "reconcile", "--db", f"sqlite:///{tmp_path / 'j.db'}"]
    out = CliRunner().invoke(app, argv, env={**ENV, "KUBECONFIG": str(missing)})
    assert isinstance(out.exception, UserError)
    assert f"Cannot load Kubernetes credentials from $KUBECONFIG ({missing})" in out.exception.message
    assert not (tmp_path / "j.db").exists()


def test_reconcile_checks_a_floor_mode_action_against_the_hpa_of_its_policy(kube, tmp_path):
    from kubeemu import HPAS

    from actuator.applying import intent_version
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(HPAS, "default", "web-hpa", {"spec": {"minReplicas": 4, "maxReplicas": 10}})  # the floor landed
    policy = tmp_path / "floor.yaml"
    text = EXAMPLE.read_text().replace("mode: direct", "mode: floor").replace("# hpaName: web ", "hpaName: web-hpa ")
    policy.write_text(text)
    db = f"sqlite:///{tmp_path / 'j.db'}"
    store = Store(db)
    ref = WorkloadRef("Deployment", "default", "web")
    store.record_plan(Plan(1.7e9, (ScaleTo(ref, 2, 4, Reason("t", "t", {})),)), source="loop", state="planned")
    # the write-ahead intent the actuator records before its write (the write then landed)
    hpa_key = "HorizontalPodAutoscaler/default/web-hpa"
    store.set_managed_field(hpa_key, "spec.minReplicas", 2, intent_version(4, "1"), 1.7e9)
    store.close()
    k = str(kubeconfig(tmp_path, kube.url))
    unlisted = here("actuator", "reconcile", "--kubeconfig", k, "--db", db)  # the emulator has no policy CRD
    assert isinstance(unlisted.exception, UserError) and "HTTP 404 Not Found" in str(unlisted.exception)
    assert "--policies" in str(unlisted.exception) and [a.state for a in Store(db).actions()] == ["planned"]
    out = here("actuator", "reconcile", "--kubeconfig", k, "--db", db, "--policies", str(policy))
    assert out.exit_code == 0, out.output
    assert "-> applied" in out.output, out.output  # read from the HPA's minReplicas, not the Deployment's 2
    assert [a.state for a in Store(db).actions()] == ["applied"]
    # a bad policy file or kubeconfig creates no database (found in review: it did)
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec: [unclosed")
    fresh = tmp_path / "new.db"
    refused = here("actuator", "reconcile", "--kubeconfig", k, "--db", f"sqlite:///{fresh}", "--policies", str(bad))
    assert isinstance(refused.exception, UserError) and not fresh.exists()
    missing = str(tmp_path / "no-kubeconfig")
    refused = here(
        "actuator", "reconcile", "--kubeconfig", missing, "--db", f"sqlite:///{fresh}", "--policies", str(policy)
    )
    assert isinstance(refused.exception, UserError) and not fresh.exists()


def test_reconcile_leaves_an_unreadable_action_planned_and_exits_1(kube, tmp_path):
    """A 500 on the read closed the row as skipped with exit 0 (found in the audit of 2026-12-05)."""
    from kubeemu import Fault

    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    db = f"sqlite:///{tmp_path / 'j.db'}"
    store = Store(db)
    ref = WorkloadRef("Deployment", "default", "web")
    store.record_plan(Plan(1.7e9, (ScaleTo(ref, 2, 4, Reason("t", "t", {})),)), source="loop", state="planned")
    store.close()
    kube.cluster.faults.append(Fault("GET", "/deployments/web/scale", status=500, times=9))
    k = str(kubeconfig(tmp_path, kube.url))
    out = here("actuator", "reconcile", "--kubeconfig", k, "--db", db, "--policies", str(EXAMPLE))
    assert out.exit_code == 1, out.output
    assert "action 1 stays planned: unresolved: cannot read the object" in " ".join(out.output.split())
    assert "reconcile` again when the API server answers" in " ".join(out.output.split())
    assert [a.state for a in Store(db).actions()] == ["planned"]
    kube.cluster.faults.clear()
    out = here("actuator", "reconcile", "--kubeconfig", k, "--db", db, "--policies", str(EXAMPLE))
    assert out.exit_code == 0, out.output
    assert [a.state for a in Store(db).actions()] == ["skipped"]  # read now: not applied before the restart


def test_plan_apply_exits_1_when_an_earlier_action_stays_unresolved(kube, tmp_path):
    """The plan is applied, but an action a crash left planned could not be read: before 2026-12-05
    evening the command exited 0 and a script took the journal for settled."""
    from kubeemu import Fault

    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(1))
    store = Store(f"sqlite:///{tmp_path / 'j.db'}")
    ref = WorkloadRef("Deployment", "default", "web")
    store.record_plan(Plan(1.7e9, (ScaleTo(ref, 1, 4, Reason("t", "t", {})),)), source="loop", state="planned")
    store.close()
    kube.cluster.faults.append(Fault("GET", "/deployments/web/scale", status=500, times=1))  # the reconcile's read
    out = here(*args(tmp_path, kubeconfig(tmp_path, kube.url)))
    assert out.exit_code == 1, out.output
    said = " ".join(out.output.split())
    assert "journal: action 1 stays planned: unresolved" in said
    assert "the plan was handled (outcomes above), but 1 earlier action(s) stay planned (ids 1)" in said
    doc = json.loads(out.stdout)  # the journal's lines go to stderr with --output json
    assert doc["unresolved_actions"] == [1]
    assert [r["outcome"] for r in doc["results"]] == ["applied"]
    states = {a.id: a.state for a in Store(f"sqlite:///{tmp_path / 'j.db'}").actions()}
    assert states == {1: "planned", 2: "applied"}


def test_plan_apply_refuses_a_policy_that_would_fight_an_hpa_and_writes_nothing(kube, tmp_path):
    """Until 2026-12-06 `plan --apply` wrote spec.replicas under an HPA (which undid it within
    seconds); `run` already refused such a policy."""
    from kubeemu import HPAS

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(1))
    hpa = {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 9}}
    kube.cluster.put(HPAS, "default", "web-hpa", hpa)
    for extra in ((), ("--dry-run",)):
        out = here(*args(tmp_path, kubeconfig(tmp_path, kube.url), *extra))
        assert isinstance(out.exception, UserError), out.output  # the entry point's exit 2
        said = f"{out.exception.what} {out.exception.fix}"
        assert "HorizontalPodAutoscaler default/web-hpa also scales Deployment/default/web" in said, said
        assert "Nothing was applied" in said and "spec.target.mode: floor" in said, said
    assert kube.cluster.writes() == []
    assert not (tmp_path / "j.db").exists()
