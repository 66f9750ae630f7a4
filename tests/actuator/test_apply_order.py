"""The order a plan is applied in: scale-ups first (higher priority first), scale-downs after, pod
moves last, so a plan that outlasts ``max_plan_age_s`` skips what only saves cost (2026-12-06;
before, the plan's tail in policy order was skipped, scale-ups included)."""

from __future__ import annotations

from dataclasses import replace

from kubeemu import policy

from actuator.applying import Actuator
from actuator.base import LiveObject
from actuator.safety import SafetyConfig
from scaleahead.types import MovePod, Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

R = Reason("t", "test")
NOW = 1_000_000.0


class Cluster:
    """Deployments and one pod; every write takes ``write_s`` of the actuator's clock."""

    def __init__(self, replicas: dict[str, int], write_s: float = 0.0) -> None:
        self.replicas = dict(replicas)
        self.writes: list[str] = []
        self.now = NOW
        self.write_s = write_s

    def live(self, action, quota_room=True):  # type: ignore[no-untyped-def]
        if isinstance(action, MovePod):
            facts = {"on_from_node": 1, "pdb_disruptions_allowed": 5}
            return LiveObject(action.target, "spec.nodeName", 1, "1", facts, owner=("ReplicaSet", "web-abc"))
        return LiveObject(action.target, "spec.replicas", self.replicas[action.target], "1", {}, uid=action.target)

    def write(self, action, value, live):  # type: ignore[no-untyped-def]
        self.now += self.write_s
        self.writes.append(action.target)
        if isinstance(action, MovePod):
            return live
        self.replicas[action.target] = value
        return replace(live, value=value, resource_version="2")


def scale(name: str, before: int, after: int) -> ScaleTo:
    return ScaleTo(WorkloadRef("Deployment", "default", name), before, after, R)


def prioritized(name: str, priority: int):  # type: ignore[no-untyped-def]
    p = policy(name)
    return p.model_copy(update={"spec": p.spec.model_copy(update={"priority": priority})})


def test_scale_ups_go_first_by_priority_then_scale_downs_then_moves_and_results_keep_the_plans_order(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    names = ["down", "up-low", "up-high", "same-a", "up-low-2"]
    cluster = Cluster({f"Deployment/default/{n}": 4 for n in names})
    pols = [policy("down"), prioritized("up-low", 0), prioritized("up-high", 5), policy("same-a"), policy("up-low-2")]
    store = Store(f"sqlite:///{tmp_path / 'j.db'}")
    plan = Plan(
        NOW,
        (
            MovePod("default", "web-abc-1", "n1", "n2", R),
            scale("down", 4, 2),
            scale("up-low", 4, 6),
            scale("same-a", 4, 4),  # no change: no call
            scale("up-high", 4, 5),
            scale("up-low-2", 4, 8),
        ),
    )
    results = Actuator(cluster, store, pols, SafetyConfig()).apply_plan(plan, NOW)  # type: ignore[arg-type]
    assert cluster.writes == [
        "Deployment/default/up-high",
        "Deployment/default/up-low",
        "Deployment/default/up-low-2",
        "Deployment/default/down",
        "Pod/default/web-abc-1",
    ]
    assert [r.action for r in results] == list(plan.actions)  # reported in the plan's order
    assert [r.outcome for r in results] == ["applied", "applied", "applied", "skipped", "applied", "applied"]
    by_target = {a.target: a.state for a in store.actions()}  # each journal row got its own outcome
    assert by_target["Deployment/default/down"] == "applied" and by_target["Pod/default/web-abc-1"] == "applied"
    store.close()


def test_a_plan_that_outlasts_its_age_limit_skips_the_scale_downs_not_the_scale_ups() -> None:
    """Each write takes 16 s of a 30 s plan age: two writes fit. Before 2026-12-06 the plan's order
    (two scale-downs first) decided, and both scale-ups were skipped as too old."""
    cluster = Cluster({f"Deployment/default/{n}": 4 for n in ("d1", "d2", "u1", "u2")}, write_s=16.0)
    pols = [policy(n) for n in ("d1", "d2", "u1", "u2")]
    plan = Plan(NOW, (scale("d1", 4, 2), scale("d2", 4, 3), scale("u1", 4, 6), scale("u2", 4, 9)))
    act = Actuator(cluster, None, pols, SafetyConfig(max_plan_age_s=30), clock=lambda: cluster.now)  # type: ignore[arg-type]
    results = act.apply_plan(plan, NOW)
    assert [r.outcome for r in results] == ["skipped", "skipped", "applied", "applied"]
    assert all("old" in r.detail for r in results[:2]), [r.detail for r in results]
    assert cluster.writes == ["Deployment/default/u1", "Deployment/default/u2"]


def test_two_actions_on_one_object_keep_their_order() -> None:
    """An object sorts by its most urgent action, and its actions stay in the plan's order."""
    cluster = Cluster({"Deployment/default/a": 4, "Deployment/default/b": 4})
    plan = Plan(NOW, (scale("a", 4, 2), scale("b", 4, 3), scale("a", 2, 7)))
    results = Actuator(cluster, None, [policy("a"), policy("b")], SafetyConfig()).apply_plan(plan, NOW)  # type: ignore[arg-type]
    assert cluster.writes == ["Deployment/default/a", "Deployment/default/a", "Deployment/default/b"]
    assert cluster.replicas["Deployment/default/a"] == 7  # the plan's last word on a
    assert [r.outcome for r in results] == ["applied", "applied", "applied"]
