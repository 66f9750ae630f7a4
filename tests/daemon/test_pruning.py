"""Store pruning on real SQLite and PostgreSQL: old forecasts and plans go, recent and open ones stay."""

from __future__ import annotations

import numpy as np

from scaleahead.types import Forecast, Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

WEB = WorkloadRef("Deployment", "shop", "web")


def _plan(t: float) -> Plan:
    return Plan(t, (ScaleTo(WEB, 1, 2, Reason("forecast", "scale shop/web 1 -> 2")),))


def test_pruning_deletes_old_forecasts_and_keeps_recent_ones(db_url: str) -> None:
    store = Store(db_url)
    fcs = [Forecast(WEB, t, 10.0, {0.5: np.ones(90), 0.9: np.ones(90) * 2}, "naive") for t in (0.0, 1000.0, 5000.0)]
    store.record_forecasts(fcs, force=True)
    assert store.prune_forecasts(before=2000.0) == 2
    assert [f.origin for f in store.forecasts(WEB)] == [5000.0]


def test_pruning_deletes_old_plans_with_their_actions_but_not_open_ones(db_url: str) -> None:
    store = Store(db_url)
    done_id, (done_action,) = store.record_plan(_plan(100.0), source="loop")
    store.set_action_state(done_action, "applied", "ok", 101.0)
    open_id, _ = store.record_plan(_plan(200.0), source="loop")  # still "planned": a crash to reconcile
    recent_id, (recent_action,) = store.record_plan(_plan(9000.0), source="loop")
    store.set_action_state(recent_action, "applied", "ok", 9001.0)
    assert store.prune_plans(before=5000.0) == (1, 1)
    assert store.count_plans() == 2
    remaining = {a.plan_id for a in store.actions()}
    assert remaining == {open_id, recent_id}
    assert done_id not in remaining
