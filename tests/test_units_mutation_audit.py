"""Tests that pin behaviour a mutation audit of 2026-12-06 found unpinned: each failed on a mutant
of the code (named in the comment above each test: the audit's id and the behaviour) that every
earlier test let pass."""

from __future__ import annotations

import math

import numpy as np
import pytest

from forecaster.base import fill_short_gaps_causal, monotone_quantiles, padded_history
from planner.rebalance import pod_peak_cpu_m
from scaleahead.daemon import Backoff
from scaleahead.errors import DataError
from scaleahead.types import Plan, Pod, Reason, ScaleTo, Series, WorkloadRef
from storage import Store
from storage.store import RolloutChanged

# ST07: a rollout decision made on a stale read (updated since, same state and share) is refused.


def test_an_update_from_a_stale_read_is_refused(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    rid = store.create_rollout("g", "shadow", "1", "2", now=100.0)
    seen = store.rollout(rid)
    store.update_rollout(seen, 200.0, results={"evaluated": 1})  # another evaluation commits first
    with pytest.raises(RolloutChanged):
        store.update_rollout(seen, 300.0, results={"evaluated": "stale"})
    assert store.rollout(rid).results == {"evaluated": 1}


def test_the_peak_a_node_must_hold_is_never_below_observed_usage():
    p = Pod("app", "a", "n1", 100, 128, usage_cpu_m=800.0, peak_cpu_m=300.0)
    assert pod_peak_cpu_m(p) == 800.0


# D02: the back-off a workload is told (log event=backoff, scaleahead_workload_backoff_seconds) is


def test_the_back_off_doubles_and_stops_at_its_cap():
    b = Backoff(10.0, 300.0)
    waits = [b.failed("w", 1000.0) for _ in range(8)]
    assert waits == [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0]
    assert b.remaining("w", 1000.0) == 300.0


def test_the_back_off_lasts_at_least_the_wait_asked_for_within_its_cap():
    b = Backoff(10.0, 300.0)
    assert b.failed("w", 1000.0, at_least=45.0) == 45.0  # a throttling 429's Retry-After
    assert b.failed("w", 1000.0, at_least=5.0) == 20.0  # shorter than the doubling: the doubling
    assert b.failed("w", 1000.0, at_least=900.0) == 300.0  # never past loop.max_backoff_s
    assert b.remaining("w", 1000.0) == 300.0


def test_causal_gap_filling_carries_the_last_value_into_at_most_max_gap_steps():
    nan = math.nan
    out = fill_short_gaps_causal(np.array([1.0, nan, nan, nan, nan, nan, 5.0, nan]), max_gap=3)
    np.testing.assert_array_equal(out, [1.0, 1.0, 1.0, 1.0, nan, nan, 5.0, 5.0])
    lead = fill_short_gaps_causal(np.array([nan, nan, 2.0]), max_gap=3)
    np.testing.assert_array_equal(lead, [nan, nan, 2.0])  # nothing before: nothing to carry (no peeking)


# ST06: prune_plans checks each batch again for actions journaled 'planned' meanwhile (they keep


WEB = WorkloadRef("Deployment", "shop", "web")


def _plan(t):
    return Plan(t, (ScaleTo(WEB, 1, 2, Reason("forecast", "scale shop/web 1 -> 2")),))


def test_a_plan_whose_action_is_journaled_planned_during_the_prune_is_kept(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    store.prune_batch = 10  # batches of one plan
    ids = []
    for t in (100.0, 200.0, 300.0):
        pid, (aid,) = store.record_plan(_plan(t), source="loop")
        store.set_action_state(aid, "applied", "ok", t + 1)
        ids.append((pid, aid))
    calls = []

    def pause():
        if not calls:  # between the first and the second batch, plan 3's action is journaled again
            store.set_action_state(ids[2][1], "planned", "", 301.0)
        calls.append(1)

    store._pause_between_batches = pause
    store.prune_plans(before=5000.0)
    assert {a.plan_id for a in store.actions()} == {ids[2][0]}


def test_monotone_quantiles_uncross():
    out = monotone_quantiles({0.1: np.array([5.0, 1.0]), 0.5: np.array([3.0, 2.0]), 0.9: np.array([1.0, 3.0])})
    assert out[0.1].tolist() == [1.0, 1.0] and out[0.5].tolist() == [3.0, 2.0] and out[0.9].tolist() == [5.0, 3.0]


def test_padded_history_refuses_all_missing_history():
    s = Series("w", 0.0, 60.0, np.full(10, math.nan))
    with pytest.raises(DataError):
        padded_history(WEB, s, 600.0)
