"""What one plan reads (findings F5 and F7 of the 2026-12-06 scale audit): each namespace's
ResourceQuotas and LimitRanges once a plan, the room earlier scale-ups of the plan took counted
for the later ones, no read at all for an action of a plan already past maxPlanAge, and no quota
read when reconciling. Counted from the emulated API server's requests."""

from __future__ import annotations

import pytest
from kubeemu import DEPLOYMENTS, LIMITRANGES, QUOTAS, Fault, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")
NOW = 1_000_000.0


@pytest.fixture
def store(tmp_path):  # type: ignore[no-untyped-def]
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


def ref(ns: str, name: str) -> WorkloadRef:
    return WorkloadRef("Deployment", ns, name)


def pol(ns: str, name: str):  # type: ignore[no-untyped-def]
    body = policy(name).model_dump(by_alias=True, exclude_none=True)
    body["spec"]["target"]["namespace"] = ns
    return type(policy()).model_validate(body)


def put(kube, ns: str, name: str, replicas: int = 2, cpu: str = "") -> None:  # type: ignore[no-untyped-def]
    body = deployment(replicas, labels={"app": name})
    if cpu:
        body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    kube.cluster.put(DEPLOYMENTS, ns, name, body)


def pod_quota(used: int, hard: int) -> dict:
    return {"spec": {"hard": {"pods": str(hard)}}, "status": {"hard": {"pods": str(hard)}, "used": {"pods": str(used)}}}


def actuator(kube, pols, store=None, **cfg) -> Actuator:  # type: ignore[no-untyped-def]
    return Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), store, pols, SafetyConfig(**cfg))


def lists(kube, what: str, since: int = 0) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for m, p in kube.cluster.calls()[since:] if m == "GET" and p.endswith("/" + what))


def replicas(kube, ns: str, name: str) -> int:  # type: ignore[no-untyped-def]
    return kube.cluster.get(DEPLOYMENTS, ns, name)["spec"]["replicas"]


def test_a_plan_lists_each_namespaces_quotas_once(kube) -> None:  # type: ignore[no-untyped-def]
    """Six scale-ups in two namespaces: two quota lists (before 2026-12-06: six, one per scale-up)."""
    names = [("a", f"w{i}") for i in range(3)] + [("b", f"w{i}") for i in range(3)]
    for ns, name in names:
        put(kube, ns, name)
    for ns in ("a", "b"):
        kube.cluster.put(QUOTAS, ns, "q", pod_quota(used=6, hard=100))
    pols = [pol(ns, name) for ns, name in names]
    results = actuator(kube, pols).apply_plan(Plan(NOW, tuple(ScaleTo(ref(*k), 2, 4, R) for k in names)), NOW)
    assert [r.outcome for r in results] == ["applied"] * 6, results
    assert lists(kube, "resourcequotas") == 2
    # the next plan lists them again: its room is not the last plan's
    before = len(kube.cluster.calls())
    actuator(kube, pols).apply_plan(Plan(NOW, (ScaleTo(ref("a", "w0"), 4, 5, R),)), NOW)
    assert lists(kube, "resourcequotas", before) == 1


def test_two_scale_ups_in_one_namespace_do_not_both_take_the_same_free_room(kube) -> None:  # type: ignore[no-untyped-def]
    """Four pods free: the first scale-up takes three, the second gets the one left (before
    2026-12-06 both were given the four the quota's ``used`` showed: the second's pods were refused)."""
    put(kube, "a", "x")
    put(kube, "a", "y")
    kube.cluster.put(QUOTAS, "a", "q", pod_quota(used=6, hard=10))
    pols = [pol("a", "x"), pol("a", "y")]
    plan = Plan(NOW, (ScaleTo(ref("a", "x"), 2, 5, R), ScaleTo(ref("a", "y"), 2, 5, R)))
    results = actuator(kube, pols).apply_plan(plan, NOW)
    assert [r.outcome for r in results] == ["applied", "applied"], results
    assert "limited" not in results[0].detail
    assert "pod quota (1 more pods allowed)" in results[1].detail, results[1].detail
    assert (replicas(kube, "a", "x"), replicas(kube, "a", "y")) == (5, 3)
    # a dry run counts the same way
    put(kube, "a", "x")
    put(kube, "a", "y")
    results = actuator(kube, pols).apply_plan(plan, NOW, dry_run=True)
    assert [r.outcome for r in results] == ["dry-run", "dry-run"]
    assert "pod quota (1 more pods allowed)" in results[1].detail, results[1].detail


def test_the_room_an_earlier_scale_up_took_counts_in_a_cpu_quota(kube) -> None:  # type: ignore[no-untyped-def]
    """1500m free, 500m a pod: x takes two pods (1000m), y gets the one pod left."""
    put(kube, "a", "x", cpu="500m")
    put(kube, "a", "y", cpu="500m")
    hard = {"requests.cpu": "4"}
    used = {"requests.cpu": "2500m"}
    kube.cluster.put(QUOTAS, "a", "cpu", {"spec": {"hard": hard}, "status": {"hard": hard, "used": used}})
    pols = [pol("a", "x"), pol("a", "y")]
    plan = Plan(NOW, (ScaleTo(ref("a", "x"), 2, 4, R), ScaleTo(ref("a", "y"), 2, 6, R)))
    results = actuator(kube, pols).apply_plan(plan, NOW)
    assert "ResourceQuota on requests.cpu (1 more pods allowed)" in results[1].detail, results[1].detail
    assert (replicas(kube, "a", "x"), replicas(kube, "a", "y")) == (4, 3)


def test_a_refused_write_gives_its_room_back_to_the_plans_later_scale_ups(kube) -> None:  # type: ignore[no-untyped-def]
    put(kube, "a", "x")
    put(kube, "a", "y")
    kube.cluster.put(QUOTAS, "a", "q", pod_quota(used=6, hard=10))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/x/scale", status=422))
    pols = [pol("a", "x"), pol("a", "y")]
    plan = Plan(NOW, (ScaleTo(ref("a", "x"), 2, 5, R), ScaleTo(ref("a", "y"), 2, 6, R)))
    results = actuator(kube, pols).apply_plan(plan, NOW)
    assert [r.outcome for r in results] == ["failed", "applied"], results  # the API server refused x
    assert (replicas(kube, "a", "x"), replicas(kube, "a", "y")) == (2, 6)


def test_limit_ranges_are_read_once_a_plan_even_past_their_minute(kube) -> None:  # type: ignore[no-untyped-def]
    names = [f"w{i}" for i in range(4)]
    for name in names:
        put(kube, "a", name)
    kube.cluster.put(QUOTAS, "a", "cpu", {"status": {"hard": {"requests.cpu": "40"}, "used": {"requests.cpu": "0"}}})
    item = {"type": "Container", "defaultRequest": {"cpu": "500m"}}
    kube.cluster.put(LIMITRANGES, "a", "defaults", {"spec": {"limits": [item]}})
    act = actuator(kube, [pol("a", n) for n in names])
    act.target.LIMIT_RANGES_TTL_S = 0.0  # type: ignore[attr-defined]  # the minute is over at each read
    results = act.apply_plan(Plan(NOW, tuple(ScaleTo(ref("a", n), 2, 3, R) for n in names)), NOW)
    assert [r.outcome for r in results] == ["applied"] * 4, results
    assert lists(kube, "limitranges") == 1
    assert lists(kube, "resourcequotas") == 1


def test_an_action_of_a_plan_already_past_max_plan_age_costs_no_request(kube, store) -> None:  # type: ignore[no-untyped-def]
    """Before 2026-12-06 each such action still read its object and its namespace's quotas first."""
    names = [f"w{i}" for i in range(3)]
    for name in names:
        put(kube, "a", name)
    kube.cluster.put(QUOTAS, "a", "q", pod_quota(used=0, hard=100))
    pols = [pol("a", n) for n in names]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=2.0)
    act = Actuator(target, store, pols, SafetyConfig(max_plan_age_s=30.0), clock=lambda: NOW + 31.0)
    plan = Plan(NOW, tuple(ScaleTo(ref("a", n), 2, 4, R) for n in names))
    results = act.apply_plan(plan, NOW)
    assert [r.outcome for r in results] == ["skipped"] * 3
    assert {r.detail for r in results} == {"the plan is 31 s old, older than maxPlanAge 30 s; the next plan decides"}
    assert kube.cluster.calls() == []
    assert {a.state for a in store.actions()} == {"skipped"}


def test_reconcile_reads_only_the_objects_not_their_quotas(kube, store) -> None:  # type: ignore[no-untyped-def]
    names = [f"w{i}" for i in range(3)]
    for name in names:
        put(kube, "a", name)  # 2: the scale-ups to 4 never landed
    kube.cluster.put(QUOTAS, "a", "q", pod_quota(used=6, hard=100))
    kube.cluster.put(LIMITRANGES, "a", "defaults", {"spec": {"limits": [{"type": "Container"}]}})
    store.record_plan(Plan(NOW, tuple(ScaleTo(ref("a", n), 2, 4, R) for n in names)), source="actuator")
    act = actuator(kube, [pol("a", n) for n in names], store)
    done = act.reconcile(NOW + 5)
    assert [state for _, state, _ in done] == ["skipped"] * 3
    assert all("not applied before the restart" in why for _, _, why in done), done
    assert lists(kube, "resourcequotas") == 0 and lists(kube, "limitranges") == 0
    assert sorted(p for _, p in kube.cluster.calls()) == [
        f"/apis/apps/v1/namespaces/a/deployments/{n}/scale" for n in names
    ]


def test_a_failed_quota_list_is_listed_again_by_the_plans_next_scale_up_and_warned_once(kube, caplog) -> None:  # type: ignore[no-untyped-def]
    """Found by a review: one 500 on the plan's first quota list was kept for the whole plan, so
    every later scale-up of the namespace went unlimited (12 pods added with 2 free), silently. The
    action whose own list failed is not limited (as before 2026-12-06; its pods are not known to the
    room either, the quota admission refuses what does not fit); the next lists again and takes the
    2 free, and the others none."""
    import logging

    names = [f"w{i}" for i in range(4)]
    for n in names:
        put(kube, "a", n)
    kube.cluster.put(QUOTAS, "a", "q", pod_quota(used=8, hard=10))  # 2 pods free
    kube.cluster.faults.append(Fault("GET", "/resourcequotas", status=500, times=1))
    pols = [pol("a", n) for n in names]
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator"):
        actuator(kube, pols).apply_plan(Plan(NOW, tuple(ScaleTo(ref("a", n), 2, 5, R) for n in names)), NOW)
    added = sum(replicas(kube, "a", n) for n in names) - 2 * len(names)
    assert added == 3 + 2, "the first unlimited, the second the 2 free, the others nothing"
    assert lists(kube, "resourcequotas") == 2, "listed again once, then kept"
    warned = [r for r in caplog.records if getattr(r, "event", "") == "quota_list_failed"]
    assert len(warned) == 1 and "namespace a (HTTP 500)" in warned[0].getMessage()


def test_each_scale_ups_pod_shape_is_worked_out_once_a_plan(kube, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Twelve scale-ups in a namespace with a CPU quota: each subtracts the pods every earlier one took,
    but each pod shape is worked out only once, for the scale-up's own check and the later ones'
    (before 2026-12-06: 12 + 66 shapes, growing with the square of the namespace's scale-ups; then
    two each)."""
    import actuator.kubernetes as kmod

    names = [f"w{i}" for i in range(12)]
    for name in names:
        put(kube, "a", name, cpu="100m")
    hard, used = {"requests.cpu": "100"}, {"requests.cpu": "1"}
    kube.cluster.put(QUOTAS, "a", "cpu", {"spec": {"hard": hard}, "status": {"hard": hard, "used": used}})
    calls = [0]
    real = kmod.pod_shape

    def counted(template):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(template)

    monkeypatch.setattr(kmod, "pod_shape", counted)
    pols = [pol("a", name) for name in names]
    results = actuator(kube, pols).apply_plan(Plan(NOW, tuple(ScaleTo(ref("a", n), 2, 4, R) for n in names)), NOW)
    assert [r.outcome for r in results] == ["applied"] * 12, results
    assert [replicas(kube, "a", n) for n in names] == [4] * 12
    assert calls[0] == len(names), calls[0]


def test_the_room_taken_is_summed_as_entries_come_and_go() -> None:
    """``_Taken``'s running sums equal the sum over its entries less the asking one's, whatever the
    order of takes, retries (a second take of a target) and give-backs, and whether the sums over
    resources were first asked for before or after the entries came."""
    import random

    from actuator.kubernetes import _PodOf, _Taken

    rng = random.Random(7)
    for trial in range(200):
        taken = _Taken()
        if trial % 2:
            taken.sums("", resources=True)  # the resource sums kept from the start
        for _ in range(30):
            target = f"t{rng.randrange(8)}"
            if rng.random() < 0.3:
                taken.pop(target)
            else:
                cpu, mem = rng.choice([0, 100, 250]), rng.choice([0, 64, 128])
                resources = {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}
                template = {"spec": {"containers": [{"name": "c", "resources": resources}]}}
                taken.put(target, _PodOf(lambda t=template: t), rng.randrange(1, 5))
            key = f"t{rng.randrange(9)}"
            others = [(pod, n) for t, (pod, n) in taken.entries.items() if t != key]
            want = {"pods": sum(n for _, n in others)}
            for norm in ("requests.cpu", "requests.memory"):
                want[norm] = sum(n * pod.shape().get(norm, 0) for pod, n in others)
            got = taken.sums(key, resources=True)
            assert {k: got.get(k, 0) for k in want} == want, (trial, key)
            assert taken.sums(key, resources=False) == {"pods": want["pods"]}


def test_the_room_taken_is_not_left_half_summed_when_a_pod_cannot_be_worked_out() -> None:
    """A pod whose shape cannot be worked out raises out of ``_Taken.sums`` and leaves no partial
    sum behind: the next ask sums every entry (an audit found the first entries' sum kept)."""
    from actuator.kubernetes import _PodOf, _Taken

    def template(cpu: str):  # type: ignore[no-untyped-def]
        return {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}

    failing = [True]

    def flaky():  # type: ignore[no-untyped-def]
        if failing[0]:
            raise RuntimeError("cannot read it now")
        return template("300m")

    taken = _Taken()
    taken.put("a", _PodOf(lambda: template("100m")), 2)
    taken.put("b", _PodOf(flaky), 1)
    with pytest.raises(RuntimeError):
        taken.sums("", resources=True)
    failing[0] = False
    assert taken.sums("", resources=True)["requests.cpu"] == 2 * 100 + 300
    assert taken.sums("a", resources=True)["requests.cpu"] == 300
