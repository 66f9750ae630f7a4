"""The pure safety check: bounds, steps, HPA max, quota, PDB, plan age, against the live value."""

from __future__ import annotations

from kubeemu import policy

from actuator.base import LiveObject
from actuator.safety import SafetyConfig, check
from scaleahead.types import MovePod, Reason, ScaleTo, SetWarmPool, WorkloadRef

R = Reason("t", "test")
WEB = WorkloadRef("Deployment", "default", "web")
FN = WorkloadRef("KnativeService", "default", "fn")
NOW = 1000.0
CFG = SafetyConfig(max_plan_age_s=30)


def live(value, **facts):
    return LiveObject("Deployment/default/web", "spec.replicas", value, "1", facts or None)


def test_a_plan_made_from_an_older_value_is_step_limited_from_the_live_value():
    v = check(ScaleTo(WEB, 2, 10, R), live(8), policy(max_step_down=1), NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 10)
    v = check(ScaleTo(WEB, 9, 2, R), live(8), policy(max_step_down=1), NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 7)


def test_a_live_value_outside_the_bounds_goes_into_them_at_once():
    """docs/actuator.md: the bounds win over the step limit, as in the planner (its property tests:
    bounds always hold, step limits when the current count is within the bounds) and the HPA. It
    moved by one step a cycle (28 here), so a plan's "raised to minReplicas 10" wrote 2 (audit)."""
    v = check(ScaleTo(WEB, 30, 25, R), live(30), policy(max_replicas=20, max_step_down=2), NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 20)
    assert v.notes == (
        "clamped 25 -> 20 to the policy's bounds [1, 20]",
        "the live 30 is outside the bounds: moved into them at once (to 20), more than the step limit -2",
    )
    v = check(ScaleTo(WEB, 0, 10, R), live(0), policy(min_replicas=10, max_step_up=2), NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 10)
    # into the bounds, then no further than the step allows: the live 0 under minReplicas 5
    v = check(ScaleTo(WEB, 0, 9, R), live(0), policy(min_replicas=5, max_step_up=2), NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 5)
    assert v.notes == ("the live 0 is outside the bounds: moved into them at once (to 5), more than the step limit +2",)
    # within the bounds the step limit holds as before
    v = check(ScaleTo(WEB, 6, 30, R), live(6), policy(max_replicas=10, max_step_up=2), NOW, NOW, CFG)
    assert (v.decision, v.value, v.notes) == (
        "apply",
        8,
        ("clamped 30 -> 10 to the policy's bounds [1, 10]", "step limited to +2 from the live 6"),
    )


def test_a_warm_pool_is_kept_within_the_policy_max_instances():
    v = check(SetWarmPool(FN, 0, 9, 60, R), live(0), policy("fn", "KnativeService", warm_max=3), NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 3)


def test_a_full_quota_skips_a_scale_up_but_not_a_scale_down():
    assert check(ScaleTo(WEB, 2, 5, R), live(2, quota_pods_free=0), policy(), NOW, NOW, CFG).decision == "skip"
    assert check(ScaleTo(WEB, 5, 2, R), live(5, quota_pods_free=0), policy(), NOW, NOW, CFG).decision == "apply"


def test_an_hpa_floor_counts_the_quota_room_above_the_pods_the_hpa_runs():
    """``pods_now``: a floor up to the HPA's current replicas creates no pod and needs no room."""
    floor = policy(mode="floor", hpa="h")
    v = check(ScaleTo(WEB, 2, 9, R), live(2, quota_pods_free=1, pods_now=5), floor, NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 6) and "(1 more pods allowed)" in v.notes[-1]
    v = check(ScaleTo(WEB, 2, 9, R), live(2, quota_pods_free=0, pods_now=5), floor, NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 5)
    v = check(ScaleTo(WEB, 2, 4, R), live(2, quota_pods_free=0, pods_now=5), floor, NOW, NOW, CFG)
    assert (v.decision, v.value, v.notes) == ("apply", 4, ())
    v = check(ScaleTo(WEB, 5, 9, R), live(5, quota_pods_free=-2, pods_now=5), floor, NOW, NOW, CFG)
    assert v.decision == "skip" and "allows no more pods" in v.reason
    # Fewer pods than the floor (the HPA has not caught up): the missing ones take the room first
    # (found in review: the room was counted above minReplicas, and 9 was written where 5 fit).
    v = check(ScaleTo(WEB, 5, 9, R), live(5, quota_pods_free=2, pods_now=3), floor, NOW, NOW, CFG)
    assert v.decision == "skip" and "allows no more pods" in v.reason
    v = check(ScaleTo(WEB, 5, 9, R), live(5, quota_pods_free=3, pods_now=3), floor, NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 6)


def test_a_floor_whose_new_pods_a_quota_refuses_still_rises_to_the_pods_the_hpa_runs():
    floor = policy(mode="floor", hpa="h")
    unset = {"quota_pods_free": 0, "quota_limited_by:unset:requests.cpu": 1}
    v = check(ScaleTo(WEB, 2, 9, R), live(2, pods_now=5, **unset), floor, NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 5)
    assert "ResourceQuota on requests.cpu refuses its new pods" in v.notes[-1]
    v = check(ScaleTo(WEB, 5, 9, R), live(5, pods_now=5, **unset), floor, NOW, NOW, CFG)
    assert v.decision == "skip" and "set resources.requests.cpu on every container" in v.reason


def test_a_clamped_change_that_equals_the_live_value_is_a_noop():
    v = check(ScaleTo(WEB, 3, 50, R), live(20), policy(max_replicas=20), NOW, NOW, CFG)
    assert v.decision == "noop" and "clamped 50 -> 20" in v.notes[0]


def test_a_pod_that_already_left_its_node_is_not_evicted_again():
    move = MovePod("default", "p", "n1", "n2", R)
    gone = LiveObject("Pod/default/p", "spec.nodeName", 0, "1", {"on_to_node": 1})
    v = check(move, gone, None, NOW, NOW, CFG)
    assert v.decision == "skip" and "no longer on n1 (on n2)" in v.reason


def test_the_plan_age_limit_is_inclusive_of_its_bound():
    assert check(ScaleTo(WEB, 2, 3, R), live(2), policy(), NOW - 30, NOW, CFG).decision == "apply"
    assert check(ScaleTo(WEB, 2, 3, R), live(2), policy(), NOW - 30.5, NOW, CFG).decision == "skip"


def test_the_step_limits_bind_exactly_one_past_the_step() -> None:
    """One replica past the step is limited, the step itself is not (a mutation audit of
    2026-12-06 found the boundary untested: a limit one off in either direction passed)."""
    pol = policy(max_step_up=2, max_step_down=2)
    up = check(ScaleTo(WEB, 10, 13, R), live(10), pol, NOW, NOW, CFG)
    assert (up.decision, up.value) == ("apply", 12)
    down = check(ScaleTo(WEB, 10, 7, R), live(10), pol, NOW, NOW, CFG)
    assert (down.decision, down.value) == ("apply", 8)
    for to in (12, 8):
        exact = check(ScaleTo(WEB, 10, to, R), live(10), pol, NOW, NOW, CFG)
        assert (exact.decision, exact.value, exact.notes) == ("apply", to, ())


def test_a_quota_on_a_resource_the_pods_do_not_set_refuses_a_scale_up_despite_free_pods() -> None:
    """A ResourceQuota on requests.cpu refuses pods whose containers set none, whatever room the pod
    count leaves: the scale-up is skipped, saying which resource to set (untested until the mutation
    audit of 2026-12-06)."""
    v = check(
        ScaleTo(WEB, 2, 5, R),
        live(2, **{"quota_pods_free": 5, "quota_limited_by:unset:requests.cpu": 1}),
        policy(),
        NOW,
        NOW,
        CFG,
    )
    assert (v.decision, v.value) == ("skip", 2)
    assert "set resources.requests.cpu" in v.reason
