"""The prune and accuracy-report jobs after the replica lost the leader Lease (found by the HA audit
of 2026-12-06, left then; fixed the same day): they stop instead of writing beside the new leader."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scaleahead.types import Forecast, WorkloadRef


class _Lease:
    """Leads at every tick; ``holds`` is what the last renewal found (``holds_now``)."""

    identity = "pod-a"

    def __init__(self) -> None:
        self.holds = True

    def is_leader(self, now: float) -> bool:
        return True

    def holds_now(self) -> bool:
        return self.holds

    def release(self) -> None:
        self.holds = False


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """What the daemon logs (INFO and up), with each record's ``event``."""
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logger = logging.getLogger("scaleahead")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _old_forecasts(store: Any, t: float) -> None:
    ref = WorkloadRef("Deployment", "shop", "old")
    store.record_forecasts([Forecast(ref, t, 10.0, {0.5: [1.0, 2.0]})], force=True)


def test_a_prune_stops_once_the_lease_is_lost_and_deletes_nothing_more(daemon_factory, records) -> None:  # type: ignore[no-untyped-def]
    lease = _Lease()
    daemon, clock, _, store = daemon_factory(leadership=lease)
    now = clock.now()
    _old_forecasts(store, now - 40 * 86400.0)
    calls: list[str] = []
    prune_forecasts, prune_plans = store.prune_forecasts, store.prune_plans

    def forecasts_then_lose(before: float) -> int:
        calls.append("forecasts")
        n = prune_forecasts(before)
        lease.holds = False  # another replica took over while this batch ran
        return n

    def plans(before: float) -> tuple[int, int]:
        calls.append("plans")
        return prune_plans(before)

    store.prune_forecasts = forecasts_then_lose
    store.prune_plans = plans
    out = daemon.prune(now)
    assert calls == ["forecasts"]
    assert out["forecasts"] == 1 and "outcomes" not in out and "plans" not in out and "checkpoints" not in out
    stopped = [r for r in records if getattr(r, "event", "") == "prune_stopped"]
    assert len(stopped) == 1 and stopped[0].step == "outcomes"  # type: ignore[attr-defined]
    assert "no longer holds the leader Lease" in stopped[0].getMessage()
    daemon.shutdown()


def test_a_prune_while_leading_does_every_step(daemon_factory, records) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, _, store = daemon_factory(leadership=_Lease())
    now = clock.now()
    _old_forecasts(store, now - 40 * 86400.0)
    out = daemon.prune(now)
    assert out["forecasts"] == 1
    assert {"outcomes", "plans", "actions", "steers", "risk_factors", "checkpoints"} <= set(out)
    assert not [r for r in records if getattr(r, "event", "") == "prune_stopped"]
    daemon.shutdown()


def test_the_accuracy_report_is_not_written_by_a_replica_that_lost_the_lease(  # type: ignore[no-untyped-def]
    daemon_factory, tmp_path: Path, records
) -> None:
    lease = _Lease()
    reports = tmp_path / "reports"
    daemon, clock, _, _ = daemon_factory(leadership=lease, report_dir=reports)
    daemon.tick(clock.now())
    lease.holds = False
    later = clock.now() + 3600.0
    assert daemon.accuracy_report(later) is None
    assert not reports.exists() or not list(reports.iterdir())
    assert [r for r in records if getattr(r, "event", "") == "accuracy_report_skipped"]
    since = daemon.report_since  # unchanged by the report not written
    lease.holds = True  # leading again: the report is written, for the period since the last one
    path = daemon.accuracy_report(later)
    assert path is not None and path.is_file()  # named for the day the period starts: this process's start
    assert path.name == f"accuracy-{datetime.fromtimestamp(since, UTC).strftime('%Y-%m-%d')}.json"
    daemon.shutdown()
