"""Measured outcomes (scaleahead.outcomes) and the unread hold (scaleahead.unread): these tests pin
behaviour a mutation audit of 2026-12-07 found unpinned."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from actuator.base import ActionResult
from actuator.rollouts import CanaryParams, Outcome, RolloutBook, assign
from scaleahead.outcomes import MeasuredWindow, fresh_demand, measured_outcomes
from scaleahead.types import ClusterState, Reason, ScaleTo, Series, WorkloadRef, WorkloadState
from scaleahead.unread import UnreadBook
from storage import Store
from tests.planner.planner_helpers import function_policy, service_policy
from tests.test_storage_outcomes import _row

T0 = 36_000.0  # the rollout starts here (a whole bucket); its canary window is an hour
NAMES = [f"Deployment/s/w{i}" for i in range(6)]


def _measure(
    tmp_path: Path, window_seconds: dict[str, float], baseline_seconds: float
) -> tuple[dict[str, list[Outcome]], MeasuredWindow]:
    """A canary of one hour at 50 % from ``T0``; each workload's row in its arm covers
    ``window_seconds[name]`` (default the whole hour: 3,600 s), 10 % of its steps short; its champion
    row in the hour before the start covers ``baseline_seconds``, 20 % short. Measured at the window's end."""
    store = Store(f"sqlite:///{tmp_path / 'pins.db'}")
    rid = RolloutBook(store).start(
        "default", "canary", "a", "b", T0, canary=CanaryParams(steps=(0.5, 1.0), window_s=3600.0)
    )
    r = store.rollout(rid)
    salt = str(r.params["salt"])
    rows = []
    for n in NAMES:
        rows.append(
            _row(
                n,
                T0,
                rid,
                assign(n, 0.5, salt),
                steps=360,
                seconds=window_seconds.get(n, 3600.0),
                short_steps=36,
                capacity_seconds=20.0,
                demand_seconds=10.0,
            )
        )
        rows.append(
            _row(
                n,
                T0 - 3600.0,
                steps=100,
                seconds=baseline_seconds,
                short_steps=20,
                capacity_seconds=30.0,
                demand_seconds=10.0,
            )
        )
    store.record_outcomes(rows)
    out = measured_outcomes(store, r, T0 + 3600.0)
    store.close()
    return out


def test_outcome_pin_a_negative_demand_sample_is_missing() -> None:
    now = 10_000.0
    s = Series("d", now - 20.0, 10.0, np.array([5.0, -3.0]))  # the newest (at now - 10) negative: a bad sample
    assert fresh_demand(s, now, 10.0) == 5.0
    assert fresh_demand(Series("d", now - 10.0, 10.0, np.array([-3.0])), now, 10.0) is None


def test_outcome_pin_a_baseline_covering_exactly_the_minimum_share_is_used(tmp_path: Path) -> None:
    # 2,880 s of the hour before the start: 80 % of it, exactly MIN_COVERAGE
    arms, w = _measure(tmp_path, {}, baseline_seconds=2880.0)
    assert (w.baseline_start, w.baseline_end) == (T0 - 3600.0, T0)
    assert w.baseline == "before_start" and w.baselines == len(NAMES)
    outcomes = [o for a in arms.values() for o in a]
    assert len(outcomes) == len(NAMES)
    assert all(o.baseline_violation_fraction == 0.2 and o.baseline_cost_per_demand == 3.0 for o in outcomes)


def test_outcome_pin_a_workload_measured_for_half_the_window_has_no_outcome(tmp_path: Path) -> None:
    half = NAMES[0]
    arms, w = _measure(tmp_path, {half: 1800.0}, baseline_seconds=3600.0)
    assert (w.start, w.end) == (T0, T0 + 3600.0)
    assert w.under_measured == (half,)
    measured = {o.workload for a in arms.values() for o in a}
    assert measured == set(NAMES) - {half}
    assert all(o.violation_fraction == 0.1 and o.cost_per_demand == 2.0 for a in arms.values() for o in a)


def _state(read: dict[WorkloadRef, WorkloadState], unreadable: tuple[WorkloadRef, ...] = ()) -> ClusterState:
    return ClusterState(workloads=read, unreadable={ref: "500" for ref in unreadable})


def test_unread_pin_a_function_without_a_warm_pool_takes_no_warm_memory() -> None:
    fn = function_policy("fn", enabled=False)  # warmPool disabled: its instances are not the warm budget's
    assert not fn.spec.warm_pool.enabled
    book = UnreadBook()
    book.update(_state({fn.workload: WorkloadState(fn.workload, 3, 3, warm_instances=2)}), [fn.workload], 0.0)
    held = book.hold([fn], {fn.workload: "timeout"}, {"*": 10}, 1000.0)
    assert held.warm_memory_budget_mb == 1000.0 and held.warm_memory_held_mb == 0.0
    assert held.capacity == {"*": 8}  # its pods still count against the shared capacity
    assert held.notes == (
        f"{fn.workload.key}: its state cannot be read, so its 2 warm instances (as last read) stay counted "
        "against loop.capacity['*']",
    )


def test_unread_pin_a_read_after_scaleaheads_write_is_what_is_held_as_last_read() -> None:
    web = service_policy("web")
    book = UnreadBook()
    refs = [web.workload]
    book.update(_state({web.workload: WorkloadState(web.workload, 7, 7)}), refs, 0.0)
    why = Reason("t", "t")
    book.wrote([ActionResult(ScaleTo(web.workload, 7, 4, why), "applied", "", written=4)], [web], 10.0)
    book.update(_state({web.workload: WorkloadState(web.workload, 6, 6)}), refs, 20.0)  # read again: 6 run
    book.update(_state({}, (web.workload,)), refs, 30.0)
    held = book.hold([web], {web.workload: "500"}, {"*": 20}, None)
    assert held.capacity == {"*": 14}
    assert held.notes == (
        f"{web.workload.key}: its state cannot be read, so its 6 replicas (as last read) stay counted against "
        "loop.capacity['*']",
    )


def test_unread_pin_a_direct_statefulset_holds_what_scaleahead_scaled_it_down_to() -> None:
    db = service_policy("db", target={"kind": "StatefulSet", "name": "db", "namespace": "shop"})
    assert db.spec.target.mode == "direct" and db.workload.kind == "StatefulSet"
    book = UnreadBook()
    refs = [db.workload]
    book.update(_state({db.workload: WorkloadState(db.workload, 5, 5)}), refs, 0.0)
    why = Reason("t", "t")
    book.wrote([ActionResult(ScaleTo(db.workload, 5, 2, why), "applied", "", written=2)], [db], 10.0)
    book.update(_state({}, (db.workload,)), refs, 20.0)
    held = book.hold([db], {db.workload: "500"}, {"*": 20}, None)
    assert held.capacity == {"*": 18}
    assert held.notes == (
        f"{db.workload.key}: its state cannot be read, so its 2 replicas (as scaleahead last wrote it) stay "
        "counted against loop.capacity['*']",
    )
    assert math.isclose(book.last[db.workload][2], 10.0)
