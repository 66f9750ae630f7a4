"""`scaleahead bench rebalance`: the snapshot from the real Alibaba trace, and the command end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rebalance_builders import cluster, node, pod

import planner.rebalance as planner_rebalance
import scaleahead.commands.rebalance as cli_defaults
from planner.rebalance import interference_pairs
from scaleahead.bench.rebalance import (
    HOLD_S,
    NODE_CPU_M,
    POLICIES,
    STEP_S,
    TRADEOFF_BUDGETS,
    Snapshot,
    build_snapshot,
    cycles,
    resample,
    run_bench,
)
from scaleahead.commands.rebalance import parse_seeds
from scaleahead.errors import UserError
from scaleahead.types import PodDisruptionBudget

METRICS = {
    "nodes_freed",
    "moves",
    "interference_pairs_before",
    "interference_pairs_after",
    "peak_overcommit",
    "forecast_peak_overcommit",
    "pdb_violations",
}


def test_resampling_holds_a_sample_for_at_most_the_hold_time_and_averages_per_step() -> None:
    times = np.array([0.0, 60.0, 300.0 + 10.0])
    values = np.array([10.0, 20.0, 40.0])
    out = resample(times, values, 3 + HOLD_S // STEP_S)
    # step 0: 0..50 s at 10, 60..290 s at 20 -> (6*10 + 24*20) / 30
    assert out[0] == (6 * 10 + 24 * 20) / 30
    # step 1: 300 s holds 20, 310.. holds 40
    assert out[1] == (20 + 29 * 40) / 30
    assert np.isnan(out[-1])  # more than HOLD_S after the last sample: missing, not zero


def test_the_snapshot_is_reproducible_from_its_seed_and_uses_only_history_for_the_peak() -> None:
    a, b, other = build_snapshot(7), build_snapshot(7), build_snapshot(8)
    assert a.state == b.state
    assert a.state.pods != other.state.pods
    assert "m_1947" not in a.machines and len(a.state.nodes) == 15
    for p in a.state.pods:
        assert 0 < p.cpu_request_m <= p.peak_cpu_m + 10
    # node usage is the machine's usage: the pods of a node add up to at most the node
    for n in a.state.nodes:
        load = sum(a.future_usage[f"{p.namespace}/{p.name}"] for p in a.state.pods if p.node == n.name)
        assert float(np.max(load)) <= NODE_CPU_M * 1.0 + 1e-6
    assert interference_pairs(a.state.pods) > 0
    assert a.state.pdbs


def test_bench_rebalance_writes_the_evaluation_json_and_a_plot(tmp_path: Path) -> None:
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaleahead.cli",
            "bench",
            "rebalance",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
            "--seeds",
            "6-7",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(out_json.read_text())
    assert {"trace", "resolution_s", "split", "policies"} <= doc.keys()
    assert set(doc["policies"]) == set(POLICIES)
    for metrics in doc["policies"].values():
        assert metrics.keys() >= METRICS
    sa = doc["policies"]["scaleahead"]
    assert sa["peak_overcommit"] == 0 and sa["forecast_peak_overcommit"] == 0
    assert sa["pdb_violations"] == 0
    assert doc["policies"]["none"]["moves"] == 0
    assert out_png.read_bytes()[:4] == b"\x89PNG"
    assert "move " in run.stdout
    assert doc["targets"]["reference"] == "descheduler_high_node_utilization"
    assert doc["targets"]["zero_overcommit_and_pdb_violations"] is True
    for curve in ("tradeoff", "tradeoff_separation_only"):
        assert [r["max_moves"] for r in doc[curve]] == list(TRADEOFF_BUDGETS)
        assert all(r["moves"] <= r["max_moves"] and r["peak_overcommit"] == 0 for r in doc[curve])
    assert all(r["nodes_freed"] == 0 for r in doc["tradeoff_separation_only"])
    cycle_moves = [r["moves"] for r in doc["cycles"]]  # cumulative, at most the budget per cycle
    assert cycle_moves == sorted(cycle_moves) and cycle_moves[0] == sa["moves"]
    assert all(r["peak_overcommit"] == 0 and r["pdb_violations"] == 0 for r in doc["cycles"])
    seeds = doc["seeds"]
    assert seeds["seeds"] == [6, 7]
    moves = [seeds["per_seed"][s]["scaleahead"]["moves"] for s in ("6", "7")]
    assert seeds["summary"]["scaleahead"]["moves"] == {"mean": sum(moves) / 2, "min": min(moves), "max": max(moves)}
    assert seeds["per_seed"]["7"]["scaleahead"] == sa
    assert "seeds where scaleahead frees at least" in run.stdout


def test_bench_rebalance_refuses_bad_options_and_writes_nothing(tmp_path: Path) -> None:
    out_json = tmp_path / "r.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaleahead.cli",
            "bench",
            "rebalance",
            "--json",
            str(out_json),
            "--plot",
            str(tmp_path / "r.jpg"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2
    assert ".png" in run.stderr + run.stdout
    assert not out_json.exists()


def test_on_the_default_snapshot_the_default_frees_the_references_nodes_with_half_its_evictions() -> None:
    doc, moves = run_bench()
    sa, ref = doc["policies"]["scaleahead"], doc["policies"]["descheduler_high_node_utilization"]
    assert sa["nodes_freed"] >= ref["nodes_freed"] >= 1
    assert 2 * sa["moves"] <= ref["moves"]
    assert sa["interference_pairs_after"] <= sa["interference_pairs_before"]
    assert sa["peak_overcommit"] == 0 and sa["pdb_violations"] == 0
    assert all("expected gain" in m.reason.message for m in moves["scaleahead"])


def test_the_command_line_defaults_are_the_planners() -> None:
    assert cli_defaults.DEFAULT_MAX_MOVES == planner_rebalance.DEFAULT_MAX_MOVES
    assert cli_defaults.DEFAULT_MAX_PEAK_FRACTION == planner_rebalance.DEFAULT_MAX_PEAK_FRACTION


def test_seeds_are_read_as_ranges_and_lists_and_bad_ones_are_refused() -> None:
    assert parse_seeds("1-3,7") == [1, 2, 3, 7]
    assert parse_seeds("7, 7") == [7]
    for bad in ("", "a-b", "3,x", "-1"):
        with pytest.raises(UserError):
            parse_seeds(bad)


def test_cycles_renew_pdb_budgets_so_a_later_cycle_moves_what_an_earlier_one_could_not() -> None:
    # two cart pods each share a node with two etl pods; the cart PDB allows one disruption per
    # plan: the first cycle separates one cart pod, the second the other
    state = cluster(
        [node("a"), node("b"), node("c")],
        [
            pod("cart-1", "a", 1000, cls="latency-critical"),
            pod("etl-1", "a", 2000, cls="cpu-bound", owner=""),
            pod("etl-2", "a", 2000, cls="cpu-bound", owner=""),
            pod("cart-2", "b", 1000, cls="latency-critical"),
            pod("etl-3", "b", 2000, cls="cpu-bound", owner=""),
            pod("etl-4", "b", 2000, cls="cpu-bound", owner=""),
            pod("kafka-1", "c", 3000, cls="io-bound", owner=""),
        ],
        [PodDisruptionBudget("app", "cart-pdb", "cart", 1)],
    )
    future = {f"{p.namespace}/{p.name}": np.full(3, float(p.peak_cpu_m)) for p in state.pods}
    snap = Snapshot(state, future, 0.0, 0.0, 900.0, 0, ("a", "b", "c"))
    rows = cycles(snap, n_cycles=5, max_moves=4)
    assert [(r["cycle"], r["moves"], r["interference_pairs_after"]) for r in rows] == [(1, 1, 2), (2, 2, 0)]
    assert all(r["pdb_violations"] == 0 and r["peak_overcommit"] == 0 for r in rows)


def test_peak_ratio_gives_pods_the_control_loops_forecast_peak() -> None:
    base, loop_like = build_snapshot(7), build_snapshot(7, peak_ratio=1.2)
    assert [p.name for p in base.state.pods] == [p.name for p in loop_like.state.pods]
    for a, b in zip(base.state.pods, loop_like.state.pods, strict=True):
        assert b.peak_cpu_m == max(float(a.cpu_request_m), a.usage_cpu_m * 1.2)  # with_forecast_peaks
    assert all((base.future_usage[k] == loop_like.future_usage[k]).all() for k in base.future_usage)  # scored alike


def test_the_two_overcommit_readings_count_what_each_says() -> None:
    """`peak_overcommit` counts node-steps over allocatable at the usage that followed;
    `forecast_peak_overcommit` (EVALUATION.md's words read literally) at the sum of the pods'
    forecast peaks, every future step of a node over it. Neither is stricter in general (a review of
    2026-12-07 found the docs claiming the first was)."""
    from scaleahead.bench.rebalance import Outcome, Snapshot, score
    from scaleahead.types import ClusterState, Node, Pod

    nodes = (Node("a", 1000, 1000), Node("b", 1000, 1000))
    cautious = Pod("ns", "x-1", "a", 100, 100, "x", usage_cpu_m=100.0, peak_cpu_m=600.0)  # peak above its use
    cautious_too = Pod("ns", "y-1", "a", 100, 100, "y", usage_cpu_m=100.0, peak_cpu_m=600.0)
    spiky = Pod("ns", "z-1", "b", 100, 100, "z", usage_cpu_m=100.0, peak_cpu_m=200.0)  # uses more than its peak
    state = ClusterState(nodes=nodes, pods=(cautious, cautious_too, spiky))
    future = {
        "ns/x-1": np.full(4, 100.0),
        "ns/y-1": np.full(4, 100.0),
        "ns/z-1": np.array([100.0, 1500.0, 100.0, 100.0]),
    }
    snap = Snapshot(state, future, 0.0, 0.0, 4.0, 7, ("a", "b"))
    placed = Outcome({"ns/x-1": "a", "ns/y-1": "a", "ns/z-1": "b"}, 0, 0, 0)
    metrics = score(snap, placed)
    # node a: peaks 1,200 > 1,000 at every one of the 4 steps, use 200; node b: use 1,500 at one step
    assert (metrics["peak_overcommit"], metrics["forecast_peak_overcommit"]) == (1, 4)
