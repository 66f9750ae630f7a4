"""The control loop plans pod moves (``loop.max_moves``) at most once per ``loop.rebalance_interval_s``
period, in the first cycle of the period that reads the placement, however the cycles are spaced."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from forecaster.baselines import Naive
from scaleahead.bench.speed import policies_for
from scaleahead.clock import VirtualClock
from scaleahead.loop import CycleReport, Deps, run_forever, run_once
from scaleahead.settings import Settings
from scaleahead.traces import load_series
from scaleahead.tracesource import InMemoryTarget, TraceHistory
from scaleahead.types import ClusterState, MovePod, WorkloadRef

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rebalance"))
from rebalance_builders import cluster, node, pod  # noqa: E402

NASA = load_series("nasa-10s")
BASE = math.floor((NASA.start + 3 * 86400.0) / 300.0) * 300.0  # a period start, three days into the trace
PERIOD = 300.0


class _Placed(InMemoryTarget):
    """An in-memory cluster whose placement wants one move (a node holding one pod that fits on
    another) and keeps wanting it: moves are not simulated. ``fail_at``: read times that raise."""

    def __init__(self, clock: VirtualClock | None = None, fail_at: Sequence[float] = ()) -> None:
        super().__init__(default_replicas=2)
        self.placement = cluster(
            [node("a"), node("b"), node("c")],
            [pod("web-1", "a", 1000), pod("db-1", "b", 6000), pod("db-2", "c", 3000)],
        )
        self.clock, self.fail_at = clock, list(fail_at)

    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState:
        if self.clock is not None and any(abs(self.clock.now() - t) < 1e-6 for t in self.fail_at):
            raise ConnectionError("API server 500 (injected)")
        state = super().read_state(workloads)
        return replace(state, nodes=self.placement.nodes, pods=self.placement.pods, pdbs=self.placement.pdbs)


def _settings() -> Settings:
    settings = Settings()
    settings.loop.interval_s = 10.0
    settings.loop.rebalance_interval_s = PERIOD
    settings.loop.max_moves = 4
    return settings


def _deps(target: InMemoryTarget) -> Deps:
    return Deps(TraceHistory(default=NASA), Naive(), target, None, policies_for(1, 10.0))


def _moves(report: CycleReport) -> int:
    return sum(isinstance(a, MovePod) for a in report.plan.actions)


def test_a_late_tick_and_the_next_one_on_the_grid_move_once() -> None:
    """The daemon runs a tick late by less than an interval at once and keeps the next on the grid:
    ticks at 300.2 and 305.3 are both in period 1 (found in review: both moved, 5 s apart)."""
    deps, settings = _deps(_Placed()), _settings()
    offsets = [285.3, 300.2, 305.3, 315.3, 595.3, 605.3, 615.3]
    moved = [o for o in offsets if _moves(run_once(deps, settings, BASE + o, True))]
    # none in the period the process starts in (a process before it may have moved there)
    assert moved == [300.2, 605.3]


def test_a_failed_cycle_before_a_period_boundary_does_not_skip_the_period() -> None:
    """``run_forever`` backs off one interval after a failed cycle: the cycle after the boundary comes
    at 315.3, not 305.3 (found in review: period 1 got no moves)."""
    clock = VirtualClock(BASE + 5.3)
    deps = _deps(_Placed(clock, fail_at=[BASE + 295.3]))
    moved: list[float] = []
    ran: list[float] = []

    def on_cycle(report: CycleReport, lateness: float) -> None:
        ran.append(report.now - BASE)
        if _moves(report):
            moved.append(report.now - BASE)

    run_forever(deps, _settings(), clock, stop=lambda: clock.now() > BASE + 1300.0, on_cycle=on_cycle)
    assert 295.3 not in [round(t, 1) for t in ran] and any(abs(t - 315.3) < 1e-6 for t in ran)
    per_period = {k: sum(1 for t in moved if t // PERIOD == k) for k in range(5)}
    assert per_period == {0: 0, 1: 1, 2: 1, 3: 1, 4: 1}, moved


def test_a_restarted_process_does_not_move_again_in_the_period() -> None:
    settings = _settings()
    first = _deps(_Placed())
    assert not _moves(run_once(first, settings, BASE + 295.0, True))
    assert _moves(run_once(first, settings, BASE + 305.0, True))
    restarted = _deps(_Placed())  # a new process (or a replica that became the leader: reset)
    assert not _moves(run_once(restarted, settings, BASE + 315.0, True))
    assert _moves(run_once(restarted, settings, BASE + 605.0, True))
    first.rebalance.reset()
    assert not _moves(run_once(first, settings, BASE + 615.0, True))
    # a cycle that cannot read the placement does not use up the period: the next one that can moves
    blind = _deps(_Placed())
    run_once(blind, settings, BASE + 895.0, True)
    blind_target = blind.target
    assert isinstance(blind_target, _Placed)
    placement = blind_target.placement
    blind_target.placement = cluster([], [])
    assert not _moves(run_once(blind, settings, BASE + 905.0, True))
    blind_target.placement = placement
    assert _moves(run_once(blind, settings, BASE + 915.0, True))


def test_the_rebalance_weights_and_peak_cap_come_from_the_settings() -> None:
    """The one move (web-1 freeing a, onto b at 70 % of its CPU at the peak or c at 40 %) is worth 1.0
    per move: a move cost of 1.0 or more, a freed node worth no more than the move cost, or a peak cap
    under 40 % leaves it out; the defaults are ``RebalanceWeights()``'s."""
    from planner.rebalance import DEFAULT_MAX_PEAK_FRACTION, RebalanceWeights

    defaults = Settings().loop
    weights = RebalanceWeights()
    assert (
        defaults.rebalance_node_freed,
        defaults.rebalance_pair_separated,
        defaults.rebalance_move_cost,
        defaults.rebalance_max_peak_fraction,
    ) == (weights.node_freed, weights.pair_separated, weights.move_cost, DEFAULT_MAX_PEAK_FRACTION)
    at = BASE + 305.0
    first = _deps(_Placed())
    run_once(first, _settings(), BASE + 5.0, True)  # (the period a process starts in moves nothing)
    assert _moves(run_once(first, _settings(), at, True)) == 1
    for field_name, value in (
        ("rebalance_move_cost", 1.0),
        ("rebalance_node_freed", 0.05),
        ("rebalance_max_peak_fraction", 0.35),
    ):
        settings = _settings()
        setattr(settings.loop, field_name, value)
        deps = _deps(_Placed())
        run_once(deps, settings, BASE + 5.0, True)
        assert _moves(run_once(deps, settings, at, True)) == 0, field_name
