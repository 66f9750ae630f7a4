"""The ``outcomes`` table on SQLite and PostgreSQL: written, summed by window and rollout, pruned."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from storage import Store
from storage.store import ValueTooLong


def _row(workload: str, bucket: float, rollout_id: int = 0, arm: str = "champion", **values: float) -> dict:  # type: ignore[type-arg]
    row = {
        "workload": workload,
        "bucket": bucket,
        "rollout_id": rollout_id,
        "arm": arm,
        "model_version_id": None,
        "steps": 0,
        "seconds": 0.0,
        "short_steps": 0,
        "fallback_steps": 0,
        "capacity_seconds": 0.0,
        "demand_seconds": 0.0,
        "error_abs": 0.0,
        "error_actual": 0.0,
        "forecasts": 0,
    }
    row.update(values)
    return row


def test_outcome_rows_are_summed_per_workload_rollout_and_arm_within_the_window(db_url: str) -> None:
    store = Store(db_url)
    store.record_outcomes(
        [
            _row("Deployment/a/web", 0.0, steps=30, short_steps=1, capacity_seconds=600.0, demand_seconds=400.0),
            _row("Deployment/a/web", 300.0, steps=30, short_steps=2, capacity_seconds=600.0, demand_seconds=500.0),
            _row("Deployment/a/web", 300.0, error_abs=5.0, error_actual=50.0, forecasts=1),  # a score, later
            _row("Deployment/a/web", 600.0, 7, "challenger", steps=30, short_steps=4),
            _row("Deployment/a/api", 300.0, 7, "champion", steps=10, capacity_seconds=1.5),
            _row("Deployment/a/api", 900.0, steps=99),  # after the window
        ]
    )
    rows = store.outcome_sums(300.0, 900.0)
    got = {(r["workload"], r["rollout_id"], r["arm"]): r for r in rows}
    assert set(got) == {
        ("Deployment/a/web", 0, "champion"),
        ("Deployment/a/web", 7, "challenger"),
        ("Deployment/a/api", 7, "champion"),
    }
    web = got["Deployment/a/web", 0, "champion"]
    assert (web["steps"], web["short_steps"], web["forecasts"]) == (30, 2, 1)
    assert (web["capacity_seconds"], web["demand_seconds"], web["error_abs"], web["error_actual"]) == (
        600.0,
        500.0,
        5.0,
        50.0,
    )
    assert isinstance(web["steps"], int) and isinstance(web["error_abs"], float)
    only7 = store.outcome_sums(0.0, rollout_id=7)
    assert {(r["workload"], r["arm"]) for r in only7} == {
        ("Deployment/a/web", "challenger"),
        ("Deployment/a/api", "champion"),
    }
    assert [r["workload"] for r in store.outcome_sums(0.0, workloads={"Deployment/a/api"})] == ["Deployment/a/api"] * 2
    assert store.outcome_sums(0.0, 300.0)[0]["steps"] == 30  # the end is exclusive


def test_outcomes_are_pruned_by_bucket_in_batches(db_url: str) -> None:
    store = Store(db_url)
    store.prune_batch = 3
    store.record_outcomes([_row(f"Deployment/a/w{i}", float(b), steps=1) for i in range(4) for b in (0, 300, 600)])
    assert store.prune_outcomes(600.0) == 8
    assert {r["workload"] for r in store.outcome_sums(0.0)} == {f"Deployment/a/w{i}" for i in range(4)}
    assert all(r["steps"] == 1 for r in store.outcome_sums(0.0))
    assert store.prune_outcomes(600.0) == 0


def test_an_outcome_row_too_long_for_its_column_writes_nothing(db_url: str) -> None:
    store = Store(db_url)
    with pytest.raises(ValueTooLong, match="outcomes.workload"):
        store.record_outcomes([_row("Deployment/a/ok", 0.0, steps=1), _row("D/" + "x" * 600, 0.0, steps=1)])
    assert store.outcome_sums(0.0) == []


def test_measured_outcomes_take_the_current_shares_window_and_the_champions_baseline(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import math

    from actuator.rollouts import CanaryParams, RolloutBook, assign
    from scaleahead.outcomes import measured_outcomes

    store = Store(f"sqlite:///{tmp_path / 'o.db'}")
    book = RolloutBook(store)
    t0 = 36_000.0  # the rollout starts here; its window is 1,200 s
    rid = book.start("default", "canary", "a", "b", t0, canary=CanaryParams(steps=(0.25, 0.5, 1.0), window_s=1200.0))
    r = store.rollout(rid)
    names = [f"Deployment/s/w{i}" for i in range(40)]
    salt = str(r.params["salt"])
    first = {n: assign(n, 0.25, salt) for n in names}
    second = {n: assign(n, 0.5, salt) for n in names}
    moved = [n for n in names if first[n] != second[n]]
    assert moved
    rows = []
    for n in names:
        rows.append(
            _row(n, t0 - 1200.0, steps=10, seconds=1200.0, short_steps=1, capacity_seconds=20.0, demand_seconds=10.0)
        )  # baseline
        rows.append(
            _row(n, t0 - 2400.0, steps=10, short_steps=9, capacity_seconds=99.0, demand_seconds=1.0)
        )  # before it
        rows.append(_row(n, t0 - 900.0, 3, "challenger", steps=10, short_steps=10))  # another rollout's challenger then
        rows.append(
            _row(
                n,
                t0,
                rid,
                first[n],
                steps=10,
                seconds=1200.0,
                short_steps=5,
                capacity_seconds=50.0,
                demand_seconds=10.0,
            )
        )
        rows.append(
            _row(
                n,
                t0 + 1500.0,
                rid,
                second[n],
                steps=20,
                seconds=1200.0,
                short_steps=2,
                capacity_seconds=60.0,
                demand_seconds=20.0,
            )
        )
        rows.append(_row(n, t0 + 1500.0, rid, second[n], error_abs=1.0, error_actual=4.0, forecasts=2))
    rows.append(_row(moved[0], t0 + 1500.0, rid, first[moved[0]], steps=3, short_steps=3))  # the loop lagged a minute
    store.record_outcomes(rows)
    # the first window: at 25 %, from the start
    arms, w = measured_outcomes(store, r, t0 + 1200.0)
    assert (w.start, w.end, w.baseline_start, w.baseline_end) == (t0, t0 + 1200.0, t0 - 1200.0, t0)
    assert {o.workload for o in arms["challenger"]} == {n for n in names if first[n] == "challenger"}
    o = arms["champion"][0]
    assert (o.violation_fraction, o.cost_per_demand) == (0.5, 5.0)
    assert math.isnan(o.forecast_error)  # nothing scored in that window
    # the baseline is the champion's hour... here window_s: [t0 - 1200, t0), not another rollout's arm
    assert (o.baseline_violation_fraction, o.baseline_cost_per_demand) == (0.1, 2.0)
    # the canary advanced to 50 % at t0 + 1300: its window starts there
    store.update_rollout(r, t0 + 1300.0, share=0.5, results={"history": [{"at": t0 + 1300.0, "decision": "advance"}]})
    r2 = store.rollout(rid)
    arms, w = measured_outcomes(store, r2, t0 + 2700.0)
    assert w.start == t0 + 1500.0 and w.other_arm == (moved[0],)  # its first whole bucket
    assert {o.workload for o in arms["challenger"]} == {n for n in names if second[n] == "challenger"}
    assert len(arms["champion"]) + len(arms["challenger"]) == len(names)
    o = next(x for x in [*arms["champion"], *arms["challenger"]] if x.workload == moved[0])
    assert (o.violation_fraction, o.cost_per_demand, o.forecast_error) == (0.1, 3.0, 0.25)  # its lagged row left out


def test_the_baseline_is_the_same_hours_of_an_earlier_day_for_every_workload_or_for_none(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import math

    from actuator.rollouts import CanaryParams, RolloutBook, assign
    from scaleahead.outcomes import measured_outcomes

    day = 86400.0

    def run(day_before_for: Callable[[str, str], bool]):  # type: ignore[no-untyped-def]
        store = Store(f"sqlite:///{tmp_path / f'o{len(list(tmp_path.iterdir()))}.db'}")
        t0 = 10 * day + 3600.0  # the rollout starts at 01:00
        params = CanaryParams(steps=(0.5, 1.0), window_s=3600.0)
        rid = RolloutBook(store).start("default", "canary", "a", "b", t0, canary=params)
        r = store.rollout(rid)
        salt = str(r.params["salt"])
        names = [f"Deployment/s/w{i}" for i in range(12)]
        arm = {n: assign(n, 0.5, salt) for n in names}
        rows = []
        for n in names:
            # the window (its first hour) and, after it, hours the canary's decision is not about
            rows.append(
                _row(
                    n,
                    t0,
                    rid,
                    arm[n],
                    steps=360,
                    seconds=3600.0,
                    short_steps=36,
                    capacity_seconds=40.0,
                    demand_seconds=10.0,
                )
            )
            rows.append(_row(n, t0 + 7200.0, rid, arm[n], steps=360, seconds=3600.0, short_steps=360))
            rows.append(
                _row(
                    n,
                    t0 - 3600.0,
                    steps=360,
                    seconds=3600.0,
                    short_steps=180,
                    capacity_seconds=90.0,
                    demand_seconds=10.0,
                )
            )
            if day_before_for(n, arm[n]):
                rows.append(
                    _row(
                        n,
                        t0 - day,
                        steps=360,
                        seconds=3600.0,
                        short_steps=18,
                        capacity_seconds=30.0,
                        demand_seconds=10.0,
                    )
                )
        store.record_outcomes(rows)
        return measured_outcomes(store, r, t0 + 27 * 3600.0), arm, t0

    # every workload but one has the day before: that is every workload's baseline (none mixed)
    (arms, w), arm, t0 = run(lambda n, a: n != "Deployment/s/w0")
    assert (w.start, w.end) == (t0, t0 + 3600.0)  # the canary's window, not the 27 hours since
    assert (w.day_before_start, w.day_before_end) == (t0 - day, t0 + 3600.0 - day)
    assert w.baseline == "day_before" and w.baselines == 11
    by = {o.workload: o for a in arms.values() for o in a}
    assert (by["Deployment/s/w1"].violation_fraction, by["Deployment/s/w1"].baseline_violation_fraction) == (0.1, 0.05)
    assert by["Deployment/s/w1"].baseline_cost_per_demand == 3.0
    assert math.isnan(by["Deployment/s/w0"].baseline_violation_fraction)  # left out of the paired test
    assert w.assigned == {
        "champion": sum(a == "champion" for a in arm.values()),
        "challenger": sum(a == "challenger" for a in arm.values()),
    }
    # the challenger's workloads ran yesterday too (no champion rows then): the hour before the start for all
    (arms, w), arm, _ = run(lambda n, a: a == "champion")
    assert w.baseline == "before_start" and w.baselines == 12
    assert all(
        o.baseline_violation_fraction == 0.5 and o.baseline_cost_per_demand == 9.0 for a in arms.values() for o in a
    )
