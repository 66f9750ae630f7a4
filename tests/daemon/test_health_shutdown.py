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


def test_a_port_in_use_is_one_paragraph_not_a_traceback() -> None:
    """Until 2026-12-07 a busy --port ended `run` with an OSError traceback and exit 1."""
    import socket

    import pytest

    from scaleahead.errors import UserError
    from scaleahead.observability import Metrics, serve

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(UserError) as err:
            serve(Metrics(), Health(60.0, lambda: 0.0), "127.0.0.1", port)
    assert f"127.0.0.1:{port}" in str(err.value) and "--port" in str(err.value)


def test_the_cycle_and_phase_histograms_reach_past_the_liveness_limit() -> None:
    """A cycle stalled 30-150 s (the stalls that trip the 60 s liveness probe) fell in +Inf, so the
    dashboard's p95 panels could not show it (a review of 2026-12-07)."""
    from scaleahead.observability import Metrics

    metrics = Metrics()
    metrics.cycle.observe(90.0)
    body = metrics.render().decode()
    assert 'scaleahead_cycle_seconds_bucket{le="60.0"} 0.0' in body
    assert 'scaleahead_cycle_seconds_bucket{le="120.0"} 1.0' in body
