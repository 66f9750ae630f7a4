"""A tenant's ``demand.stepSeconds`` cannot make one policy's history cost the whole controller
(security audit of 2026-12-06, finding 3: at 0.001 s one read of the 2-day window was 172.8 M points,
15,710 requests and 3 GB, and the controller (2 GiB) was OOM-killed at every start).

``scaleahead run`` end to end, with policy objects in the kmock Kubernetes emulator and from files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client
from test_policy_resources import GROUP, PLURAL, VERSION, _accepted, _cr
from test_policy_resources import cluster as cluster  # noqa: F401 - the fixture, used by name
from typer.testing import CliRunner

from scaleahead.cli import app
from scaleahead.errors import ConfigError, UserError
from scaleahead.policy import parse_policies
from scaleahead.settings import Settings

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "policy.yaml"


def _run(tmp_path: Path, *source: str) -> object:
    argv = ["run", "--once", "--virtual", "--no-server", "--history", "trace:nasa-10s", "--target", "memory"]
    argv += [*source, "--db", f"sqlite:///{tmp_path / 'r.db'}", "--model", "seasonal_naive"]
    return CliRunner().invoke(app, argv)


def test_a_step_below_one_second_is_not_a_policy() -> None:
    text = EXAMPLE.read_text()
    for step in ("0.001", "0.5"):
        with pytest.raises(ConfigError) as info:
            parse_policies(text.replace("stepSeconds: 10 ", f"stepSeconds: {step} "))
        assert "stepSeconds" in info.value.message and "greater than or equal to 1" in info.value.message
    assert parse_policies(text.replace("stepSeconds: 10 ", "stepSeconds: 1 "))[0].spec.demand.step_seconds == 1
    # The CRD says so too: the API server refuses such an object before scaleahead sees it.
    import yaml

    crd = yaml.safe_load((REPO / "deploy" / "base" / "crd.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    step = spec["properties"]["demand"]["properties"]["stepSeconds"]
    assert step["minimum"] == 1 and not step.get("exclusiveMinimum")


def test_cluster_policies_with_a_tiny_step_are_refused_on_their_own_objects_and_the_others_are_planned(
    cluster, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    em, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    # 1 s is a policy, but its 2-day window is 172,800 points: more than twice a 10 s policy's.
    co.create_namespaced_custom_object(
        GROUP, VERSION, "shop", PLURAL, _cr("tiny", demand={"query": "q", "stepSeconds": 1})
    )
    # The audit's 0.001 s (a CRD from before 2026-12-06 let it in): not a policy at all.
    co.create_namespaced_custom_object(
        GROUP, VERSION, "shop", PLURAL, _cr("micro", demand={"query": "q", "stepSeconds": 0.001})
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: emu, cluster: {{server: '{em.url}'}}}}]\n"
        "users: [{name: me, user: {token: test}}]\n"
        "contexts: [{name: emu, context: {cluster: emu, user: me}}]\ncurrent-context: emu\n"
    )
    monkeypatch.delenv("SCALEAHEAD_LOOP__MAX_HISTORY_POINTS", raising=False)
    out = _run(tmp_path, "--kubeconfig", str(kubeconfig))
    assert out.exit_code == 0, out.output  # type: ignore[attr-defined]
    summary = json.loads(out.stdout[out.stdout.index("{") :])  # type: ignore[attr-defined]
    assert [a["target"] for a in summary["actions"]] == ["Deployment/shop/web"]
    tiny = _accepted(co, "tiny")
    assert tiny["status"] == "False" and tiny["reason"] == "Refused"
    assert "172,800 points" in tiny["message"] and "set demand.stepSeconds to 5 or more" in tiny["message"]
    micro = _accepted(co, "micro")
    assert micro["status"] == "False" and micro["reason"] == "InvalidSpec"
    assert "stepSeconds" in micro["message"] and "greater than or equal to 1" in micro["message"]
    assert _accepted(co, "web")["status"] == "True"


def test_a_policy_file_with_too_many_points_stops_run_naming_it_unless_the_operator_allows_them(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "tiny.yaml"
    policy.write_text(EXAMPLE.read_text().replace("stepSeconds: 10 ", "stepSeconds: 2 "))
    monkeypatch.delenv("SCALEAHEAD_LOOP__MAX_HISTORY_POINTS", raising=False)
    out = _run(tmp_path, "--policies", str(policy))
    exc = out.exception  # type: ignore[attr-defined]
    assert isinstance(exc, UserError), out.output  # type: ignore[attr-defined]  # exit 2 from the console
    assert "default/web" in exc.message and "86,400 points" in exc.message and "34,560" in exc.message
    assert not (tmp_path / "r.db").exists()  # refused before anything was recorded
    # The operator's limit lets 2 s through (then the 10 s trace is what refuses it).
    monkeypatch.setenv("SCALEAHEAD_LOOP__MAX_HISTORY_POINTS", "100000")
    exc = _run(tmp_path, "--policies", str(policy)).exception  # type: ignore[attr-defined]
    assert isinstance(exc, UserError) and "points" not in exc.message and "10 s steps" in exc.message


def test_max_history_points_is_a_setting_of_at_least_one() -> None:
    assert Settings().loop.max_history_points is None
    assert Settings.from_env({"SCALEAHEAD_LOOP__MAX_HISTORY_POINTS": "100000"}).loop.max_history_points == 100000
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"SCALEAHEAD_LOOP__MAX_HISTORY_POINTS": "0"})
    assert "SCALEAHEAD_LOOP__MAX_HISTORY_POINTS" in info.value.message
