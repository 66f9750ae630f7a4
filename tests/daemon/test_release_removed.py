"""A removed function policy's warm instances are handed back: the Knative Service's min-scale
that scaleahead set goes back to what it was before scaleahead first wrote it (unset, or its own
value; 0 for a record older than that memory) (``Actuator.release``, ``Daemon._release_removed``),
through the journal, never over someone else's value, and only after
``actuation.release_removed_after_s`` without a policy. Against the Kubernetes API emulator through
the official client, with SQLite."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "actuator"))

from kubeemu import DEPLOYMENTS, KSVC, Fault, deployment, policy  # noqa: E402
from kubeemu import kube as kube  # noqa: E402 - the fixture, used by name

from actuator.applying import Actuator  # noqa: E402
from actuator.kubernetes import MIN_SCALE, KubernetesTarget  # noqa: E402
from actuator.safety import SafetyConfig  # noqa: E402
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


def _warmed(kube: Any, store: Store, now: float, instances: int = 3, before: int | None = None) -> Any:
    """scaleahead's actuator, with a policy for fn, sets its min-scale from ``before`` (None: no
    annotation) to ``instances``."""
    kube.cluster.put(KSVC, "default", "fn", _ksvc(before))
    pols = [policy("fn", kind="KnativeService")]
    act = Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), store, pols)
    res = act.apply_plan(Plan(now, (SetWarmPool(FN, before or 0, instances, 600.0, R),)), now)
    assert res[0].outcome == "applied" and _min_scale(kube) == str(instances)
    return Actuator(KubernetesTarget(kube.api_client(), [], timeout_s=2.0), store, [])  # the policy is gone


def test_release_removes_the_min_scale_a_service_did_not_have_before_through_the_journal(
    kube: Any, store: Store
) -> None:
    act = _warmed(kube, store, 1000.0)
    mf = store.managed_field(FN.key)
    assert mf is not None and mf.original_recorded and mf.original_value is None
    res = act.release([FN.key], 2000.0)
    assert [r.outcome for r in res] == ["applied"], res
    assert _min_scale(kube) is None  # the annotation is gone: the platform's default applies again
    row = store.actions(limit=1)[0]
    assert (row.reason_code, row.state, row.from_value, row.to_value) == ("policy_removed", "applied", "3", "0")
    assert "its policy was removed" in row.reason and "it had no min-scale before scaleahead" in row.reason
    assert store.managed_field(FN.key) is None  # no longer scaleahead's
    assert act.release([FN.key], 2100.0) == []  # nothing left to release: no call, no journal row
    assert len(store.actions()) == 2


def test_release_gives_back_the_services_own_min_scale_even_one_scaleahead_lowered(kube: Any, store: Store) -> None:
    """The manifest said min-scale 2: raised to 5, it goes back to 2; cooled to 0 by scaleahead (a
    function the forecast saw idle), it goes back to 2 as well."""
    act = _warmed(kube, store, 1000.0, instances=5, before=2)
    assert [r.outcome for r in act.release([FN.key], 2000.0)] == ["applied"]
    assert _min_scale(kube) == "2" and store.managed_field(FN.key) is None
    row = store.actions(limit=1)[0]
    assert (row.from_value, row.to_value) == ("5", "2") and "2, its value before scaleahead" in row.reason

    act = _warmed(kube, store, 3000.0, instances=0, before=2)
    settings = Settings()
    settings.actuation.release_removed_after_s = 0.0
    from scaleahead.daemon import _may_need_release

    assert _may_need_release(store.managed_field(FN.key))  # type: ignore[arg-type] - holds 0, still ours to give back
    assert [r.outcome for r in act.release([FN.key], 4000.0)] == ["applied"]
    assert _min_scale(kube) == "2" and store.managed_field(FN.key) is None

    act = _warmed(kube, store, 5000.0, instances=3, before=None)
    pols = [policy("fn", kind="KnativeService")]
    cooling = Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), store, pols)
    assert cooling.apply_plan(Plan(5100.0, (SetWarmPool(FN, 3, 0, 600.0, R),)), 5100.0)[0].outcome == "applied"
    assert _min_scale(kube) == "0"  # a "0" where there was no annotation: removed on release
    assert [r.outcome for r in act.release([FN.key], 6000.0)] == ["applied"]
    assert _min_scale(kube) is None and store.managed_field(FN.key) is None


def test_a_record_from_before_migration_0008_goes_back_to_0(kube: Any, store: Store) -> None:
    act = _warmed(kube, store, 1000.0, instances=3, before=2)
    with store.engine.begin() as conn:  # as a row written before 0008_original
        from sqlalchemy import text

        conn.execute(text("UPDATE managed_fields SET original_recorded = false, original_value = NULL"))
    res = act.release([FN.key], 2000.0)
    assert [r.outcome for r in res] == ["applied"] and _min_scale(kube) == "0"
    assert "0 (its value before scaleahead managed it was not recorded)" in store.actions(limit=1)[0].reason


def test_only_the_first_write_records_the_original(kube: Any, store: Store) -> None:
    _warmed(kube, store, 1000.0, instances=3, before=1)
    pols = [policy("fn", kind="KnativeService")]
    act = Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), store, pols)
    assert act.apply_plan(Plan(1100.0, (SetWarmPool(FN, 3, 4, 600.0, R),)), 1100.0)[0].outcome == "applied"
    mf = store.managed_field(FN.key)
    assert mf is not None and (mf.original_recorded, mf.original_value, mf.written_value) == (True, 1, 4)


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


def _daemon(
    kube: Any, store: Store, nasa: Series, settings: Settings, kill_switch: Any = None, **kwargs: Any
) -> tuple[Daemon, VirtualClock]:
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    pols = [policy("web")]
    t0 = nasa.start + 2 * DAY
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=2.0)
    history = TraceHistory(default=nasa, window_s=1.2 * DAY)
    forecaster = make_model("seasonal_naive").fit([nasa.between(nasa.start, t0)])
    actuator = Actuator(target, store, pols, SafetyConfig(), kill_switch=kill_switch)
    deps = Deps(history, forecaster, target, store, pols, actuator=actuator)
    return Daemon(deps, settings, VirtualClock(t0), **kwargs), VirtualClock(t0)


def _ticks(daemon: Daemon, minutes: float, step_s: float = 60.0) -> None:
    for _ in range(int(minutes * 60 / step_s)):
        daemon.tick(daemon.clock.now())
        daemon.clock.sleep(step_s)


class _Lease:
    """The leader while ``leading`` says so."""

    def __init__(self) -> None:
        self.leading = True

    def is_leader(self, now: float) -> bool:
        return self.leading

    def release(self) -> None:
        return None


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
        if _min_scale(kube) is None and not minutes:
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
        assert minute >= 9 or _min_scale(kube) is not None, f"released at minute {minute}"
        clock.sleep(60.0)
    assert _min_scale(kube) is None  # minute 9: 300 s after minute 4

    settings.actuation.release_removed_after_s = None
    daemon2, _ = _daemon(kube, store, nasa, settings)
    _warmed(kube, store, daemon2.clock.now())
    for _ in range(12):
        daemon2.tick(daemon2.clock.now())
        daemon2.clock.sleep(60.0)
    assert _min_scale(kube) == "3"


def test_a_write_that_never_landed_is_not_scaleaheads_to_hand_back(kube: Any, store: Store) -> None:
    """The manifest set min-scale 2; scaleahead's first write was refused (400), so the record holds
    the 2 from before the write (the human-edit check's baseline), not a value scaleahead wrote."""
    kube.cluster.put(KSVC, "default", "fn", _ksvc(2))
    pols = [policy("fn", kind="KnativeService")]
    act = Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), store, pols)
    kube.cluster.faults.append(Fault("PATCH", "/services/fn", status=400, times=2))
    for t in (1000.0, 1010.0):
        assert act.apply_plan(Plan(t, (SetWarmPool(FN, 2, 5, 600.0, R),)), t)[0].outcome == "failed"
    mf = store.managed_field(FN.key)
    assert mf is not None and mf.value == 2 and mf.written_value is None
    gone = Actuator(KubernetesTarget(kube.api_client(), [], timeout_s=2.0), store, [])
    res = gone.release([FN.key], 2000.0)
    assert [r.outcome for r in res] == ["skipped"] and "no confirmed write" in res[0].detail
    assert _min_scale(kube) == "2" and store.managed_field(FN.key) is None


def test_a_write_whose_answer_was_lost_but_landed_is_released(kube: Any, store: Store) -> None:
    act = _warmed(kube, store, 1000.0, instances=3)
    pols = [policy("fn", kind="KnativeService")]
    with_policy = Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), store, pols)
    # lands, answer 3 s too late (the emulator runs in this process: a stall could bring a late answer in)
    kube.cluster.faults.append(Fault("PATCH", "/services/fn", delay_s=5.0, after=True))
    kube.cluster.faults.append(Fault("GET", "/services/fn", status=500, skip=1))  # and the read after it fails
    res = with_policy.apply_plan(Plan(1100.0, (SetWarmPool(FN, 3, 4, 600.0, R),)), 1100.0)
    assert res[0].outcome == "failed" and _min_scale(kube) == "4"
    assert store.managed_field(FN.key).written_value == 3  # type: ignore[union-attr] - the 4 is an intent
    assert [r.outcome for r in act.release([FN.key], 2000.0)] == ["applied"]
    assert _min_scale(kube) is None


def test_checked_once_a_minute_at_10_s_ticks_and_a_leader_again_waits_the_whole_delay(
    kube: Any, store: Store, nasa: Series
) -> None:
    settings = Settings()
    settings.actuation.release_removed_after_s = 300.0
    lease = _Lease()
    daemon, _ = _daemon(kube, store, nasa, settings, leadership=lease)
    _warmed(kube, store, daemon.clock.now())
    _ticks(daemon, 4, step_s=10.0)  # seen without a policy for 4 minutes as leader
    lease.leading = False
    _ticks(daemon, 60, step_s=60.0)  # an hour as standby
    lease.leading = True
    _ticks(daemon, 4, step_s=10.0)  # a leader again: 4 minutes is not 5
    assert _min_scale(kube) == "3"
    _ticks(daemon, 1.5, step_s=10.0)
    assert _min_scale(kube) is None
    released = [a for a in store.actions() if a.reason_code == "policy_removed"]
    assert len(released) == 1, "one check a minute, one release"


def test_nothing_is_released_while_paused_or_under_the_kill_switch_and_a_dry_run_reports_once(
    kube: Any, store: Store, nasa: Series
) -> None:
    settings = Settings()
    settings.actuation.release_removed_after_s = 0.0
    switch = {"why": "ConfigMap scaleahead-kill-switch says paused"}
    daemon, _ = _daemon(kube, store, nasa, settings, kill_switch=lambda: switch["why"])
    _warmed(kube, store, daemon.clock.now())
    _ticks(daemon, 5)
    assert _min_scale(kube) == "3" and not [a for a in store.actions() if a.reason_code == "policy_removed"]
    switch["why"] = ""
    settings.actuation.paused = True
    _ticks(daemon, 5)
    assert _min_scale(kube) == "3" and not [a for a in store.actions() if a.reason_code == "policy_removed"]
    settings.actuation.paused, settings.actuation.dry_run = False, True
    _ticks(daemon, 30)
    rows = [a for a in store.actions() if a.reason_code == "policy_removed"]
    assert [r.state for r in rows] == ["dry-run"] and _min_scale(kube) == "3"
    settings.actuation.dry_run = False
    _ticks(daemon, 2)
    assert _min_scale(kube) is None


def test_a_failed_release_backs_off_and_a_skipped_policy_keeps_its_pool(kube: Any, store: Store, nasa: Series) -> None:
    settings = Settings()
    settings.actuation.release_removed_after_s = 0.0
    kept = {"KnativeService/default/fn"}
    daemon, _ = _daemon(kube, store, nasa, settings, kept=lambda: kept)
    _warmed(kube, store, daemon.clock.now())
    _ticks(daemon, 5)
    assert _min_scale(kube) == "3"  # its policy object is only invalid for now: not released
    kept.clear()
    kube.cluster.faults.append(Fault("PATCH", "/services/fn", status=500, times=1000))
    _ticks(daemon, 16)
    tries = [a for a in store.actions() if a.reason_code == "policy_removed"]
    assert 3 <= len(tries) <= 5, f"1, 2, 4, 8 minutes apart: {len(tries)} tries in 16 minutes"
    kube.cluster.faults.clear()
    _ticks(daemon, 20)
    assert _min_scale(kube) is None


def test_run_answers_for_its_shard_and_namespace_only() -> None:
    from scaleahead.commands.run import _owner
    from scaleahead.sharding import shard_of

    assert _owner(None, None) is None
    in_ns = _owner(None, "fn")
    assert in_ns is not None and in_ns("KnativeService/fn/a") and not in_ns("KnativeService/other/a")
    keys = [f"KnativeService/fn/f{i}" for i in range(40)]
    for index in range(3):
        owns = _owner(f"{index}/3", "fn")
        assert owns is not None
        assert [k for k in keys if owns(k)] == [k for k in keys if shard_of(k, 3) == index]
        assert not owns("KnativeService/other/f1")


def test_a_function_warmed_from_0_whose_answer_was_lost_is_still_released(
    kube: Any, store: Store, nasa: Series
) -> None:
    """Warming from 0 is the usual case: the record then holds 0 (the value before the write) with
    the pending write, until a later action confirms it. Found in review: such a record was never
    looked at."""
    settings = Settings()
    settings.actuation.release_removed_after_s = 0.0
    daemon, _ = _daemon(kube, store, nasa, settings)
    kube.cluster.put(KSVC, "default", "fn", _ksvc(None))
    pols = [policy("fn", kind="KnativeService")]
    act = Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), store, pols)
    # lands, answer 3 s too late (the emulator runs in this process: a stall could bring a late answer in)
    kube.cluster.faults.append(Fault("PATCH", "/services/fn", delay_s=5.0, after=True))
    kube.cluster.faults.append(Fault("GET", "/services/fn", status=500, skip=1))  # and the read after it fails
    now = daemon.clock.now()
    assert act.apply_plan(Plan(now, (SetWarmPool(FN, 0, 3, 600.0, R),)), now)[0].outcome == "failed"
    mf = store.managed_field(FN.key)
    assert mf is not None and mf.value == 0 and mf.written_value is None and _min_scale(kube) == "3"
    _ticks(daemon, 2)
    assert _min_scale(kube) is None


def test_a_record_from_before_migration_0007_is_released_on_the_journals_word(kube: Any, store: Store) -> None:
    """No confirmed value (written before the column existed): the journal's last applied action
    on the Service set the value it holds, so it is scaleahead's; a value it did not set is not."""
    act = _warmed(kube, store, 1000.0, instances=3)
    with store.engine.begin() as conn:  # as a row written before 0007_written
        from sqlalchemy import text

        conn.execute(text("UPDATE managed_fields SET written_value = NULL"))
    assert store.managed_field(FN.key).written_value is None  # type: ignore[union-attr]
    assert [r.outcome for r in act.release([FN.key], 2000.0, dry_run=True)] == ["dry-run"]
    obj = kube.cluster.get(KSVC, "default", "fn")
    obj["spec"]["template"]["metadata"]["annotations"][MIN_SCALE] = "5"  # not what the journal says it set
    kube.cluster.put(KSVC, "default", "fn", obj)
    assert [r.outcome for r in act.release([FN.key], 2100.0)] == ["skipped"] and _min_scale(kube) == "5"


def test_a_dry_run_reports_a_skipped_release_once(kube: Any, store: Store, nasa: Series, caplog: Any) -> None:
    settings = Settings()
    settings.actuation.release_removed_after_s = 0.0
    settings.actuation.dry_run = True
    daemon, _ = _daemon(kube, store, nasa, settings)
    _warmed(kube, store, daemon.clock.now())
    obj = kube.cluster.get(KSVC, "default", "fn")
    obj["spec"]["template"]["metadata"]["annotations"][MIN_SCALE] = "5"  # someone else's now
    kube.cluster.put(KSVC, "default", "fn", obj)
    with caplog.at_level("INFO"):
        _ticks(daemon, 4)
    assert sum("not released" in r.getMessage() for r in caplog.records) == 1


def test_one_check_reads_no_longer_than_its_budget(kube: Any, store: Store) -> None:
    act = _warmed(kube, store, 1000.0)
    kube.cluster.put(KSVC, "default", "slow", _ksvc(2))
    store.set_managed_field("KnativeService/default/slow", "x", 2, "1", 1000.0, written=True)
    kube.cluster.faults.append(Fault("GET", "/services/fn", delay_s=0.3))
    res = act.release([FN.key, "KnativeService/default/slow"], 2000.0, budget_s=0.1)
    assert [r.action.target for r in res] == [FN.key]  # the second was left for the next check
    assert kube.cluster.get(KSVC, "default", "slow")["spec"]["template"]["metadata"]["annotations"][MIN_SCALE] == "2"


def test_a_removed_functions_release_is_not_held_up_by_a_wall_clock_stepped_back(
    kube: Any, store: Any, nasa: Any
) -> None:
    """The second review's case: 180 s of the 300 s grace waited, then the wall clock steps back an
    hour: the release comes about 2 minutes later on the new clock, not an hour and 2 minutes."""
    settings = Settings()
    settings.actuation.release_removed_after_s = 300.0
    daemon, _ = _daemon(kube, store, nasa, settings)
    clock = daemon.clock
    _warmed(kube, store, clock.now())
    for _ in range(3):
        daemon.tick(clock.now())
        clock.sleep(60.0)
    clock._now -= 3600.0  # type: ignore[attr-defined]
    released_at = None
    for minute in range(10):
        daemon.tick(clock.now())
        if _min_scale(kube) is None:
            released_at = minute
            break
        clock.sleep(60.0)
    assert released_at is not None and released_at <= 5, released_at
