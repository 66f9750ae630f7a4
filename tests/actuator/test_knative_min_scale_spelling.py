"""A Knative Service whose revision template spells min-scale the older way,
``autoscaling.knative.dev/minScale`` (still accepted by Knative; many manifests use it): scaleahead
reads it, writes that spelling and never adds ``min-scale`` beside it, gives it back on release, and
skips a template that holds both spellings, saying why. Until 2026-12-06 such a Service was read as
0 warm instances and a raise added ``min-scale`` next to ``minScale``. Against the Kubernetes API
emulator through the official client, with SQLite for the release."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubeemu import KSVC, QUOTAS, policy

from actuator.applying import Actuator
from actuator.kubernetes import MIN_SCALE, KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, SetWarmPool, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")
NOW = 1_000_000.0
FN = WorkloadRef("KnativeService", "default", "fn")
#: Knative's older spelling, as manifests write it (not scaleahead's constant: the test pins the key).
MIN_SCALE_OLD = "autoscaling.knative.dev/minScale"


def _ksvc(kube: Any, annotations: dict[str, str]) -> None:
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": {"metadata": {"annotations": annotations}}}})


def _annotations(kube: Any) -> dict[str, str]:
    return dict(kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"])


def _target(kube: Any, with_policy: bool = True) -> tuple[KubernetesTarget, list[Any]]:
    pols = [policy("fn", kind="KnativeService")] if with_policy else []
    return KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), pols


def _apply(kube: Any, action: Any, store: Store | None = None) -> Any:
    """``action`` through scaleahead's actuator, with a policy for fn; its one result."""
    target, pols = _target(kube)
    (res,) = Actuator(target, store, pols, SafetyConfig()).apply_plan(Plan(NOW, (action,)), NOW)
    return res


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = Store(f"sqlite:///{tmp_path / 'spelling.db'}")
    yield s
    s.close()


def test_the_older_spelling_is_read_as_the_warm_instances_and_in_the_quota_pool(kube: Any) -> None:
    _ksvc(kube, {MIN_SCALE_OLD: "3"})
    kube.cluster.put(QUOTAS, "default", "q", {"spec": {"hard": {"pods": "10"}}, "status": {"used": {"pods": "5"}}})
    target, _ = _target(kube)
    state = target.read_state([FN])
    assert FN not in state.unreadable, state.unreadable
    assert state.workloads[FN].warm_instances == 3 and state.workloads[FN].replicas == 3
    assert state.pod_quotas["default"] == 5 + 3  # the room left plus the 3 pods it holds


@pytest.mark.parametrize("action", [SetWarmPool(FN, 3, 5, 600.0, R), ScaleTo(FN, 3, 5, R)])
def test_a_raise_writes_the_older_spelling_and_adds_no_min_scale_beside_it(kube: Any, action: Any) -> None:
    _ksvc(kube, {MIN_SCALE_OLD: "3", "autoscaling.knative.dev/target": "10"})
    res = _apply(kube, action)
    assert res.outcome == "applied" and f"[{MIN_SCALE_OLD}]: 3 -> 5" in res.detail, res
    assert _annotations(kube) == {MIN_SCALE_OLD: "5", "autoscaling.knative.dev/target": "10"}


def test_the_value_already_held_under_the_older_spelling_is_no_change(kube: Any) -> None:
    _ksvc(kube, {MIN_SCALE_OLD: "3"})
    res = _apply(kube, SetWarmPool(FN, 0, 3, 600.0, R))
    assert res.outcome == "skipped" and f"[{MIN_SCALE_OLD}] is already 3" in res.detail, res
    assert kube.cluster.writes() == [] and _annotations(kube) == {MIN_SCALE_OLD: "3"}


def test_a_template_with_both_spellings_is_skipped_with_the_reason_and_never_written(kube: Any) -> None:
    _ksvc(kube, {MIN_SCALE_OLD: "3", MIN_SCALE: "1"})
    state = _target(kube)[0].read_state([FN])
    assert FN not in state.workloads
    why = state.unreadable[FN]
    assert MIN_SCALE in why and MIN_SCALE_OLD in why and "remove one of them" in why, why
    res = _apply(kube, SetWarmPool(FN, 1, 4, 600.0, R))
    assert res.outcome == "skipped" and "both" in res.detail and "remove one of them" in res.detail, res
    assert kube.cluster.writes() == [] and _annotations(kube) == {MIN_SCALE_OLD: "3", MIN_SCALE: "1"}


def test_release_gives_back_the_value_under_the_older_spelling(kube: Any, store: Store) -> None:
    """The manifest said minScale 2; scaleahead raised it to 5 (same spelling, original 2 recorded);
    the policy is removed: minScale goes back to 2, and no min-scale appears."""
    _ksvc(kube, {MIN_SCALE_OLD: "2"})
    assert _apply(kube, SetWarmPool(FN, 2, 5, 600.0, R), store).outcome == "applied"
    assert _annotations(kube) == {MIN_SCALE_OLD: "5"}
    mf = store.managed_field(FN.key)
    assert mf is not None and (mf.original_recorded, mf.original_value) == (True, 2)
    gone, _ = _target(kube, with_policy=False)
    assert [r.outcome for r in Actuator(gone, store, []).release([FN.key], NOW + 1000)] == ["applied"]
    assert _annotations(kube) == {MIN_SCALE_OLD: "2"} and store.managed_field(FN.key) is None


def test_release_to_no_annotation_removes_the_spelling_the_service_holds(kube: Any, store: Store) -> None:
    """scaleahead set min-scale 3 on a Service that had none; the owner then re-applied it as
    minScale 3: the release removes minScale (the one it holds), leaving the platform's default."""
    _ksvc(kube, {})
    assert _apply(kube, SetWarmPool(FN, 0, 3, 600.0, R), store).outcome == "applied"
    _ksvc(kube, {MIN_SCALE_OLD: "3"})
    gone, _ = _target(kube, with_policy=False)
    assert [r.outcome for r in Actuator(gone, store, []).release([FN.key], NOW + 1000)] == ["applied"]
    assert _annotations(kube) == {} and store.managed_field(FN.key) is None


def test_release_of_a_template_with_both_spellings_is_skipped_and_kept_for_later(kube: Any, store: Store) -> None:
    """As a record left by scaleahead before 2026-12-06 can be: the owner's minScale 3 and the
    min-scale 1 scaleahead added beside it. Nothing is written, the record stays (tried again once
    someone removes one)."""
    _ksvc(kube, {})
    assert _apply(kube, SetWarmPool(FN, 0, 1, 600.0, R), store).outcome == "applied"
    _ksvc(kube, {MIN_SCALE_OLD: "3", MIN_SCALE: "1"})
    writes = len(kube.cluster.writes())
    gone, _ = _target(kube, with_policy=False)
    (res,) = Actuator(gone, store, []).release([FN.key], NOW + 1000)
    assert res.outcome == "skipped" and "remove one of them" in res.detail, res
    assert len(kube.cluster.writes()) == writes and _annotations(kube) == {MIN_SCALE_OLD: "3", MIN_SCALE: "1"}
    assert store.managed_field(FN.key) is not None
