"""Every target kind through the official client and the API emulator, from a review of the
actuator against its issue (2026-12-07): human edits respected, lost answers that landed, no-op
plans without writes, crash reconciliation, the field manager on every write; and what the review
found wrong: a bare pod lost when an eviction's answer and the read after it were both lost, the
API server's message dropped from 400/422/5xx answers, a Lease failure blamed on another replica,
and `plan --apply` reconciling rows of workloads it has no policy for."""

from __future__ import annotations

from typing import Any

import pytest
from kubeemu import DEPLOYMENTS, HPAS, KSVC, PODS, STATEFULSETS, Fault, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import MIN_SCALE, KubernetesTarget
from actuator.leader import LeaderElector
from actuator.safety import SafetyConfig
from scaleahead.types import Action, MovePod, Plan, Reason, ScaleTo, SetWarmPool, WorkloadRef
from storage import Store

R = Reason("test", "because")
NOW = 1_000_000.0
HEAD = WorkloadRef("Headroom", "default", "headroom")
FN = WorkloadRef("KnativeService", "default", "fn")
WEB = WorkloadRef("Deployment", "default", "web")
DB = WorkloadRef("StatefulSet", "default", "db")
EMPTY_KSVC = {"spec": {"template": {"metadata": {"annotations": {}}}}}
HPA = {"spec": {"minReplicas": 2, "maxReplicas": 10}}


@pytest.fixture
def store(tmp_path):  # type: ignore[no-untyped-def]
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


def make(kube: Any, store: Store, policies: list[Any], timeout_s: float = 2.0, **cfg: Any) -> Actuator:
    return Actuator(KubernetesTarget(kube.api_client(), policies, timeout_s=timeout_s), store, policies,
                    SafetyConfig(**cfg))  # fmt: skip


def writes(kube: Any) -> list[tuple[str, str, str | None]]:
    return [
        (str(r.method.value), r.url.path, dict(r.url.query).get("fieldManager"))
        for r in list(kube.cluster)
        if str(r.method.value) not in ("GET", "HEAD")
    ]


def _kind(kube: Any, kind: str) -> tuple[list[Any], Action]:
    """The objects, policies and a first action for one target kind."""
    if kind == "floor":
        kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
        kube.cluster.put(HPAS, "default", "web-hpa", HPA)
        return [policy(mode="floor", hpa="web-hpa")], ScaleTo(WEB, 2, 4, R)
    if kind == "knative":
        kube.cluster.put(KSVC, "default", "fn", EMPTY_KSVC)
        return [policy("fn", kind="KnativeService")], SetWarmPool(FN, 0, 2, 600.0, R)
    if kind == "statefulset":
        kube.cluster.put(STATEFULSETS, "default", "db", deployment(3) | {"kind": "StatefulSet"})
        return [policy("db", kind="StatefulSet")], ScaleTo(DB, 3, 4, R)
    return [], ScaleTo(HEAD, 0, 3, R)


def _next(action: Action, to: int) -> Action:
    if isinstance(action, SetWarmPool):
        return SetWarmPool(action.workload, action.to_instances, to, 600.0, R)
    assert isinstance(action, ScaleTo)
    return ScaleTo(action.workload, action.to_replicas, to, R)


@pytest.mark.parametrize(
    ("kind", "edit"),
    [
        ("headroom", (DEPLOYMENTS, "headroom", {"spec": {"replicas": 1}})),
        ("floor", (HPAS, "web-hpa", {"spec": {"minReplicas": 7}})),
        ("knative", (KSVC, "fn", {"spec": {"template": {"metadata": {"annotations": {MIN_SCALE: "4"}}}}})),
        ("statefulset", (STATEFULSETS, "db", {"spec": {"replicas": 1}})),
    ],
)
def test_a_human_edit_is_respected_on_every_kind(kube: Any, store: Store, kind: str, edit: tuple) -> None:
    pols, first = _kind(kube, kind)
    act = make(kube, store, pols, human_edit_hold_s=600)
    assert act.apply_plan(Plan(NOW, (first,)), NOW)[0].outcome == "applied"
    kube.cluster.edit(edit[0], "default", edit[1], edit[2])
    res = act.apply_plan(Plan(NOW + 10, (_next(first, 5),)), NOW + 10)[0]
    assert res.outcome == "skipped" and "human edit" in res.detail, res


def test_every_write_carries_the_field_manager(kube: Any, store: Store) -> None:
    """Until 2026-12-07 the headroom placeholder's create and patch carried the client's default
    manager, so the co-writer check could not tell them from someone else's writes."""
    pols = [_kind(kube, k)[0][0] for k in ("floor", "knative", "statefulset")]
    act = make(kube, store, pols)
    plan = Plan(NOW, (ScaleTo(WEB, 2, 4, R), SetWarmPool(FN, 0, 2, 600.0, R), ScaleTo(DB, 3, 4, R),
                      ScaleTo(HEAD, 0, 2, R)))  # fmt: skip
    assert [r.outcome for r in act.apply_plan(plan, NOW)] == ["applied"] * 4
    act.apply_plan(Plan(NOW + 5, (ScaleTo(HEAD, 2, 3, R),)), NOW + 5)  # the placeholder's patch
    made = writes(kube)
    assert ("POST", "/apis/apps/v1/namespaces/default/deployments", "scaleahead") in made
    assert ("PATCH", "/apis/apps/v1/namespaces/default/deployments/headroom", "scaleahead") in made
    assert all(manager == "scaleahead" for _, _, manager in made), made


@pytest.mark.parametrize("kind", ["floor", "knative", "statefulset", "headroom-create", "headroom-patch"])
def test_a_write_whose_answer_is_lost_but_landed_is_applied_on_every_kind(kube: Any, store: Store, kind: str) -> None:
    pols, action = _kind(kube, kind.partition("-")[0])
    path, method = {
        "floor": ("/horizontalpodautoscalers/web-hpa", "PATCH"),
        "knative": ("/services/fn", "PATCH"),
        "statefulset": ("/statefulsets/db/scale", "PATCH"),
        "headroom-create": ("/deployments", "POST"),
        "headroom-patch": ("/deployments/headroom", "PATCH"),
    }[kind]
    if kind == "headroom-patch":
        make(kube, store, []).apply_plan(Plan(NOW - 100, (ScaleTo(HEAD, 0, 1, R),)), NOW - 100)
        action = ScaleTo(HEAD, 1, 3, R)
    # 2 s for the reads that must answer (0.3 s before); the lost answer comes 3 s after the timeout
    # (the emulator runs in this process: only a stall that long could bring it within the timeout)
    act = make(kube, store, pols, timeout_s=2.0)
    kube.cluster.faults.append(Fault(method, path, delay_s=5.0, after=True))
    res = act.apply_plan(Plan(NOW, (action,)), NOW)[0]
    assert res.outcome == "applied" and "answer was lost" in res.detail, res
    nxt = act.apply_plan(Plan(NOW + 10, (_next(action, 5),)), NOW + 10)[0]  # not taken for a human edit
    assert nxt.outcome == "applied", nxt


def test_a_plan_already_live_makes_no_write_on_every_kind(kube: Any, store: Store) -> None:
    kube.cluster.put(HPAS, "default", "web-hpa", {"spec": {"minReplicas": 4, "maxReplicas": 10}})
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": {"metadata": {"annotations": {MIN_SCALE: "2"}}}}})
    kube.cluster.put(STATEFULSETS, "default", "db", deployment(4) | {"kind": "StatefulSet"})
    pols = [policy(mode="floor", hpa="web-hpa"), policy("fn", kind="KnativeService"), policy("db", kind="StatefulSet")]
    act = make(kube, store, pols)
    act.apply_plan(Plan(NOW - 50, (ScaleTo(HEAD, 0, 3, R),)), NOW - 50)
    before = len(kube.cluster.writes())
    none = WorkloadRef("Headroom", "default", "none")  # no placeholder: scaling it to 0 writes nothing
    plan = Plan(NOW, (ScaleTo(WEB, 2, 4, R), SetWarmPool(FN, 0, 2, 600.0, R), ScaleTo(DB, 3, 4, R),
                      ScaleTo(HEAD, 1, 3, R), ScaleTo(none, 2, 0, R)))  # fmt: skip
    assert [r.outcome for r in act.apply_plan(plan, NOW)] == ["skipped"] * 5
    assert kube.cluster.writes()[before:] == []


@pytest.mark.parametrize("kind", ["floor", "knative", "headroom"])
def test_a_crash_after_the_write_is_reconciled_applied_on_every_kind(kube: Any, store: Store, kind: str) -> None:
    pols, action = _kind(kube, kind)
    (aid,) = store.record_plan(Plan(NOW, (action,)), source="loop", state="planned")[1]
    assert make(kube, store, pols)._apply_one(action, NOW, NOW, False).outcome == "applied"
    done = make(kube, store, pols).reconcile(NOW + 60)  # the next start, the same policies
    assert [(d[0], d[1]) for d in done] == [(aid, "applied")], done


def test_plan_apply_reconciles_only_the_rows_of_its_own_policies(kube: Any, store: Store) -> None:
    """A row the daemon left for a workload in mode floor: `plan --apply` for another workload has
    no policy for it and read it from the Deployment instead of its HPA, closing a landed write as
    "not applied before the restart" (a review of 2026-12-07). It is left for the daemon or
    `scaleahead actuator reconcile`, which read the cluster's policies."""
    from scaleahead.commands.actuator import apply_once

    pols, action = _kind(kube, "floor")
    (aid,) = store.record_plan(Plan(NOW, (action,)), source="loop", state="planned")[1]
    assert make(kube, store, pols)._apply_one(action, NOW, NOW, False).outcome == "applied"
    kube.cluster.put(DEPLOYMENTS, "default", "other", deployment(2))
    other = policy("other")
    results = apply_once(
        Plan(NOW, (ScaleTo(other.workload, 2, 3, R),)), [other], store, None, False, True, api=kube.api_client()
    )
    assert [r.outcome for r in results] == ["applied"]
    (row,) = [r for r in store.actions() if r.id == aid]
    assert row.state == "planned"
    assert [(d[0], d[1]) for d in make(kube, store, pols).reconcile(NOW + 60)] == [(aid, "applied")]


def _bare_pod(node: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "web"}, "uid": "uid-1"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}  # fmt: skip


def test_a_bare_pod_is_not_lost_when_its_evictions_answer_and_the_read_after_are_lost(kube: Any, store: Store) -> None:
    """The eviction lands but its answer is lost, and so is the read after it: until 2026-12-07 the
    unknown outcome counted as "not evicted" and the copy was deleted, so the pod ran nowhere."""
    kube.cluster.put(PODS, "default", "p1", _bare_pod("n1"))
    # timeouts of 2 s for the reads that must answer, late answers 3 s past them (were 0.3 s and 0.8 s)
    act = make(kube, store, [], timeout_s=2.0)
    kube.cluster.faults.append(Fault("POST", "/pods/p1/eviction", delay_s=5.0, after=True))
    kube.cluster.faults.append(Fault("GET", "/namespaces/default/pods/p1", delay_s=5.0, skip=2, at_end=True))
    (res,) = act.apply_plan(Plan(NOW, (MovePod("default", "p1", "n1", "n2", R, pod_uid="uid-1"),)), NOW)
    assert kube.cluster.get(PODS, "default", "p1") is None  # evicted
    assert kube.cluster.get(PODS, "default", "p1-moved") is not None  # the copy is kept
    assert res.outcome == "failed" and "its copy default/p1-moved on n2 is kept" in res.detail, res


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (422, 'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or '
              "equal to 0"),
        (400, 'admission webhook "validation.webhook.serving.knative.dev" denied the request: min-scale=5 is greater '
              "than max-scale=3"),
        (500, "etcdserver: request timed out"),
    ],
)  # fmt: skip
def test_the_api_servers_message_is_kept_in_the_outcome(kube: Any, store: Store, status: int, said: str) -> None:
    """Until 2026-12-07 only the status line was kept ("(422): Unprocessable Entity"), which named
    neither the field nor the fix."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", status=status, message=said))
    (res,) = make(kube, store, [policy()]).apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 3, R),)), NOW)
    assert res.outcome == "failed" and f"'{said}'" in res.detail, res.detail
    assert f"({status} " in res.detail or f"error {status} " in res.detail


def test_a_lease_the_api_server_fails_to_renew_is_not_blamed_on_another_replica(kube: Any, store: Store) -> None:
    for n in ("a", "b"):
        kube.cluster.put(DEPLOYMENTS, "default", n, deployment(2))
    pols = [policy("a"), policy("b")]
    t = [0.0]
    elector = LeaderElector(kube.api_client(), "default", "me", "lease", 15, 10, monotonic=lambda: t[0])
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=2.0)
    act = Actuator(target, store, pols, SafetyConfig(), is_leader=lambda _n: elector.holds(NOW, 10),
                   leader_error=lambda: elector.last_error)  # fmt: skip
    real_write = target.write

    def slow_write(action: Any, value: int, live: Any) -> Any:
        out = real_write(action, value, live)
        t[0] += 6  # the write took long: less than a request timeout of the Lease is left
        kube.cluster.faults.append(Fault("PATCH", "/leases/lease", status=500))
        return out

    target.write = slow_write  # type: ignore[method-assign]
    a, b = (ScaleTo(WorkloadRef("Deployment", "default", n), 2, 3, R) for n in ("a", "b"))
    res = act.apply_plan(Plan(NOW, (a, b)), NOW)
    assert [r.outcome for r in res] == ["applied", "skipped"]
    assert "another scaleahead replica" not in res[1].detail and "500" in res[1].detail, res[1].detail


@pytest.mark.parametrize(
    ("obj", "where"),
    [
        ({"spec": ["not", "a", "mapping"]}, "spec of type list"),
        ({"spec": {"template": {"metadata": "oops"}}}, "spec.template.metadata of type str"),
    ],
)
def test_a_knative_service_of_an_unexpected_shape_is_skipped_naming_the_field(
    kube: Any, store: Store, obj: dict[str, Any], where: str
) -> None:
    """Until 2026-12-07 it failed every cycle as "unexpected AttributeError"."""
    kube.cluster.put(KSVC, "default", "fn", obj)
    (res,) = make(kube, store, [policy("fn", kind="KnativeService")]).apply_plan(
        Plan(NOW, (SetWarmPool(FN, 0, 3, 600.0, R),)), NOW
    )
    assert res.outcome == "skipped" and f"KnativeService/default/fn has {where}" in res.detail, res.detail
