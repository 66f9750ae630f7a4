"""What one tenant's policy may cost the others, against the real test Prometheus (security audit
of 2026-12-06): the points of a window at a tiny step."""

from __future__ import annotations

import logging

import numpy as np

from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig
from scaleahead.prometheus.history import PrometheusHistory

DAY = 86400.0


# -- finding 3: the points of one policy's window -------------------------------------------------------


def test_a_policy_whose_window_holds_too_many_points_is_not_read_and_says_what_to_change(
    prom, make_policy, caplog
) -> None:
    """At demand.stepSeconds 1 the 2-day window is 172,800 points (16 requests per read; at 0.001 s,
    allowed until 2026-12-06, 172.8 M points and an OOM-killed controller): more than twice a 10 s
    policy's 34,560, so it is not read at all and its workload gets an error saying what to change;
    the other policy is read as usual."""
    web = make_policy("web", 'nasa_requests{workload="web"}')
    tiny = make_policy("tiny", 'nasa_requests{workload="web"}', step=1)
    client = PrometheusClient(PrometheusConfig(prom.url))
    hist = PrometheusHistory(client, window_s=2 * DAY)
    with caplog.at_level(logging.WARNING, logger="scaleahead.prometheus"):
        got = hist.read([tiny, web], prom.end)
    assert set(got) == {web.workload} and len(got[web.workload]) == 17280
    assert client.stats.requests == 2  # web's window (2 chunks); none for tiny
    msg = hist.errors[tiny.workload]
    assert msg.startswith("default/tiny: not read:") and "172,800 points" in msg and "34,560" in msg
    assert "set demand.stepSeconds to 5 or more" in msg and "SCALEAHEAD_LOOP__MAX_HISTORY_POINTS" in msg
    assert any(getattr(r, "event", "") == "history_too_many_points" for r in caplog.records)
    # The operator's limit (loop.max_history_points) lets it through: 1 s steps are allowed.
    hist = PrometheusHistory(PrometheusClient(PrometheusConfig(prom.url)), window_s=2 * DAY, max_points=200_000)
    got = hist.read([tiny], prom.end)
    assert hist.errors == {} and len(got[tiny.workload]) == 172_800
    assert np.nanmax(got[tiny.workload].values) == np.nanmax(prom.web.values)
