"""Admission rules the actuator copies from the API server, pinned where a mutation audit of
2026-12-07 found them untested: LimitRange defaults (``max`` is a bound, ``default`` the default;
init containers are defaulted too), ResourceQuota scopes (PriorityClass ``Exists``, the
``DoesNotExist`` operator, a signed quantity) and the safety check's quota room, PDB and
restore-default branches."""

from __future__ import annotations

from kubeemu import policy

from actuator.base import LiveObject
from actuator.limit_ranges import container_defaults, with_defaults
from actuator.quota_scopes import quota_applies
from actuator.safety import SafetyConfig, check
from scaleahead.types import MovePod, Reason, ScaleTo, SetWarmPool, WorkloadRef

R = Reason("t", "test")
WEB = WorkloadRef("Deployment", "default", "web")
FN = WorkloadRef("KnativeService", "default", "fn")
NOW = 1000.0
CFG = SafetyConfig(max_plan_age_s=30)
SIZED = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]}


def _live(value: int, **facts: float) -> LiveObject:
    return LiveObject("Deployment/default/web", "spec.replicas", value, "1", facts or None)


def test_a_limit_ranges_default_wins_over_its_max_and_is_the_request_too() -> None:
    lr = {"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "default": {"cpu": "500m"}}]}}
    defaults = container_defaults([lr])
    assert defaults == [({"cpu": "500m"}, {"cpu": "500m"})]
    filled = with_defaults({"spec": {"containers": [{"name": "a"}]}}, defaults)
    assert filled["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m"}, "requests": {"cpu": "500m"}}


def test_init_containers_get_the_limit_ranges_defaults() -> None:
    lr = {"spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m"}}]}}
    template = {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
                         "initContainers": [{"name": "init"}]}}  # fmt: skip
    filled = with_defaults(template, container_defaults([lr]))
    assert filled["spec"]["initContainers"][0]["resources"]["requests"] == {"cpu": "500m"}
    assert filled["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m"}


def _scoped(*exprs: dict) -> dict:
    return {"spec": {"scopeSelector": {"matchExpressions": list(exprs)}}}


def test_a_priority_class_exists_quota_counts_only_pods_with_a_class() -> None:
    quota = _scoped({"scopeName": "PriorityClass", "operator": "Exists"})
    assert not quota_applies(quota, {"spec": SIZED})
    assert quota_applies(quota, {"spec": {**SIZED, "priorityClassName": "high"}})


def test_does_not_exist_inverts_a_scope() -> None:
    quota = _scoped({"scopeName": "BestEffort", "operator": "DoesNotExist"})
    assert not quota_applies(quota, {"spec": {"containers": [{"name": "a"}]}})  # a best-effort pod
    assert quota_applies(quota, {"spec": SIZED})


def test_a_signed_quantity_is_more_than_zero() -> None:
    quota = _scoped({"scopeName": "BestEffort", "operator": "Exists"})
    signed = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "+500m"}}}]}
    assert not quota_applies(quota, {"spec": signed})


def test_a_pdb_that_allows_no_disruption_skips_the_move() -> None:
    move = MovePod("default", "p", "n1", "n2", R)
    pod = LiveObject("Pod/default/p", "spec.nodeName", 1, "1", {"pdb_disruptions_allowed": 0})  # on n1
    v = check(move, pod, None, NOW, NOW, CFG)
    assert v.decision == "skip" and "allows no disruption" in v.reason
    one = LiveObject("Pod/default/p", "spec.nodeName", 1, "1", {"pdb_disruptions_allowed": 1})
    assert check(move, one, None, NOW, NOW, CFG).decision == "apply"


def test_an_overused_quota_never_lowers_a_floor_below_the_pods_already_running() -> None:
    # used above hard (the quota was lowered after the pods were made): no room, but the 10 pods
    # the HPA runs exist and stay counted; a floor may rise to them
    floor = policy(mode="floor", hpa="h")
    v = check(ScaleTo(WEB, 2, 12, R), _live(2, quota_pods_free=-3, pods_now=10), floor, NOW, NOW, CFG)
    assert (v.decision, v.value) == ("apply", 10)


def test_restoring_a_default_that_is_already_unset_writes_nothing() -> None:
    pol = policy("fn", "KnativeService", warm_max=3)
    action = SetWarmPool(FN, 1, 0, 0.0, R, restore_default=True)
    unset = LiveObject("KnativeService/default/fn", "min-scale", 0, "1", {"unset": 1})
    v = check(action, unset, pol, NOW, NOW, CFG)
    assert v.decision == "noop" and "already unset" in v.reason
    held = LiveObject("KnativeService/default/fn", "min-scale", 1, "1", None)
    assert check(action, held, pol, NOW, NOW, CFG).decision == "apply"


def test_a_quota_on_count_pods_is_named_a_pod_quota() -> None:
    v = check(ScaleTo(WEB, 2, 5, R), _live(2, quota_pods_free=0, **{"quota_limited_by:count/pods": 1}), policy(),
              NOW, NOW, CFG)  # fmt: skip
    assert v.decision == "skip" and "pod quota allows no more pods" in v.reason
