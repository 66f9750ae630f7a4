"""Readiness while shutting down (docs/operations.md, "Endpoints"): 503 from the signal on, even
when the cycle in flight finishes after it and reports success (until 2026-12-07 /readyz said 200
for the whole shutdown, up to the 40 s job wait: a review of in-cluster operation)."""

from __future__ import annotations

from scaleahead.observability import Health


def test_a_replica_shutting_down_is_not_ready_whatever_the_cycle_in_flight_reports() -> None:
    health = Health(60.0, lambda: 0.0)
    health.set_ready(True, "leader: cycles running")
    assert health.readiness() == (True, "leader: cycles running")
    health.shutting_down()
    health.set_ready(True, "leader: cycles running")  # the cycle in flight ends after the signal
    assert health.readiness() == (False, "shutting down")
