"""Prometheus's clock against this one's (``check_clock``), on the real test Prometheus."""

from __future__ import annotations

import logging
import time

import pytest

from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig, check_clock
from tests.prometheus.conftest import free_port


def test_a_prometheus_on_this_machines_clock_is_not_warned_about(prom, caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING)
    with PrometheusClient(PrometheusConfig(prom.url)) as client:
        offset = check_clock(client)
    assert offset is not None and abs(offset) < 2.0, offset
    assert not [r for r in caplog.records if getattr(r, "event", "") == "prometheus_clock_skew"]


@pytest.mark.parametrize(("skew", "says"), [(300.0, "behind this one"), (-300.0, "ahead of this one")])
def test_a_clock_minutes_apart_is_warned_about_with_its_side(prom, caplog, skew: float, says: str) -> None:  # type: ignore[no-untyped-def]
    """This clock ``skew`` s ahead of Prometheus's: Prometheus is behind it (and the reverse)."""
    caplog.set_level(logging.WARNING)
    with PrometheusClient(PrometheusConfig(prom.url)) as client:
        offset = check_clock(client, now=lambda: time.time() + skew)
    assert offset is not None and abs(offset + skew) < 2.0, offset
    (warned,) = [r for r in caplog.records if getattr(r, "event", "") == "prometheus_clock_skew"]
    assert says in warned.getMessage() and "300 s" in warned.getMessage(), warned.getMessage()


def test_an_unreachable_prometheus_gives_no_offset_and_no_traceback() -> None:
    config = PrometheusConfig(f"http://127.0.0.1:{free_port()}", timeout_s=2.0)
    with PrometheusClient(config) as client:
        assert check_clock(client) is None
