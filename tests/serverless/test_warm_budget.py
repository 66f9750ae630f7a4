"""The warm-memory budget: the cold-start cost re-chosen online so warm pools spend what a keep-alive would."""

from __future__ import annotations

import json
import math
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from actuator.simulated_serverless import SimulatedServerless
from forecaster.baselines import Naive
from planner.warm import break_even_probability, warm_threshold
from planner.warm_budget import RECALIBRATE_STEPS, WarmCostBudget, budget_key, with_cold_start_cost
from scaleahead import warm_budgets
from scaleahead.bench.serverless import budget_warm, fixed_keepalive_warm, run_scaleahead, score, subset
from scaleahead.loop import Deps, run_once
from scaleahead.policy import Policy, parse_policies
from scaleahead.settings import Settings
from scaleahead.traces import FunctionsTrace, load_functions
from scaleahead.types import Series, SetWarmPool, WorkloadRef
from scaleahead.warm_budgets import WarmBudgetBook
from tests.serverless.conftest import FUNCTION_POLICY, FixedHistory, cli

HISTORY = 360


@pytest.fixture(scope="module")
def azure60() -> FunctionsTrace:
    """60 functions evenly spaced over the real azure-functions-1m day (bench serverless --functions 60)."""
    return subset(load_functions("azure-functions-1m"), 60)


_RUNS: dict[tuple[int, float, float | None], np.ndarray] = {}


def planner_path(trace: FunctionsTrace, cost: float, ratio: float | None) -> np.ndarray:
    """``run_scaleahead`` (forecaster -> planner -> actuator -> simulator), each setting run once per session."""
    key = (len(trace.names), cost, ratio)
    if key not in _RUNS:
        _RUNS[key], _ = run_scaleahead(trace, HISTORY, cold_start_cost=cost, keep_alive_budget_ratio=ratio)
    return _RUNS[key]


def rel_memory(trace: FunctionsTrace, warm: np.ndarray) -> float:
    test = trace.counts[:, HISTORY:]
    ref = score(test, fixed_keepalive_warm(trace.counts, HISTORY, 10), trace.memory_mb)["wasted_memory_mb_min"]
    own = score(test, warm, trace.memory_mb)["wasted_memory_mb_min"]
    assert ref and own is not None
    return float(own) / float(ref)


@pytest.mark.parametrize("initial", [1000.0, 80000.0])
def test_the_budget_spends_what_the_keep_alive_spends_whatever_cost_it_starts_from(
    azure60: FunctionsTrace, initial: float
) -> None:
    fixed = planner_path(azure60, initial, None)
    costs: list[float] = []
    budgeted, _ = run_scaleahead(
        azure60, HISTORY, cold_start_cost=initial, keep_alive_budget_ratio=1.0, costs_out=costs
    )
    # a fixed cost far from the budget spends far from the keep-alive's memory ...
    assert abs(rel_memory(azure60, fixed) - 1.0) > 0.3
    # ... the budget brings the test day to within a few percent of it, and moves the cost to do so
    assert rel_memory(azure60, budgeted) == pytest.approx(1.0, abs=0.05)
    assert costs[0] != initial and len(set(costs)) > 3


def test_a_smaller_ratio_spends_less_and_pays_in_cold_starts(azure60: FunctionsTrace) -> None:
    half = planner_path(azure60, 9000.0, 0.5)
    full = planner_path(azure60, 9000.0, 1.0)
    assert rel_memory(azure60, half) == pytest.approx(0.5, abs=0.05)
    test = azure60.counts[:, HISTORY:]
    cold = [score(test, w, azure60.memory_mb)["cold_starts"] for w in (half, full)]
    assert cold[0] > cold[1]  # type: ignore[operator]


def test_the_vectorized_budget_decides_exactly_what_the_planner_path_decides(azure60: FunctionsTrace) -> None:
    """The budget's trade-off curve (``budget_warm``) is the policy the planner, actuator and simulator run."""
    for ratio in (0.5, 1.0):
        np.testing.assert_array_equal(
            planner_path(azure60, 9000.0, ratio), budget_warm(azure60, HISTORY, ratio, 9000.0)
        )


def test_the_cost_only_depends_on_recorded_steps(azure60: FunctionsTrace) -> None:
    """No peeking: two budgets fed the same first steps choose the same costs, whatever comes later."""
    counts = azure60.counts
    rng = np.random.default_rng(3)
    prob = rng.random(counts.shape) * 0.2
    a = WarmCostBudget(azure60.memory_mb, 9000.0)
    b = WarmCostBudget(azure60.memory_mb, 9000.0)
    n = 4 * RECALIBRATE_STEPS
    seen_a, seen_b = [], []
    for t in range(n + 2 * RECALIBRATE_STEPS):
        later = t >= n
        a.record(prob[:, t], counts[:, t])
        b.record(prob[:, t] if not later else 1.0 - prob[:, t], counts[:, t] if not later else 5 * counts[:, t] + 1)
        seen_a.append(a.cost)
        seen_b.append(b.cost)
    assert seen_a[:n] == seen_b[:n]
    assert seen_a != seen_b  # what comes later does change later costs


def test_the_policy_cost_holds_until_enough_steps_are_recorded() -> None:
    budget = WarmCostBudget([100.0, 200.0], 9000.0)
    for _ in range(RECALIBRATE_STEPS - 1):
        budget.record(np.array([0.5, 0.01]), np.array([1, 0]))
    assert budget.cost == 9000.0 and budget.status().calibrations == 0
    assert "the policy's" in budget.status().sentence()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory_mb": [100.0], "initial_cost": 9000.0, "ratio": 0.0}, "ratio > 0"),
        ({"memory_mb": [100.0], "initial_cost": 0.0}, "initial_cost > 0"),
        ({"memory_mb": [100.0, math.nan], "initial_cost": 9000.0}, "positive, finite"),
    ],
)
def test_bad_parameters_are_refused_with_what_is_wrong(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WarmCostBudget(**kwargs)  # type: ignore[arg-type]


def test_a_step_with_the_wrong_number_of_functions_is_refused() -> None:
    budget = WarmCostBudget([100.0, 200.0], 9000.0)
    with pytest.raises(ValueError, match="one value per function"):
        budget.record(np.array([0.1]), np.array([1, 0]))


def test_nan_probabilities_and_counts_count_as_none() -> None:
    budget = WarmCostBudget([100.0], 9000.0)
    budget.record(np.array([math.nan]), np.array([math.nan]))
    assert budget.status().steps == 1


# --- the control loop -------------------------------------------------------------------------


def loop_setup(ratio: str = "1.0", n: int = 40) -> tuple[list[Policy], dict[WorkloadRef, Series]]:
    fns = subset(load_functions("azure-functions-1m"), n)
    policies = [
        parse_policies(
            FUNCTION_POLICY.format(
                name=f"f{i}", warm=f"memoryMbPerInstance: {float(fns.memory_mb[i])}, keepAliveBudgetRatio: {ratio}"
            )
        )[0]
        for i in range(n)
    ]
    series = {
        p.workload: Series(p.workload.name, 0.0, 60.0, fns.counts[i].astype(np.float64)) for i, p in enumerate(policies)
    }
    return policies, series


def test_the_loop_plans_with_the_budgets_cost_and_says_so() -> None:
    policies, series = loop_setup()
    target = SimulatedServerless(
        [p.workload for p in policies], [p.spec.warm_pool.memory_mb_per_instance for p in policies], 0.0, 60.0
    )
    deps = Deps(FixedHistory(series), Naive(), target, None, policies)
    report = run_once(deps, Settings(), now=720 * 60.0)
    notes = [n for n in report.plan.notes if "warm-memory budget" in n]
    assert len(notes) == 1 and "40 functions" in notes[0] and "re-chosen" in notes[0]
    warm = [a for a in report.plan.actions if isinstance(a, SetWarmPool)]
    assert len(warm) == 40
    costs = {
        a.reason.details.get("cold_start_cost_mb_min") for a in warm if "cold_start_cost_mb_min" in a.reason.details
    }
    assert len(costs) == 1 and costs != {9000.0}  # one cost for the group, the budget's


def test_the_book_rebuilds_once_per_period_and_only_from_the_past() -> None:
    policies, series = loop_setup(n=20)
    book = WarmBudgetBook()
    now = 720 * 60.0
    first, _ = book.apply(policies, series, now)
    again, _ = book.apply(policies, series, now + 60.0)  # same hour: the cached copies
    assert all(a is b for a, b in zip(first, again, strict=True))
    # the daemon re-reads its policies every 30 s: equal copies are the same policies, no rebuild
    # (a rebuild from later data would choose another cost within the hour)
    later = {ref: s for ref, s in series.items()}
    later = {
        ref: Series(s.name, s.start, s.step_s, np.where(s.times() >= now, 50.0, s.values)) for ref, s in later.items()
    }
    copies, _ = book.apply([p.model_copy(deep=True) for p in policies], later, now + 1800.0)
    assert all(a is b for a, b in zip(first, copies, strict=True))
    future = {
        ref: Series(s.name, s.start, s.step_s, np.where(s.times() >= now, 50.0, s.values)) for ref, s in series.items()
    }
    fresh, _ = WarmBudgetBook().apply(policies, future, now)
    assert [p.spec.warm_pool.cold_start_cost_mb_minutes for p in fresh] == [
        p.spec.warm_pool.cold_start_cost_mb_minutes for p in first
    ]


def test_the_loop_hands_the_budget_the_calibration_it_fitted_and_the_budget_is_the_same() -> None:
    """The budget's replay reuses the hour's recurrence calibration instead of fitting it again."""
    policies, series = loop_setup(n=60)
    target = SimulatedServerless(
        [p.workload for p in policies], [p.spec.warm_pool.memory_mb_per_instance for p in policies], 0.0, 60.0
    )
    deps = Deps(FixedHistory(series), Naive(), target, None, policies)
    now = 720 * 60.0
    handed = deps.invocation_calibrations
    run_once(deps, Settings(), now=now)
    given = handed.current(now)
    assert len(given) == 1 and next(iter(given.values())) is not None
    (key, coef), *_ = given.items()
    assert key == (60.0, tuple(p.workload for p in policies))
    reused, _ = WarmBudgetBook().apply(policies, series, now, given)
    fitted, _ = WarmBudgetBook().apply(policies, series, now)
    costs = [[p.spec.warm_pool.cold_start_cost_mb_minutes for p in ps] for ps in (reused, fitted)]
    assert costs[0] == costs[1] and costs[0][0] != 9000.0
    # a different calibration changes the replay (so the one handed over is the one used)
    other = {key: None}
    hazard_only, _ = WarmBudgetBook().apply(policies, series, now, other)
    assert [p.spec.warm_pool.cold_start_cost_mb_minutes for p in hazard_only] != costs[0]
    assert handed.current(now + 3600.0) == {}  # the next hour refits


def _budget_costs(policies: list[Policy]) -> list[float | None]:
    return [p.spec.warm_pool.cold_start_cost_mb_minutes for p in policies]


def test_a_process_started_mid_period_plans_with_the_cost_of_one_running_since_before_it() -> None:
    """The rebuild replays the day before the period's start, not before the first cycle the process
    ran in it (found in review: 81,000 MB-min running, 62,000 after a restart 39 minutes in)."""
    policies, series = loop_setup(n=60)
    hour = 3600.0
    t1, t2 = 12 * hour + 60.0, 12 * hour + 40 * 60.0  # the same period (hour 12), t1 in its second step
    running = WarmBudgetBook()
    running.apply(policies, series, t1)
    kept, kept_notes = running.apply(policies, series, t2)
    restarted, restarted_notes = WarmBudgetBook().apply(policies, series, t2)
    assert _budget_costs(kept) == _budget_costs(restarted) and _budget_costs(kept)[0] != 9000.0
    assert kept_notes == restarted_notes
    # the loop, handing the hour's calibration over: a process running since the period's first step
    # and one started 40 minutes into it plan with the same cost
    memory = [p.spec.warm_pool.memory_mb_per_instance for p in policies]

    def cost_at(*times: float) -> float:
        target = SimulatedServerless([p.workload for p in policies], memory, 0.0, 60.0)
        deps = Deps(FixedHistory(series), Naive(), target, None, policies)
        for t in times:
            report = run_once(deps, Settings(), now=t, dry_run=True)
        costs = {
            a.reason.details["cold_start_cost_mb_min"]
            for a in report.plan.actions
            if isinstance(a, SetWarmPool) and "cold_start_cost_mb_min" in a.reason.details
        }
        assert len(costs) == 1
        return float(costs.pop())

    assert cost_at(12 * hour, t2) == cost_at(t2) == _budget_costs(kept)[0]


def test_a_policy_without_a_budget_keeps_its_own_cost() -> None:
    policies, series = loop_setup(ratio="null", n=5)
    assert budget_key(policies[0], 60.0) is None
    out, notes = WarmBudgetBook().apply(policies, series, 720 * 60.0)
    assert notes == () and all(a is b for a, b in zip(out, policies, strict=True))


def test_with_cold_start_cost_changes_only_the_cost() -> None:
    policies, _ = loop_setup(n=1)
    copy = with_cold_start_cost(policies[0], 1234.0)
    assert copy.spec.warm_pool.cold_start_cost_mb_minutes == 1234.0
    assert copy.spec.model_dump(exclude={"warm_pool"}) == policies[0].spec.model_dump(exclude={"warm_pool"})
    assert policies[0].spec.warm_pool.cold_start_cost_mb_minutes == 9000.0


def test_bench_serverless_sweep_budget_gives_the_budget_curve(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    done = cli(
        "--trace",
        "azure-functions-1m",
        "--functions",
        "50",
        "--json",
        str(out),
        "--sweep-budget",
        "0.5,1.0",
        "--sweep-cost",
        "",
        "--sweep",
        "",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    used = result["params"]["cold_start_cost_used"]  # the default policy runs with the budget
    assert used["min"] <= used["first"] <= used["max"] and used["changes"] >= 1
    points = [p for p in result["tradeoff"] if p["policy"] == "scaleahead_budget"]
    assert [p["keep_alive_budget_ratio"] for p in points] == [0.5, 1.0]
    assert points[0]["wasted_memory_rel_fixed10"] < points[1]["wasted_memory_rel_fixed10"]
    assert points[0]["cold_starts"] > points[1]["cold_starts"]
    bad = cli("--trace", "azure-functions-1m", "--json", str(out), "--budget-ratio", "-1")
    assert bad.returncode != 0 and "--budget-ratio -1" in bad.stderr and "Traceback" not in bad.stderr


def test_a_function_first_seen_mid_period_counts_as_never_called_before_it() -> None:
    """A function whose history starts after its budget period began (deployed 10 minutes into the
    hour) has no call in the day the budget replays: its row is zeros, and its group keeps the
    budget (found in review: the rebuild raised, and every group fell back to its policy's cost)."""
    policies, series = loop_setup(n=21)
    hour = 3600.0
    now, deployed = 12 * hour + 40 * 60.0, 12 * hour + 10 * 60.0
    new = policies[-1].workload
    full = series[new]
    i0 = int(deployed / 60.0)
    late = dict(series)
    late[new] = Series(full.name, deployed, 60.0, full.values[i0:])
    # the same function with an idle history until then: the day before the hour reads the same
    idle = dict(series)
    idle[new] = Series(full.name, 0.0, 60.0, np.concatenate([np.zeros(i0), full.values[i0:]]))
    got, notes = WarmBudgetBook().apply(policies, late, now)
    want, want_notes = WarmBudgetBook().apply(policies, idle, now)
    assert _budget_costs(got) == _budget_costs(want) and _budget_costs(got)[0] != 9000.0
    assert notes == want_notes and "21 functions" in notes[0]
    target = SimulatedServerless(
        [p.workload for p in policies], [p.spec.warm_pool.memory_mb_per_instance for p in policies], 0.0, 60.0
    )
    report = run_once(Deps(FixedHistory(late), Naive(), target, None, policies), Settings(), now=now, dry_run=True)
    assert "warm_budget" not in report.errors
    assert [n for n in report.plan.notes if n.startswith("warm-memory budget")] == list(notes)


def test_one_groups_failed_rebuild_leaves_the_other_groups_their_budgets() -> None:
    """A rebuild that raises costs its own group the budget this cycle (its policies' own cost, a
    note and an error saying why), not every group's; the next cycle tries it again."""
    policies, series = loop_setup(n=20)
    # the last 10 functions budget at 0.8x: a second group
    for i in range(10, 20):
        pool = policies[i].spec.warm_pool.model_copy(update={"keep_alive_budget_ratio": 0.8})
        policies[i] = policies[i].model_copy(update={"spec": policies[i].spec.model_copy(update={"warm_pool": pool})})
    now = 720 * 60.0
    want, _ = WarmBudgetBook().apply(policies, series, now)
    real = warm_budgets.rebuild

    def failing(
        counts: np.ndarray, memory: list[float], step: float, key: tuple[float, ...], *a: object, **k: object
    ) -> object:
        if key[1] == 0.8:
            raise ValueError("bad data (injected)")
        return real(counts, memory, step, key, *a, **k)

    book = WarmBudgetBook()
    with mock.patch.object(warm_budgets, "rebuild", failing):
        got, notes = book.apply(policies, series, now)
    assert _budget_costs(got[:10]) == _budget_costs(want[:10]) and _budget_costs(want)[0] != 9000.0
    assert all(a is b for a, b in zip(got[10:], policies[10:], strict=True))  # their own cost
    assert len(notes) == 2 and any("rebuild failed (bad data (injected))" in n for n in notes)
    (why,) = book.errors.values()
    assert why == "bad data (injected)"
    # the loop reports it and plans the healthy group with its budget
    target = SimulatedServerless(
        [p.workload for p in policies], [p.spec.warm_pool.memory_mb_per_instance for p in policies], 0.0, 60.0
    )
    deps = Deps(FixedHistory(series), Naive(), target, None, policies)
    with mock.patch.object(warm_budgets, "rebuild", failing):
        report = run_once(deps, Settings(), now=now, dry_run=True)
    assert "bad data (injected)" in report.errors["warm_budget"]
    assert any("re-chosen" in n for n in report.plan.notes if n.startswith("warm-memory budget"))
    # the next cycle, with the data repaired, rebuilds the failed group
    again, _ = book.apply(policies, series, now + 60.0)
    assert _budget_costs(again) == _budget_costs(want) and book.errors == {}


# --- the step (review 2026-12-07: the budget replayed m / (m + cost) at every step) --------------


def _function_at(step_s: float, memory_mb: float, cost: float) -> Policy:
    return Policy.model_validate(
        {
            "metadata": {"name": "fn", "namespace": "fns"},
            "spec": {
                "target": {"kind": "KnativeService", "name": "fn", "namespace": "fns"},
                "demand": {"query": "q", "stepSeconds": step_s},
                "capacityPerReplica": 1.0,
                "workloadClass": "function",
                "warmPool": {"enabled": True, "memoryMbPerInstance": memory_mb, "coldStartCostMbMinutes": cost},
            },
        }
    )


def test_at_60_s_steps_the_budget_replays_exactly_the_rule_it_replayed_before() -> None:
    """Nothing changes at 60-s steps (so ``bench serverless``'s results stand): the threshold is
    m / (m + cost) to the last bit, for any memory, including those where m * 60 / 60 != m."""
    rng = np.random.default_rng(11)
    memory = np.concatenate([[78.0, 128.0, 141.0, 994.0], rng.uniform(1.0, 5000.0, 2000), rng.uniform(0, 1, 500)])
    assert np.any(memory * 60.0 / 60.0 != memory)  # the values that would move by an ulp are among them
    budget = WarmCostBudget(memory, 9000.0)
    for cost in (1.0, 9000.0, 81000.0, 1e7):
        old = memory / (memory + cost)
        assert np.array_equal(budget.threshold(cost), old)
        assert np.array_equal(WarmCostBudget(memory, 9000.0, step_s=60.0).threshold(cost), old)
        # and the planner's, which computed m * 60 / 60 from 2026-12-06 (an ulp off for some m)
        assert all(break_even_probability(float(m), cost, 60.0) == o for m, o in zip(memory, old, strict=True))


@pytest.mark.parametrize("step_s", [10.0, 60.0, 300.0])
def test_the_budget_replays_the_planners_break_even_at_the_functions_step(step_s: float) -> None:
    from planner.warm import decide_warm_pool
    from scaleahead.types import InvocationForecast, WorkloadState

    pol = _function_at(step_s, 200.0, 9000.0)
    budget = WarmCostBudget([200.0], 9000.0, step_s=step_s)
    assert budget.threshold(9000.0)[0] == warm_threshold(pol.spec)
    now = 1_000_020.0
    for p in (0.002, 0.0037, 0.004, 0.01, 0.0217, 0.022, 0.09, 0.1, 0.11):
        fc = InvocationForecast(pol.workload, now, step_s, np.full(5, p), 60.0, "t")
        planned = decide_warm_pool(pol.workload, pol.spec, WorkloadState(pol.workload, 0, 0), fc, now).action
        assert bool(budget.warm(np.array([p]))[0]) == (planned.to_instances == 1), (step_s, p)


def test_at_10_s_steps_the_budget_chooses_a_sixth_of_the_cost_on_the_same_steps() -> None:
    # At 10-s steps an instance idles a sixth of the MB-minutes per step: the cost at which the rule
    # keeps the same instances warm is a sixth (up to the rounding to two significant digits).
    rng = np.random.default_rng(4)
    memory = [100.0, 250.0, 600.0]
    a, b = WarmCostBudget(memory, 9000.0), WarmCostBudget(memory, 9000.0, step_s=10.0)
    for _ in range(3 * RECALIBRATE_STEPS):
        prob = rng.random(3) * 0.1
        counts = (rng.random(3) < prob * 3).astype(np.int64)
        a.record(prob, counts, warm=a.warm(prob))
        b.record(prob, counts, warm=a.warm(prob))  # the same steps and the same warm pools
    assert a.calibrations == b.calibrations == 3
    assert b.cost * 6 == pytest.approx(a.cost, rel=0.1) and b.cost != a.cost


def test_the_rebuild_gives_the_budget_its_groups_step() -> None:
    counts = np.random.default_rng(2).poisson(0.2, size=(3, 200))
    with mock.patch.object(warm_budgets, "WarmCostBudget", wraps=WarmCostBudget) as built:
        warm_budgets.rebuild(counts, [100.0, 200.0, 300.0], 10.0, (10.0, 1.0, 600.0, 9000.0))
    assert built.call_args.kwargs["step_s"] == 10.0


def test_a_step_that_is_not_a_positive_finite_number_is_refused() -> None:
    for step in (0.0, -60.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="step_s must be a positive, finite"):
            WarmCostBudget([100.0], 9000.0, step_s=step)
