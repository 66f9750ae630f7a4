"""A removed function policy's warm instances are handed back: the Knative Service's min-scale
that scaleahead set goes back to 0 (``Actuator.release``, ``Daemon._release_removed``), through the
journal, never over someone else's value, and only after ``actuation.release_removed_after_s``
without a policy. Against the Kubernetes API emulator through the official client, with SQLite."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "actuator"))

from kubeemu import DEPLOYMENTS, KSVC, deployment, policy  # noqa: E402
from kubeemu import kube as kube  # noqa: E402 - the fixture, used by name

from actuator.applying import Actuator  # noqa: E402
from actuator.kubernetes import MIN_SCALE, KubernetesTarget  # noqa: E402
from forecaster import make_model  # noqa: E402
from scaleahead.clock import VirtualClock  # noqa: E402
from scaleahead.daemon import Daemon  # noqa: E402
from scaleahead.loop import Deps  # noqa: E402
from scaleahead.settings import Settings  # noqa: E402
from scaleahead.tracesource import TraceHistory  # noqa: E402
from scaleahead.types import Plan, Reason, Series, SetWarmPool, WorkloadRef  # noqa: E402
from storage import Store  # noqa: E402

DAY = 86400.0
FN = WorkloadRef("KnativeService", "default", "fn")
R = Reason("test", "because the test says so")


def _ksvc(min_scale: int | None) -> dict[str, Any]:
    ann = {} if min_scale is None else {MIN_SCALE: str(min_scale)}
    return {"spec": {"template": {"metadata": {"annotations": ann}}}}


def _min_scale(kube: Any) -> str | None:
    obj = kube.cluster.get(KSVC, "default", "fn")
    return None if obj is None else obj["spec"]["template"]["metadata"]["annotations"].get(MIN_SCALE)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = Store(f"sqlite:///{tmp_path / 'release.db'}")
    yield s
    s.close()


def _warmed(kube: Any, store: Store, now: float, instances: int = 3) -> Any:
    """scaleahead's actuator, with a policy for fn, sets its min-scale to ``instances``."""
    kube.cluster.put(KSVC, "default", "fn", _ksvc(None))
    pols = [policy("fn", kind="KnativeService")]
    act = Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), store, pols)
    res = act.apply_plan(Plan(now, (SetWarmPool(FN, 0, instances, 600.0, R),)), now)
    assert res[0].outcome == "applied" and _min_scale(kube) == str(instances)
    return Actuator(KubernetesTarget(kube.api_client(), [], timeout_s=2.0), store, [])  # the policy is gone


def test_release_sets_the_min_scale_scaleahead_wrote_back_to_0_through_the_journal(kube: Any, store: Store) -> None:
    act = _warmed(kube, store, 1000.0)
    res = act.release([FN.key], 2000.0)
    assert [r.outcome for r in res] == ["applied"], res
    assert _min_scale(kube) == "0"
    row = store.actions(limit=1)[0]
    assert (row.reason_code, row.state, row.from_value, row.to_value) == ("policy_removed", "applied", "3", "0")
    assert "its policy was removed" in row.reason
    assert store.managed_field(FN.key).value == 0  # type: ignore[union-attr]
    assert act.release([FN.key], 2100.0) == []  # nothing left to release: no call, no journal row
    assert len(store.actions()) == 2


def test_a_value_someone_else_set_is_left_and_forgotten(kube: Any, store: Store) -> None:
    act = _warmed(kube, store, 1000.0)
    obj = kube.cluster.get(KSVC, "default", "fn")
    obj["spec"]["template"]["metadata"]["annotations"][MIN_SCALE] = "5"  # kubectl edit
    kube.cluster.put(KSVC, "default", "fn", obj)
    res = act.release([FN.key], 2000.0)
    assert [r.outcome for r in res] == ["skipped"] and "someone else set it" in res[0].detail
    assert _min_scale(kube) == "5"
    assert store.managed_field(FN.key) is None  # no longer scaleahead's: not looked at again


def test_a_deleted_service_is_forgotten_and_a_dry_run_writes_nothing(kube: Any, store: Store) -> None:
    act = _warmed(kube, store, 1000.0)
    res = act.release([FN.key], 2000.0, dry_run=True)
    assert [r.outcome for r in res] == ["dry-run"] and _min_scale(kube) == "3"
    assert store.managed_field(FN.key).value == 3  # type: ignore[union-attr]
    del kube.cluster.objects[KSVC, "default", "fn"]  # kubectl delete ksvc fn
    res = act.release([FN.key], 2100.0)
    assert [r.outcome for r in res] == ["skipped"] and "no longer exists" in res[0].detail
    assert store.managed_field(FN.key) is None


def _daemon(kube: Any, store: Store, nasa: Series, settings: Settings, **kwargs: Any) -> tuple[Daemon, VirtualClock]:
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    pols = [policy("web")]
    t0 = nasa.start + 2 * DAY
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=2.0)
    history = TraceHistory(default=nasa, window_s=1.2 * DAY)
    forecaster = make_model("seasonal_naive").fit([nasa.between(nasa.start, t0)])
    deps = Deps(history, forecaster, target, store, pols, actuator=Actuator(target, store, pols))
    return Daemon(deps, settings, VirtualClock(t0), **kwargs), VirtualClock(t0)


def test_the_daemon_releases_after_the_grace_period_only_what_its_shard_owns(
    kube: Any, store: Store, nasa: Series
) -> None:
    settings = Settings()
    settings.actuation.release_removed_after_s = 300.0
    daemon, _ = _daemon(kube, store, nasa, settings, owns=lambda key: key != "KnativeService/default/other")
    clock = daemon.clock
    _warmed(kube, store, clock.now())
    kube.cluster.put(KSVC, "default", "other", _ksvc(2))  # another shard's function
    store.set_managed_field("KnativeService/default/other", "x", 2, "1", clock.now())
    minutes = []
    for minute in range(8):
        daemon.tick(clock.now())
        if _min_scale(kube) == "0" and not minutes:
            minutes.append(minute)
        clock.sleep(60.0)
    assert minutes == [5], "released at the first check at least 300 s after it was first seen without a policy"
    other = kube.cluster.get(KSVC, "default", "other")["spec"]["template"]["metadata"]["annotations"]
    assert other[MIN_SCALE] == "2"  # not this shard's to release


def test_a_policy_back_within_the_grace_period_keeps_its_warm_pool_and_null_never_releases(
    kube: Any, store: Store, nasa: Series
) -> None:
    settings = Settings()
    settings.actuation.release_removed_after_s = 300.0
    daemon, _ = _daemon(kube, store, nasa, settings)
    clock = daemon.clock
    _warmed(kube, store, clock.now())
    web = daemon.deps.policies
    for minute in range(10):
        if minute == 3:  # the function's policy comes back (say, fixed after an invalid edit)...
            daemon.set_policies([*web, policy("fn", kind="KnativeService")])
        if minute == 4:  # ... and goes again: the grace period starts over
            daemon.set_policies(web)
        daemon.tick(clock.now())
        assert minute >= 9 or _min_scale(kube) != "0", f"released at minute {minute}"
        clock.sleep(60.0)
    assert _min_scale(kube) == "0"  # minute 9: 300 s after minute 4

    settings.actuation.release_removed_after_s = None
    daemon2, _ = _daemon(kube, store, nasa, settings)
    _warmed(kube, store, daemon2.clock.now())
    for _ in range(12):
        daemon2.tick(daemon2.clock.now())
        daemon2.clock.sleep(60.0)
    assert _min_scale(kube) == "3"
