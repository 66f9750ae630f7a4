"""What one tenant's policy may cost the others, against the real test Prometheus (security audit
of 2026-12-06): the points of a window at a tiny step, an expensive query's timeout, and a URL's
password in messages."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from scaleahead.errors import UserError
from scaleahead.policy import parse_policies
from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig, PrometheusError, RangeRequest
from scaleahead.prometheus.history import PrometheusHistory

DAY = 86400.0
#: 172.8 M subquery steps (2 days at 1 ms), about 36 s of work here, in little memory where the test
#: server has no data (a month after it: ``FAR``); Prometheus checks its timeout at every step.
HEAVY = "count_over_time(sum(nasa_requests)[2d:1ms])"
FAR = 30 * 86400.0


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


# -- finding 5: an expensive query's timeout --------------------------------------------------------------


def test_the_timeout_sent_to_prometheus_is_just_under_the_clients() -> None:
    """``server_timeout_s``: a tenth less, at most 1 s less; and it is what each range query sends."""
    from scaleahead.prometheus import client as client_module

    assert client_module.server_timeout_s(30.0) == 29.0
    assert client_module.server_timeout_s(3.0) == pytest.approx(2.7)
    assert client_module.server_timeout_s(0.5) == pytest.approx(0.45)
    client = PrometheusClient(PrometheusConfig("http://127.0.0.1:9", timeout_s=3.0))
    sent: list[dict[str, str]] = []

    def post(path, fields, *args):  # type: ignore[no-untyped-def]
        sent.append(dict(fields))
        return {"resultType": "matrix", "result": []}

    client._post = post  # type: ignore[method-assign]
    client.query_range_raw("up", 0.0, 60.0, 10.0)
    assert [f["timeout"] for f in sent] == ["2.7"]


#: The tests below are about what the client does with Prometheus's own timeout answer, which must come
#: well before the client's timeout: 2.5 s apart (``server_timeout_s`` gives 0.3 s at 3 s; a loaded
#: machine can run that out). The server's timeout is looked up in the client module at each query.
SERVER_GAP_S = 2.5


@pytest.fixture
def wide_server_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    from scaleahead.prometheus import client as client_module

    monkeypatch.setattr(client_module, "server_timeout_s", lambda timeout_s: timeout_s - SERVER_GAP_S)


def test_prometheus_stops_an_expensive_query_at_the_timeout_it_is_sent_and_it_is_not_retried(
    prom, wide_server_gap
) -> None:
    """Until 2026-12-06 no timeout was sent: Prometheus went on with a query the client had given up
    on, and the client tried it 4 times (the audit's read of one victim next to it: 36 s at an 8 s
    timeout, 2 minutes at the default 30 s). Now Prometheus is sent timeout= just under the client's
    and answers that it stopped the query; that read is not retried, and the query is read alone
    (never batched with the others) for the next reads."""
    from scaleahead.prometheus.client import SLOW_READS

    w = prom.workers["w01"]
    t0 = w.start + 600
    far = prom.end + FAR
    heavy = RangeRequest("team-a/heavy", HEAVY, far, far, 10.0, allow_empty=True)
    light = RangeRequest("team-b/web", 'nasa_requests{workload="w01"}', t0, t0 + 300, 10.0)
    slept: list[float] = []
    client = PrometheusClient(PrometheusConfig(prom.url, timeout_s=5.0, retries=1, batch_size=1), sleep=slept.append)
    got = client.fetch_many([heavy, light])
    assert isinstance(got[0], PrometheusError) and got[0].kind == "timeout"
    msg = got[0].message
    assert "stopped the query at its evaluation timeout (2.5 s, just under the 5 s" in msg, msg
    assert "team-a/heavy" in msg, msg
    assert "SCALEAHEAD_PROMETHEUS__TIMEOUT_S" in msg
    assert not isinstance(got[1], PrometheusError)
    np.testing.assert_array_equal(got[1].values, w.between(t0, t0 + 310).values)
    assert client.stats.retries == 0 and slept == []  # one attempt, no back-off
    assert client.alone == {HEAVY: SLOW_READS}


def test_a_batch_that_prometheus_stopped_at_its_timeout_is_not_retried_whole(prom, wide_server_gap) -> None:
    """Prometheus answers a query it stopped with HTTP 503, which a batch retried whole as an
    overloaded server's: the timeout is told apart (errorType timeout) and handled as a timeout."""
    far = prom.end + FAR
    reqs = [
        RangeRequest("team-a/heavy", HEAVY, far, far + 30, 10.0, allow_empty=True),
        RangeRequest("team-b/web", "sum(nasa_requests)", far, far + 30, 10.0, allow_empty=True),
    ]
    client = PrometheusClient(PrometheusConfig(prom.url, timeout_s=4.5, retries=1), sleep=lambda _: None)
    got = client.fetch_many(reqs)
    assert all(isinstance(g, PrometheusError) and g.kind == "timeout" for g in got)
    first = got[0]
    assert isinstance(first, PrometheusError)
    assert "stopped the query at its evaluation timeout (2 s" in first.message, first.message
    assert client.stats.retries == 0 and client.stats.requests == 1
    assert client.alone == {r.query: 1 for r in reqs}  # each read alone next time: web then reads fine
    again = client.fetch_many(reqs)
    assert isinstance(again[0], PrometheusError) and not isinstance(again[1], PrometheusError)


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
    with pytest.raises(UserError, match="once"):  # a password file beside them too (found by a review)
        PrometheusConfig(f"http://admin:{secret}@host:9090", password="from-a-file")
    # The URL's credentials are sent as basic auth (percent-decoded).
    proxy.state.require_auth = "Basic YWxpY2U6cEB3"  # alice:p@w
    port = urlsplit(proxy.url).port
    w = prom.workers["w01"]
    with PrometheusClient(PrometheusConfig(f"http://alice:p%40w@127.0.0.1:{port}")) as c:
        got = c.range_series(RangeRequest("default/w01", 'nasa_requests{workload="w01"}', w.start, w.start + 590, 10.0))
        assert c.base == f"http://127.0.0.1:{port}"
    np.testing.assert_array_equal(got.values, w.values[:60])
