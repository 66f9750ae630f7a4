"""A policy reload that lands while a cycle runs (the reload job runs on its own thread in
``scaleahead run``) reaches the next cycle whole: a cycle plans with one read of the policies and
the limits derived from that read (``run --shard``'s part of ``loop.capacity`` and of the
warm-memory budget), never with the new limits and the old policies, or half of the new limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import scaleahead.loop as loop_module
from scaleahead.commands.run import _shard_limiter
from scaleahead.settings import Settings
from scaleahead.sharding import shard_limits
from scaleahead.types import ClusterState, WorkloadRef
from tests.daemon.conftest import DaemonFactory, make_policies


def _reload_during_read(
    monkeypatch: pytest.MonkeyPatch,
    daemon: Any,
    target: Any,
    read: dict[str, Any],
    new: list[Any],
    when: Callable[[], bool],
) -> list[float]:
    """Once, in the first cycle for which ``when()`` holds, right after it read the cluster state:
    the cluster's policies become ``new`` and the daemon reloads them, as the job thread would in
    the middle of the cycle. Returns the times it did (one at most)."""
    real_read = target.read_state
    reloads: list[float] = []

    def read_state_then_reload(workloads: list[WorkloadRef]) -> ClusterState:
        state: ClusterState = real_read(workloads)
        if when() and not reloads:
            read["policies"] = new
            reloads.append(daemon.clock.now())
            daemon.reload_policies(daemon.clock.now())
        return state

    monkeypatch.setattr(target, "read_state", read_state_then_reload)
    return reloads


def test_a_reload_during_a_cycle_reaches_the_next_cycle_whole(
    daemon_factory: DaemonFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = make_policies(6), make_policies(2)
    totals, budget = {"*": 30}, 900.0
    parts = [shard_limits(totals, budget, pols, 0, 2) for pols in (before, after)]
    assert parts[0].capacity != parts[1].capacity, "the two reads must give this shard different parts"

    settings = Settings()
    settings.loop.capacity, settings.loop.warm_memory_budget_mb = dict(totals), budget
    limit = _shard_limiter(settings, 0, 2)
    limit(before)
    read = {"policies": before}  # what the cluster holds; scaleahead run splits on the last read
    daemon, clock, target, _ = daemon_factory(
        n=6,
        settings=settings,
        policy_source=lambda: read["policies"],
        on_policies=lambda _: limit(read["policies"]),
        policy_reload_s=3600.0,
    )

    planned: list[tuple[int, Any, Any]] = []
    real_plan = loop_module.make_plan  # type: ignore[attr-defined]

    def recording_plan(forecasts: Any, state: Any, policies: Any, now: float, **kwargs: Any) -> Any:
        planned.append((len(policies), kwargs["capacity"], kwargs["warm_memory_budget_mb"]))
        return real_plan(forecasts, state, policies, now, **kwargs)

    monkeypatch.setattr(loop_module, "make_plan", recording_plan)
    # the second cycle, after it read the policies
    reloads = _reload_during_read(monkeypatch, daemon, target, read, after, when=lambda: len(planned) == 1)
    for _ in range(3):
        daemon.tick(clock.now())
        clock.sleep(10.0)

    assert reloads, "the reload did not run during a cycle"
    expected = {6: parts[0], 2: parts[1]}
    assert [n for n, _, _ in planned] == [6, 6, 2]
    for n, capacity, warm in planned:
        assert capacity == expected[n].capacity, f"a cycle planned {n} policies with another read's capacity"
        assert warm == expected[n].warm_memory_budget_mb
    assert daemon.settings.loop.capacity == parts[1].capacity  # and the reload did land


def _gauged(daemon: Any) -> set[str]:
    """Workloads with a per-workload gauge in the daemon's metrics."""
    m = daemon.metrics
    return {
        s.labels["workload"]
        for g in (m.planned, m.current, m.forecast_peak, m.observed)
        for fam in g.collect()
        for s in fam.samples
        if "workload" in s.labels
    }


def test_a_workload_removed_during_a_cycle_leaves_no_gauges_or_live_error(
    daemon_factory: DaemonFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cycle running when the reload removed a workload accounts for it afterwards (it planned
    it): its gauges and live error are forgotten after that accounting, not before (they came
    back, and stayed until a restart, with alerts on them)."""
    read = {"policies": make_policies(3)}
    daemon, clock, target, _ = daemon_factory(n=3, policy_source=lambda: read["policies"], policy_reload_s=3600.0)
    daemon.tick(clock.now())
    clock.sleep(10.0)
    web2 = "Deployment/shop/web2"
    assert web2 in _gauged(daemon)
    reloaded = _reload_during_read(monkeypatch, daemon, target, read, make_policies(2), when=lambda: True)
    for _ in range(3):
        daemon.tick(clock.now())
        clock.sleep(10.0)
    assert reloaded
    assert web2 not in _gauged(daemon)
    assert web2 not in {r.key for r in daemon.live.last_sample}
    assert "Deployment/shop/web1" in _gauged(daemon)
