"""What one tenant's policy may cost the others, against the real test Prometheus (security audit
of 2026-12-06): the points of a window at a tiny step, and a URL's password in messages."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from scaleahead.errors import UserError
from scaleahead.policy import parse_policies
from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig, RangeRequest
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


# -- finding 8: a URL's password -----------------------------------------------------------------------


def test_a_password_in_the_prometheus_url_is_never_shown_and_is_sent_as_basic_auth(prom, proxy, caplog) -> None:
    """Until 2026-12-06 http://admin:PASSWORD@host was shown whole in every message naming the
    server (logs, history errors), and urllib3 did not send those credentials (401)."""
    from urllib.parse import urlsplit

    secret = "Sup3rSecretPw"
    closed = PrometheusConfig(f"http://admin:{secret}@127.0.0.1:9/", retries=0, timeout_s=2)
    hist = PrometheusHistory(PrometheusClient(closed), window_s=3600)
    policy = parse_policies(
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\nmetadata: {name: web, namespace: team-b}\n"
        "spec:\n  target: {name: web}\n  demand: {query: up}\n  capacityPerReplica: 2\n"
    )
    with caplog.at_level(logging.DEBUG):
        hist.read(policy, prom.end)
    (msg,) = hist.errors.values()
    assert "cannot connect to Prometheus at http://127.0.0.1:9" in msg
    assert secret not in msg and secret not in caplog.text and "admin" not in msg
    with pytest.raises(UserError) as info:
        PrometheusConfig(f"prometheus://admin:{secret}@host:9090")
    assert secret not in info.value.message and "admin:***@" in info.value.message
    with pytest.raises(UserError) as info:  # credentials twice: which ones count is not guessed
        PrometheusConfig(f"http://admin:{secret}@host:9090", bearer_token="t")
    assert secret not in info.value.message and "once" in info.value.message
    # The URL's credentials are sent as basic auth (percent-decoded).
    proxy.state.require_auth = "Basic YWxpY2U6cEB3"  # alice:p@w
    port = urlsplit(proxy.url).port
    w = prom.workers["w01"]
    with PrometheusClient(PrometheusConfig(f"http://alice:p%40w@127.0.0.1:{port}")) as c:
        got = c.range_series(RangeRequest("default/w01", 'nasa_requests{workload="w01"}', w.start, w.start + 590, 10.0))
        assert c.base == f"http://127.0.0.1:{port}"
    np.testing.assert_array_equal(got.values, w.values[:60])
