"""Faults against a real server: killed mid-read, slow answers, 5xx, bad queries, auth and TLS."""

from __future__ import annotations

import shutil
import socket
import threading
import time

import numpy as np
import pytest

from scaleahead.prometheus.backfill import LocalPrometheus
from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig, PrometheusError, RangeRequest

W01 = 'nasa_requests{workload="w01"}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_hour(prom, key: str = "w01") -> RangeRequest:
    w = prom.workers[key]
    return RangeRequest(f"default/{key}", f'nasa_requests{{workload="{key}"}}', w.start, w.start + 359 * 10, 10.0)


def test_a_server_killed_mid_read_fails_the_unread_workloads_quickly_and_names_them(prom, tmp_path) -> None:
    tsdb = tmp_path / "tsdb"
    shutil.copytree(prom.tsdb, tsdb, ignore=shutil.ignore_patterns("lock", "*.log", "wal", "chunks_head"))
    server = LocalPrometheus(tsdb, free_port()).start()
    reqs = [
        RangeRequest(f"default/{k}", f'nasa_requests{{workload="{k}"}}', w.start, w.end - 10, 10.0)
        for k, w in prom.workers.items()
    ]
    cfg = PrometheusConfig(server.url, max_points=20, max_concurrency=2, retries=2, backoff_s=0.01)
    backoffs: list[float] = []  # the back-off the client asked for; nothing sleeps in the test
    client = PrometheusClient(cfg, sleep=backoffs.append)
    # Every HTTP attempt that failed: none before the kill, as the server was healthy until then.
    failed_attempts: list[str] = []
    post_once = client._post_once

    def counting_post_once(url: str, fields, label: str, query: str):  # type: ignore[no-untyped-def]
        try:
            return post_once(url, fields, label, query)
        except PrometheusError:
            failed_attempts.append(label)  # list.append is atomic under the GIL
            raise

    client._post_once = counting_post_once  # type: ignore[method-assign]

    def kill_after_some_requests() -> None:
        deadline = time.monotonic() + 60  # a guard against a hang, not a measurement
        while client.stats.requests < 30 and time.monotonic() < deadline:
            time.sleep(0.001)
        server.kill()

    killer = threading.Thread(target=kill_after_some_requests)
    killer.start()
    try:
        got = client.fetch_many(reqs)  # 8 x 108 requests if nothing failed
    finally:
        killer.join()
        server.stop()
    errors = [g for g in got if isinstance(g, PrometheusError)]
    assert errors, "the server died before the read ended, so some workloads must have failed"
    assert len(errors) >= len(reqs) - cfg.max_concurrency, "only reads in flight at the kill could finish"
    # Quickly: only the reads in flight when the server died (max_concurrency of them) try again,
    # each at most 1 + retries times with its back-off; once one has given up on a server that
    # cannot be reached, the reads not yet started fail at once, without a request or a back-off.
    tried = set(failed_attempts)
    assert 1 <= len(tried) <= cfg.max_concurrency, failed_attempts
    assert len(failed_attempts) <= cfg.max_concurrency * (cfg.retries + 1), failed_attempts
    assert client.stats.retries == len(backoffs) <= cfg.max_concurrency * cfg.retries
    assert all(b in (0.01, 0.02) for b in backoffs), backoffs
    assert client.stats.requests < 8 * 108
    for r, g in zip(reqs, got, strict=True):
        if isinstance(g, PrometheusError):
            assert r.label in g.message and r.query in g.message
            assert g.kind in ("connect", "broken")
            assert "Prometheus is running" in g.message
        else:
            np.testing.assert_array_equal(g.values, prom.workers[r.label.split("/")[1]].values)


def test_a_slow_server_within_the_timeout_is_read_normally(prom, proxy) -> None:
    proxy.state.delay_s = 0.3
    with PrometheusClient(PrometheusConfig(proxy.url, timeout_s=5)) as c:
        got = c.range_series(one_hour(prom))
    np.testing.assert_array_equal(got.values, prom.workers["w01"].values[:360])


def test_a_server_slower_than_the_timeout_is_retried_then_reported(prom, proxy) -> None:
    # The proxy runs in this process: an answer delayed 4 s cannot come within the 0.2 s timeout
    # unless the whole process stalls for 3.8 s (1.0 s before: a stall of 0.8 s let one through).
    proxy.state.delay_s = 4.0
    cfg = PrometheusConfig(proxy.url, timeout_s=0.2, retries=1, backoff_s=0.01)
    with PrometheusClient(cfg) as c, pytest.raises(PrometheusError) as info:
        c.range_series(one_hour(prom))
    assert len(proxy.state.seen) == 2  # first try and one retry
    msg = info.value.message
    assert "default/w01" in msg and W01 in msg and "0.2 s" in msg and "raise the timeout" in msg


def test_5xx_answers_are_retried_with_backoff_until_the_read_succeeds(prom, proxy) -> None:
    proxy.state.fail_first = 2
    sleeps: list[float] = []
    with PrometheusClient(PrometheusConfig(proxy.url, retries=3, backoff_s=0.5), sleep=sleeps.append) as c:
        got = c.range_series(one_hour(prom))
    np.testing.assert_array_equal(got.values, prom.workers["w01"].values[:360])
    assert sleeps == [0.5, 1.0] and c.stats.retries == 2


def test_a_bad_query_is_reported_at_once_without_retries(prom, proxy) -> None:
    req = RangeRequest("default/web", "sum(rate(nasa_requests[1m]", prom.web.start, prom.web.start + 600, 10.0)
    with PrometheusClient(PrometheusConfig(proxy.url, retries=3)) as c, pytest.raises(PrometheusError) as info:
        c.range_series(req)
    assert len(proxy.state.seen) == 1
    msg = info.value.message
    assert "default/web" in msg and "sum(rate(nasa_requests[1m]" in msg and "HTTP 400" in msg and "PromQL" in msg


def test_an_unreachable_server_names_workload_query_and_what_to_check() -> None:
    cfg = PrometheusConfig(f"http://127.0.0.1:{free_port()}", retries=1, backoff_s=0.01, batch_size=1)
    reqs = [RangeRequest(f"default/w{i}", f"q{i}", 0, 100, 10.0) for i in range(50)]
    with PrometheusClient(cfg) as c:
        got = c.fetch_many(reqs)
    assert all(isinstance(g, PrometheusError) for g in got)
    assert c.stats.retries <= 2 * cfg.max_concurrency  # the others fail at once, not one by one
    msg = got[7].message  # type: ignore[union-attr]
    assert "default/w7" in msg and "'q7'" in msg and "cannot connect" in msg and "Check the URL and port" in msg


def test_a_bearer_token_is_sent_and_requests_ask_for_no_compression(prom, proxy, tmp_path) -> None:
    proxy.state.require_auth = "Bearer s3cret"
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with PrometheusClient(PrometheusConfig(proxy.url, bearer_token_file=str(token))) as c:
        c.range_series(one_hour(prom))
    assert proxy.state.seen[-1]["authorization"] == "Bearer s3cret"
    assert proxy.state.seen[-1]["accept-encoding"] == "identity"


def test_basic_auth_is_sent(prom, proxy) -> None:
    proxy.state.require_auth = "Basic YWxpY2U6cHc="  # alice:pw
    with PrometheusClient(PrometheusConfig(proxy.url, username="alice", password="pw")) as c:
        got = c.range_series(one_hour(prom))
    assert np.isfinite(got.values).any()


def test_wrong_credentials_give_401_naming_workload_query_and_credentials(prom, proxy) -> None:
    proxy.state.require_auth = "Bearer right"
    with PrometheusClient(PrometheusConfig(proxy.url, bearer_token="wrong")) as c, pytest.raises(PrometheusError) as e:
        c.range_series(one_hour(prom))
    assert len(proxy.state.seen) == 1  # not retried
    msg = e.value.message
    assert "default/w01" in msg and W01 in msg and "HTTP 401" in msg and "credentials" in msg


def test_tls_with_a_ca_bundle_and_a_client_certificate(prom, tls_proxy, certs) -> None:
    cfg = PrometheusConfig(
        tls_proxy.url, ca_file=str(certs.ca), cert_file=str(certs.client_cert), key_file=str(certs.client_key)
    )
    with PrometheusClient(cfg) as c:
        got = c.range_series(one_hour(prom))
    np.testing.assert_array_equal(got.values, prom.workers["w01"].values[:360])


def test_tls_without_the_ca_bundle_is_a_tls_error_saying_what_to_check(prom, tls_proxy, certs) -> None:
    cfg = PrometheusConfig(tls_proxy.url, cert_file=str(certs.client_cert), key_file=str(certs.client_key))
    with PrometheusClient(cfg) as c, pytest.raises(PrometheusError) as info:
        c.range_series(one_hour(prom))
    assert info.value.kind == "tls"
    assert "default/w01" in info.value.message and "--ca-file" in info.value.message


def test_https_to_a_server_that_speaks_plain_http_says_to_use_http(prom) -> None:
    """Until 2026-12-07 it got the CA-bundle advice, which cannot help (a review)."""
    cfg = PrometheusConfig(prom.url.replace("http://", "https://"), retries=0)
    with PrometheusClient(cfg) as c, pytest.raises(PrometheusError) as info:
        c.range_series(one_hour(prom))
    assert info.value.kind == "tls" and "use http://" in info.value.message


def test_the_control_loops_history_sends_the_credentials_set_in_the_environment(prom, proxy, tmp_path) -> None:
    from scaleahead.prometheus.history import history_from_settings
    from scaleahead.settings import Settings

    proxy.state.require_auth = "Bearer s3cret"
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    env = {"SCALEAHEAD_PROMETHEUS__URL": proxy.url, "SCALEAHEAD_PROMETHEUS__BEARER_TOKEN_FILE": str(token)}
    hist = history_from_settings(Settings.from_env(env).prometheus)
    got = hist.client.range_series(one_hour(prom))
    assert np.isfinite(got.values).any()
    assert proxy.state.seen[-1]["authorization"] == "Bearer s3cret"
    # Without the variable the same server refuses (the test can fail).
    bare = history_from_settings(Settings.from_env({"SCALEAHEAD_PROMETHEUS__URL": proxy.url}).prometheus)
    with pytest.raises(PrometheusError, match="HTTP 401"):
        bare.client.range_series(one_hour(prom))


def test_a_missing_tls_file_in_the_settings_is_a_clear_error(tmp_path) -> None:
    from scaleahead.errors import UserError
    from scaleahead.prometheus.history import history_from_settings
    from scaleahead.settings import PrometheusSettings

    missing = tmp_path / "ca.pem"
    with pytest.raises(UserError, match=f"The Prometheus CA file {missing} does not exist"):
        history_from_settings(PrometheusSettings(url="https://prom:9090", ca_file=str(missing)))


def test_one_slow_query_in_a_batch_fails_only_itself_and_is_read_alone_from_then_on(prom, proxy) -> None:
    from scaleahead.prometheus.client import SLOW_READS

    names = sorted(prom.workers)
    slow = names[0]
    proxy.state.slow_marker = f'workload="{slow}"'
    # Every fast read (about 40 of them, 4 at a time) must answer within the timeout, and the slow
    # one never: 2 s for a read of milliseconds, and 4 s more for the slow one, whose delay (in this
    # process, as the client's) could only end first after a stall that long. (With 0.4 s and 1.0 s a
    # loaded CI machine timed out a fast read: "w04 ... did not answer within 0.4 s".)
    proxy.state.slow_delay_s = 6.0
    t0 = prom.workers[slow].start + 600
    reqs = [RangeRequest(f"default/{k}", f'nasa_requests{{workload="{k}"}}', t0, t0 + 300, 10.0) for k in names]
    cfg = PrometheusConfig(proxy.url, timeout_s=2.0, retries=1, backoff_s=0.01, max_concurrency=4)
    with PrometheusClient(cfg) as c:
        # The batch times out: one request, no retry (before: 4 attempts, and then the same again
        # every cycle, every workload of the batch failed); each query is read alone next time.
        first = c.fetch_many(reqs)
        assert all(isinstance(g, PrometheusError) and g.kind == "timeout" for g in first)
        assert len(proxy.state.seen) == 1 and c.alone == {r.query: 1 for r in reqs}
        proxy.state.seen.clear()
        second = c.fetch_many(reqs)  # each alone, in parallel, once: only the slow one fails
        assert len(proxy.state.seen) == len(names)
        assert isinstance(second[0], PrometheusError) and second[0].kind == "timeout"
        assert f"default/{slow}" in second[0].message
        for k, g in zip(names[1:], second[1:], strict=True):
            assert not isinstance(g, PrometheusError), g.message
            np.testing.assert_array_equal(g.values, prom.workers[k].between(t0, t0 + 310).values)
        assert c.alone == {reqs[0].query: SLOW_READS}
        proxy.state.seen.clear()
        third = c.fetch_many(reqs)  # the fast ones batched again (at most 4: halved), the slow one alone, once
        assert all(not isinstance(g, PrometheusError) for g in third[1:])
        assert c.batch_limit >= 4 and len(proxy.state.seen) == 2 + 1
        assert c.alone == {reqs[0].query: SLOW_READS}  # timed out alone again: alone for SLOW_READS more
        proxy.state.slow_marker = None  # it recovers: batched again after SLOW_READS reads alone
        for _ in range(SLOW_READS):
            c.fetch_many(reqs)
        assert c.alone == {}
        proxy.state.seen.clear()
        assert all(not isinstance(g, PrometheusError) for g in c.fetch_many(reqs))
        assert len(proxy.state.seen) == 1


def test_a_batch_slower_than_the_timeout_whose_queries_are_fast_alone_is_halved(prom, proxy) -> None:
    names = sorted(prom.workers)
    proxy.state.slow_marker = " or "  # only a batched query (an `or` of label_replace calls) is slow
    # Margins as in the test above: 2 s for each fast read, 4 s more for the slow batch.
    proxy.state.slow_delay_s = 6.0
    t0 = prom.workers[names[0]].start + 600
    reqs = [RangeRequest(f"default/{k}", f'nasa_requests{{workload="{k}"}}', t0, t0 + 300, 10.0) for k in names]
    cfg = PrometheusConfig(proxy.url, timeout_s=2.0, retries=1, backoff_s=0.01, max_concurrency=4, batch_size=8)
    with PrometheusClient(cfg) as c:
        c.fetch_many(reqs)
        assert c.batch_limit == len(names) // 2
        got = c.fetch_many(reqs)  # each alone: fast
        assert all(not isinstance(g, PrometheusError) for g in got) and c.alone == {}
        proxy.state.slow_marker = None  # the server is quick again: the batches grow back
        for _ in range(8):
            assert all(not isinstance(g, PrometheusError) for g in c.fetch_many(reqs))
        assert c.batch_limit == 8


def test_an_answer_warned_to_be_partial_is_not_used_as_demand(prom, proxy, make_policy) -> None:
    from scaleahead.prometheus.history import PrometheusHistory

    p = make_policy("w02", 'nasa_requests{workload="w02"}')
    now = prom.workers["w02"].start + 3600
    proxy.state.warning = "partial response: store 10.0.0.7:10901 unavailable"
    hist = PrometheusHistory(PrometheusClient(PrometheusConfig(proxy.url, retries=1, backoff_s=0.01)))
    assert hist.read([p], now) == {}
    assert "may be partial" in hist.errors[p.workload] and "store 10.0.0.7:10901" in hist.errors[p.workload]
    assert "ACCEPT_PARTIAL" in hist.errors[p.workload]
    proxy.state.warning = "PromQL info: metric might not be a counter"  # PromQL's own note: used
    got = hist.read([p], now)[p.workload]
    np.testing.assert_array_equal(got.values[-360:], prom.workers["w02"].values[1:361])  # the points up to now
    proxy.state.warning = "partial response: store down"
    accepting = PrometheusHistory(PrometheusClient(PrometheusConfig(proxy.url, accept_partial=True)))
    assert p.workload in accepting.read([p], now)


def _each_result(change):  # type: ignore[no-untyped-def]
    def rewrite(doc):  # type: ignore[no-untyped-def]
        for series in (doc.get("data") or {}).get("result") or []:
            change(series)
        return doc

    return rewrite


def test_a_native_histogram_answer_is_an_error_saying_what_to_wrap_it_in(prom, proxy) -> None:
    """Prometheus answers a native histogram series with "histograms", no "values": before, that read
    as a series with every step missing, with no error (found in review)."""

    def to_histograms(series):  # type: ignore[no-untyped-def]
        series["histograms"] = [[t, {"count": v, "sum": v, "buckets": []}] for t, v in series.pop("values")]

    proxy.state.rewrite = _each_result(to_histograms)
    client = PrometheusClient(PrometheusConfig(proxy.url, retries=0))
    with pytest.raises(PrometheusError) as err:
        client.range_series(one_hour(prom))
    assert "native histogram" in str(err.value) and "histogram_count(rate(...))" in str(err.value)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (lambda p: [None, p[1]], "sample 3 is [null, "),
        (lambda p: ["NaN", p[1]], 'sample 3 is ["NaN", '),
        (lambda p: [p[0], None], "sample 3 is ["),
    ],
    ids=["null time", "NaN time", "null value"],
)
def test_a_sample_with_a_null_or_nan_time_or_a_null_value_is_a_malformed_answer(prom, proxy, bad, says) -> None:
    """Before, a null or NaN time dropped its sample silently and a null value read as NaN."""

    def spoil(series):  # type: ignore[no-untyped-def]
        series["values"][3] = bad(series["values"][3])

    proxy.state.rewrite = _each_result(spoil)
    client = PrometheusClient(PrometheusConfig(proxy.url, retries=0))
    with pytest.raises(PrometheusError) as err:
        client.range_series(one_hour(prom))
    assert "malformed sample" in str(err.value) and says in str(err.value)


def test_samples_off_the_grid_are_dropped_with_a_warning(prom, proxy, caplog) -> None:
    def shift(series):  # type: ignore[no-untyped-def]
        series["values"][5][0] += 3.0  # between two steps
        series["values"][6][0] += 10 * 3600  # far after the range

    proxy.state.rewrite = _each_result(shift)
    client = PrometheusClient(PrometheusConfig(proxy.url, retries=0))
    with caplog.at_level("WARNING"):
        got = client.range_series(one_hour(prom))
    assert np.isnan(got.values[5]) and np.isnan(got.values[6]) and np.isfinite(got.values[4])
    assert any("dropped 2 sample(s) at times outside the range" in r.getMessage() for r in caplog.records)


def test_a_history_read_that_times_out_is_logged_with_an_event_the_workload_and_the_reason(
    prom, proxy, make_policy, caplog
) -> None:  # type: ignore[no-untyped-def]
    """The root cause of a Prometheus outage's per-workload back-offs: until 2026-12-06 its warning
    had no event field, so a search on event found only the back-offs."""
    import logging

    from scaleahead.prometheus.history import PrometheusHistory

    p = make_policy("w02", 'nasa_requests{workload="w02"}')
    now = prom.workers["w02"].start + 3600
    proxy.state.slow_marker = 'workload="w02"'
    proxy.state.slow_delay_s = 4.0  # never within the 0.3 s timeout, short of a 3.7 s stall of this process
    hist = PrometheusHistory(PrometheusClient(PrometheusConfig(proxy.url, timeout_s=0.3, retries=1, backoff_s=0.01)))
    with caplog.at_level(logging.WARNING, logger="scaleahead"):
        assert hist.read([p], now) == {}
    (line,) = [r for r in caplog.records if getattr(r, "event", "") == "history_failed"]
    assert line.getMessage().startswith(f"history for {p.workload}: ")
    assert (line.workload, line.reason) == (p.workload.key, "timeout")  # type: ignore[attr-defined]


def test_a_server_that_accepts_and_never_answers_costs_one_timeout_not_one_per_read() -> None:
    """A Prometheus that accepts connections and answers nothing (hung, overloaded): until
    2026-12-07 every read waited its own timeout, so 40 policies took 150 s a cycle, past the
    liveness probe, and the pod was restarted over and over (a review). Once a read has waited a
    whole timeout with nothing else answered, the reads not yet sent fail at once, naming why."""
    from tests.conftest import silent_server

    reqs = [RangeRequest(f"default/w{i}", f"q{i}", 0, 100, 10.0) for i in range(40)]
    with silent_server() as (port, accepted):
        cfg = PrometheusConfig(f"http://127.0.0.1:{port}", timeout_s=0.3, retries=0, max_concurrency=4, batch_size=1)
        with PrometheusClient(cfg) as c:
            got = c.fetch_many(reqs)
        sent = len(accepted)
    assert all(isinstance(g, PrometheusError) and g.kind == "timeout" for g in got)
    # the reads in flight when the first gave up, not all 40
    assert sent <= 2 * cfg.max_concurrency, sent
    unsent = [g for g in got if "were not sent" in g.message]  # type: ignore[union-attr]
    assert len(unsent) >= len(reqs) - 2 * cfg.max_concurrency
    assert "default/w39" in unsent[-1].message and "Check that Prometheus is up" in unsent[-1].message  # type: ignore[union-attr]
