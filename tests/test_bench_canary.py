"""``scaleahead bench canary``: a real daemon decides canaries on the outcomes it measures."""

from __future__ import annotations

import json
from pathlib import Path

from scaleahead.bench.canary import DelayedTarget
from scaleahead.clock import VirtualClock
from scaleahead.types import Reason, ScaleTo, WorkloadRef
from tests.conftest import Cli

WHY = Reason("test", "because")


def test_the_delayed_cluster_makes_added_replicas_ready_after_the_start_up_delay() -> None:
    clock = VirtualClock(1000.0)
    target = DelayedTarget(clock, 60.0)
    ref = WorkloadRef("Deployment", "shop", "web")
    assert target.read_state([ref]).workloads[ref].ready_replicas == 1
    target.apply(ScaleTo(ref, 1, 5, WHY))
    clock.sleep(30.0)
    ws = target.read_state([ref]).workloads[ref]
    assert (ws.replicas, ws.ready_replicas) == (5, 1)
    target.apply(ScaleTo(ref, 5, 3, WHY))  # two of the four not ready go first
    ws = target.read_state([ref]).workloads[ref]
    assert (ws.replicas, ws.ready_replicas) == (3, 1)
    clock.sleep(30.0)
    ws = target.read_state([ref]).workloads[ref]
    assert (ws.replicas, ws.ready_replicas) == (3, 3)
    target.apply(ScaleTo(ref, 3, 2, WHY))
    assert target.read_state([ref]).workloads[ref].ready_replicas == 2


def test_bench_canary_runs_a_canary_decided_on_measured_outcomes(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "canary.json"
    args = ["--runs", "1", "--workloads", "10", "--window-s", "600", "--baseline-h", "0.5", "--max-hours", "1.5"]
    code, stdout, err = cli("bench", "canary", *args, "--steps", "0.5,1.0", "--json", str(out))
    assert code == 0, (stdout, err)
    doc = json.loads(out.read_text())
    (run,) = doc["runs"]
    decided = [d for d in run["decisions"] if "level" in d]
    assert decided, run  # windows of 600 s in 1.5 hours: at least one comparison
    for d in decided:
        assert d["champion_workloads"] + d["challenger_workloads"] == 10
        assert d["violation_fraction_paired"] == 1.0  # baselines from the half hour before the start
    assert run["ending"] in ("promoted", "rolled back: shown worse", "rolled back: not shown no worse", "running"), run
    assert doc["endings"] == {run["ending"]: 1}
    # the share it ended at: 1.0 promoted, the share in force at a rollback (not the 0 stored then)
    assert run["final_share"] == (1.0 if run["ending"] == "promoted" else decided[-1]["share"]), run
    assert run["measured_workload_arms"] >= 10  # every service measured under the canary
    assert stdout.splitlines()[-1].startswith("seasonal_naive vs seasonal_naive, 1 run(s): ")


def test_bench_canary_refuses_what_it_cannot_run(tmp_path: Path, cli: Cli) -> None:
    code, _, err = cli("bench", "canary", "--challenger", "lstm")
    assert code == 2 and "not a baseline model family" in err
    code, _, err = cli("bench", "canary", "--runs", "0")
    assert code == 2 and "--runs must be at least 1" in err
    code, _, err = cli("bench", "canary", "--window-s", "nan")
    assert code == 2 and "--window-s" in err
