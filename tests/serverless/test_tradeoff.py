"""The vectorized warm rule, the trade-off curves and the calibration on the history of ``bench serverless``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scaleahead.bench.serverless import (
    calibrate_cost,
    fixed_keepalive_warm,
    probabilities,
    run_policies,
    run_scaleahead,
    subset,
    tradeoff_curves,
    warm_from_probabilities,
)
from scaleahead.traces import FunctionsTrace

from .test_bench_serverless import HISTORY, MINUTES, cli, make_counts, write_trace


def trace_with_memory(counts: np.ndarray) -> FunctionsTrace:
    n = counts.shape[0]
    names = tuple(f"fn{i}" for i in range(n))
    memory = np.array([60.0 + 90.0 * i for i in range(n)])  # 60 MB to 510 MB: the break-even differs
    return FunctionsTrace(names, names, 0.0, counts, memory, np.full(n, np.nan))


@pytest.mark.parametrize(("min_probability", "cost"), [(0.0, 9000.0), (0.0, 500.0), (0.05, 2000.0), (0.02, None)])
def test_the_vectorized_rule_decides_exactly_what_the_planner_path_decides(
    min_probability: float, cost: float | None
) -> None:
    trace = trace_with_memory(make_counts())
    # a fixed cost (no warm-memory budget): the curves' rule; the budget is tested in test_warm_budget.py
    warm, _ = run_scaleahead(trace, HISTORY, min_probability, cold_start_cost=cost, keep_alive_budget_ratio=None)
    fast = warm_from_probabilities(
        probabilities(trace.counts, HISTORY, MINUTES), trace.memory_mb, min_probability, cost
    )
    assert warm.any() and not warm.all()
    assert np.array_equal(warm, fast)


@pytest.mark.parametrize("step_s", [10.0, 300.0])
def test_at_other_steps_the_vectorized_rule_is_the_planners_at_that_step(step_s: float) -> None:
    # Until 2026-12-07 the vectorized rule's break-even was m / (m + cost) at every step, the
    # planner's at 60-s steps only (review).
    trace = trace_with_memory(make_counts())
    warm, _ = run_scaleahead(trace, HISTORY, 0.0, step_s=step_s, cold_start_cost=2000.0, keep_alive_budget_ratio=None)
    prob = probabilities(trace.counts, HISTORY, MINUTES, step_s=step_s)
    fast = warm_from_probabilities(prob, trace.memory_mb, 0.0, 2000.0, step_s)
    assert warm.any() and not warm.all()
    assert np.array_equal(warm, fast)
    assert not np.array_equal(fast, warm_from_probabilities(prob, trace.memory_mb, 0.0, 2000.0))


def test_probabilities_at_minute_t_do_not_change_when_later_minutes_change() -> None:
    counts = make_counts()
    changed = counts.copy()
    changed[:, 70:] = np.random.default_rng(1).poisson(2.0, size=changed[:, 70:].shape)
    a = probabilities(counts, HISTORY, MINUTES)
    b = probabilities(changed, HISTORY, MINUTES)
    k = 70 - HISTORY
    assert np.array_equal(a[:, : k + 1], b[:, : k + 1])
    assert not np.array_equal(a, b)


def test_the_calibration_reads_only_the_history() -> None:
    counts = np.tile(make_counts(), (1, 3))  # 360 minutes
    changed = counts.copy()
    changed[:, 240:] = np.random.default_rng(5).poisson(1.0, size=changed[:, 240:].shape)
    a = calibrate_cost(trace_with_memory(counts), 240, warmup=60)
    b = calibrate_cost(trace_with_memory(changed), 240, warmup=60)
    assert a == b
    assert a.validation_minutes == (60, 240)
    assert a.wasted_memory_rel_fixed10 <= 1.0


def test_the_calibrated_cost_spends_at_most_what_fixed_keepalive_10m_spends_on_the_validation_minutes() -> None:
    trace = trace_with_memory(np.tile(make_counts(), (1, 3)))
    cal = calibrate_cost(trace, 240, warmup=60)
    val = trace.counts[:, 60:240]
    warm = warm_from_probabilities(
        probabilities(trace.counts[:, :240], 60, 240), trace.memory_mb, 0.0, cal.cold_start_cost_mb_minutes
    )
    ours = float(((warm & (val == 0)) * trace.memory_mb[:, None]).sum())
    fixed = fixed_keepalive_warm(trace.counts[:, :240], 60, 10)
    ref = float(((fixed & (val == 0)) * trace.memory_mb[:, None]).sum())
    assert ours <= ref
    assert cal.cold_start_cost_mb_minutes == pytest.approx(float(f"{cal.cold_start_cost_mb_minutes:.2g}"))


def test_a_higher_cold_start_cost_keeps_more_warm_and_never_adds_cold_starts() -> None:
    trace = trace_with_memory(make_counts())
    points = tradeoff_curves(trace, HISTORY, costs=[100.0, 1000.0, 10_000.0, 100_000.0])
    rel = [p.wasted_memory_rel_fixed10 for p in points]
    cold = [p.cold_starts for p in points]
    assert rel == sorted(rel) and cold == sorted(cold, reverse=True)
    assert cold[0] > cold[-1]


def test_the_peer_curves_contain_the_benchmark_s_own_fixed_and_hybrid_points() -> None:
    trace = trace_with_memory(make_counts())
    run = run_policies(trace, HISTORY)
    points = {(p.policy, p.value): p for p in tradeoff_curves(trace, HISTORY, peers=True)}
    assert points[("fixed_keepalive", 10)].wasted_memory_rel_fixed10 == pytest.approx(1.0)
    assert points[("fixed_keepalive", 10)].cold_starts == run.metrics["fixed_keepalive_10m"]["cold_starts"]
    assert points[("fixed_keepalive", 20)].cold_starts == run.metrics["fixed_keepalive_20m"]["cold_starts"]
    assert points[("hybrid_histogram", 240)].cold_starts == run.metrics["hybrid_histogram"]["cold_starts"]


def test_a_subset_takes_evenly_spaced_functions_with_their_memory() -> None:
    trace = trace_with_memory(make_counts())
    sub = subset(trace, 3)
    assert sub.names == ("fn0", "fn2", "fn4")
    assert np.array_equal(sub.counts, trace.counts[[0, 2, 4]])
    assert list(sub.memory_mb) == [60.0, 240.0, 420.0]


def test_the_command_writes_curves_and_the_calibration_and_marks_the_settings(tmp_path: Path) -> None:
    counts = np.tile(make_counts(), (1, 3))
    inv, mem = write_trace(tmp_path, counts)
    out = cli(
        "--trace", str(inv), "--memory", str(mem), "--history-minutes", "240", "--json", str(tmp_path / "r.json"),
        "--sweep-cost", "1000,20000", "--peer-curves", "--calibrate", "--functions", "4",
        "--cold-start-cost", "5000", "--plot", str(tmp_path / "p.png"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["functions"] == 4 and doc["params"]["functions"] == 4
    assert doc["params"]["cold_start_cost_mb_minutes"] == 5000.0
    costs = [p["cold_start_cost_mb_minutes"] for p in doc["tradeoff"] if p["policy"] == "scaleahead"]
    assert costs == [1000.0, 20000.0]
    assert {p["policy"] for p in doc["tradeoff"]} == {"scaleahead", "fixed_keepalive", "hybrid_histogram"}
    assert doc["calibration"]["validation_minutes"] == [120, 240]
    assert "calibrated coldStartCostMbMinutes" in out.stderr
    assert (tmp_path / "p.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep-cost", "1000,abc"], "--sweep-cost"),
        (["--sweep-cost", "-5"], "--sweep-cost"),
        (["--functions", "0"], "--functions"),
        (["--functions", "99"], "--functions 99"),
        (["--cold-start-cost", "-1"], "--cold-start-cost"),
    ],
)
def test_bad_curve_options_are_a_clear_error_with_exit_code_2(tmp_path: Path, args: list[str], message: str) -> None:
    inv, mem = write_trace(tmp_path, make_counts())
    out = cli("--trace", str(inv), "--memory", str(mem), "--json", str(tmp_path / "r.json"), *args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert not (tmp_path / "r.json").exists()
