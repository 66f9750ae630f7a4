"""Range reads from a real Prometheus: round trip with the trace, chunk edges, gaps, parallel reads,
data hygiene (several series, empty, NaN/Inf, counter resets)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from scaleahead.prometheus.client import (
    PrometheusClient,
    PrometheusConfig,
    PrometheusError,
    RangeRequest,
    chunks,
    grid,
)

WEB = 'nasa_requests{workload="web"}'


def client(url: str, **kw: object) -> PrometheusClient:
    return PrometheusClient(PrometheusConfig(url, **kw))  # type: ignore[arg-type]


def test_two_days_read_back_equal_to_the_trace_with_the_outage_missing(prom) -> None:
    with client(prom.url) as c:
        got = c.range_series(RangeRequest("web", WEB, prom.web.start, prom.web.end - 10, 10.0))
    assert got.start == prom.web.start and len(got) == len(prom.web)
    np.testing.assert_array_equal(got.values, prom.web.values)  # NaN where the trace has its outage
    assert np.isnan(got.values[:2880]).all()
    # 17,280 points at 10 s do not fit in one query (11,000 at most): two requests.
    assert c.stats.requests == 2


@pytest.mark.parametrize("max_points", [1, 7, 999, 1000, 8640])
def test_chunk_edges_neither_duplicate_nor_drop_a_point(prom, max_points: int) -> None:
    start, end = prom.web.start + 2880 * 10, prom.web.start + 2880 * 10 + 9999 * 10
    if max_points == 1:
        end = start + 20 * 10
    with client(prom.url, max_points=max_points) as c:
        got = c.range_series(RangeRequest("web", WEB, start, end, 10.0))
    want = prom.web.between(start, end + 10)
    np.testing.assert_array_equal(got.values, want.values)
    assert c.stats.points == len(want)  # every point came exactly once
    assert c.stats.requests == -(-len(want) // max_points)


def test_chunks_cover_the_grid_exactly_once() -> None:
    first, n = grid(1001.0, 1001.0 + 12345 * 10, 10.0)
    assert first == 1010.0 and n == 12345
    parts = chunks(first, n, 10.0, 11000)
    assert parts == [(1010.0, 1010.0 + 10999 * 10), (1010.0 + 11000 * 10, 1010.0 + 12344 * 10)]


def test_unaligned_range_reads_on_the_step_grid(prom) -> None:
    start = prom.web.start + 3000 * 10 + 3  # 3 s after a point
    with client(prom.url) as c:
        got = c.range_series(RangeRequest("web", WEB, start, start + 100 * 10, 10.0))
    assert got.start == prom.web.start + 3001 * 10
    np.testing.assert_array_equal(got.values, prom.web.values[3001:3101])


def test_short_gaps_stay_missing_never_zero_or_carried_forward(prom) -> None:
    w = prom.workers["w01"]
    with client(prom.url) as c:
        got = c.range_series(RangeRequest("w01", 'nasa_requests{workload="w01"}', w.start, w.end - 10, 10.0))
    np.testing.assert_array_equal(got.values, w.values)
    assert np.isnan(got.values[[100, 101, 102, 1000]]).all()


def test_many_workloads_read_in_parallel_each_get_their_own_series(prom) -> None:
    reqs = [
        RangeRequest(k, f'nasa_requests{{workload="{k}"}}', s.start, s.end - 10, 10.0) for k, s in prom.workers.items()
    ]
    reqs.append(RangeRequest("web", WEB, prom.web.start, prom.web.end - 10, 10.0))
    with client(prom.url, max_concurrency=4) as c:
        got = c.fetch_many(reqs)
    for r, g in zip(reqs, got, strict=True):
        assert not isinstance(g, PrometheusError), g
        want = prom.web if r.label == "web" else prom.workers[r.label]
        np.testing.assert_array_equal(g.values, want.values)


def test_short_reads_are_batched_into_few_requests_and_split_back_exactly(prom) -> None:
    w = next(iter(prom.workers.values()))
    start = w.start + 500 * 10
    reqs = [RangeRequest(k, f'nasa_requests{{workload="{k}"}}', start, start + 30 * 10, 10.0) for k in prom.workers]
    with client(prom.url, batch_size=3) as c:
        got = c.fetch_many(reqs)
    assert c.stats.requests == 3  # 8 reads, 3 per request
    for r, g in zip(reqs, got, strict=True):
        assert not isinstance(g, PrometheusError)
        np.testing.assert_array_equal(g.values, prom.workers[r.label].values[500:531])


def test_a_bad_query_in_a_batch_fails_only_its_own_workload(prom) -> None:
    w = prom.workers["w01"]
    start = w.start + 500 * 10
    reqs = [
        RangeRequest("w01", 'nasa_requests{workload="w01"}', start, start + 50, 10.0),
        RangeRequest("broken", "sum(rate(nasa_requests[1m]", start, start + 50, 10.0),
        RangeRequest("w02", 'nasa_requests{workload="w02"}', start, start + 50, 10.0),
    ]
    with client(prom.url) as c:
        got = c.fetch_many(reqs)
    assert not isinstance(got[0], PrometheusError) and not isinstance(got[2], PrometheusError)
    err = got[1]
    assert isinstance(err, PrometheusError) and err.kind == "query"
    assert "broken" in err.message and "sum(rate(nasa_requests[1m]" in err.message


def test_a_query_cannot_close_its_place_in_a_batch_and_rewrite_another_workloads_history(prom) -> None:
    """Found by a security audit: a policy (any tenant's, in its own namespace) whose query closed
    the ``label_replace(`` it was put in and tagged a series of its own with the next workload's
    index replaced that workload's history by 1e6 (and got it scaled to maxReplicas), while its own
    read failed alone. Such a query is never batched now, and one refused alone is read alone for a
    while instead of breaking every batch it joins."""
    tag = "scaleahead_batch_index"
    inject = f'"{tag}", "0", "", "") or label_replace(vector(1e6), "{tag}", "1", "", "") or label_replace('
    w = prom.workers["w01"]
    start = w.start + 500 * 10
    # the first as found by the audit; the second hides its brackets behind "#\r", which Prometheus
    # ends a comment at (found by a review of the first fix, which ended comments at "\n" only)
    for evil in (f"vector(0), {inject}vector(0)", f"vector(0) #\r), {inject}(vector(0)"):
        reqs = [
            RangeRequest("team-a/evil", evil, start, start + 50, 10.0),
            RangeRequest("team-b/w01", 'nasa_requests{workload="w01"}', start, start + 50, 10.0),
        ]
        with client(prom.url) as c:
            got = c.fetch_many(reqs)
            assert isinstance(got[0], PrometheusError) and got[0].kind == "query", evil
            assert not isinstance(got[1], PrometheusError)
            np.testing.assert_array_equal(got[1].values, w.values[500:506])
            assert c.stats.requests == 2, "each alone: the query that does not close its brackets is not batched"
    # balanced but refused alone (a typo): read alone next time, the others batched without it
    typo = RangeRequest("team-a/typo", "sum(nasa_requests) nope", start, start + 50, 10.0)
    ok = [RangeRequest(k, f'nasa_requests{{workload="{k}"}}', start, start + 50, 10.0) for k in ("w01", "w02", "w03")]
    with client(prom.url) as c:
        first = c.fetch_many([typo, *ok])
        assert c.stats.requests == 5, "the batch refused, then each read alone"
        assert isinstance(first[0], PrometheusError) and all(not isinstance(g, PrometheusError) for g in first[1:])
        before = c.stats.requests
        again = c.fetch_many([typo, *ok])
        assert isinstance(again[0], PrometheusError)
        assert c.stats.requests - before == 2, "the typo alone, the three others in one request"


@pytest.mark.parametrize(
    ("query", "ok"),
    [
        ("sum(rate(x[1m]))", True),
        ('sum(x{a=")"})', True),
        ('sum(x{a="\\")"})', True),
        ("sum(x{a='('})", True),
        ("sum(x) # )", True),
        ("`)`", True),
        (
            'vector(0), "t", "0", "", "") or label_replace(vector(1), "t", "1", "", "") or label_replace(vector(0)',
            False,
        ),
        ("sum(x)) # (", False),
        ('vector(0) #\r), "t", "0", "", "") or label_replace((vector(0)', False),
        ("sum(x) #\r", False),
        ("sum(x)\t+ 1", True),
        ("sum(\n  x\n)", True),
        ('x{a="abc', False),
        ("sum(x[5m)]", False),
        ("(", False),
    ],
)
def test_only_queries_that_close_what_they_open_are_batchable(query: str, ok: bool) -> None:
    from scaleahead.prometheus.client import batchable

    assert batchable(query) is ok


def test_several_series_where_one_is_expected_is_an_error_naming_workload_and_query(prom) -> None:
    w = prom.workers["w01"]
    with client(prom.url) as c, pytest.raises(PrometheusError) as info:
        c.range_series(RangeRequest("default/web", "nasa_requests", w.start, w.start + 600, 10.0))
    msg = info.value.message
    assert "default/web" in msg and "'nasa_requests'" in msg and "9 series" in msg and "sum(" in msg


def test_an_empty_result_says_which_workload_which_query_and_what_to_check(prom) -> None:
    with client(prom.url) as c, pytest.raises(PrometheusError) as info:
        c.range_series(
            RangeRequest("default/api", 'nasa_requests{workload="nope"}', prom.web.start, prom.web.end, 10.0)
        )
    msg = info.value.message
    assert "default/api" in msg and 'workload="nope"' in msg and "no data" in msg and "label names" in msg


def test_nan_and_inf_values_are_dropped_with_a_warning_naming_the_series(prom, caplog) -> None:
    start = prom.web.start + 2880 * 10
    # x / 0 is +Inf where the trace is positive and NaN where it is zero.
    query = 'nasa_requests{workload="web"} / 0'
    with client(prom.url) as c, caplog.at_level(logging.WARNING, logger="scaleahead.prometheus"):
        got = c.range_series(RangeRequest("default/web", query, start, start + 999 * 10, 10.0))
    assert np.isnan(got.values).all()
    text = caplog.text
    assert "default/web" in text and "dropped 1000 NaN/Inf" in text and 'workload="web"' in text
    dropped = [
        (r.kind, r.count, r.workload)  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "event", "") == "history_values_dropped"
    ]
    assert dropped == [("nan", 1000, "default/web")]  # an event since 2026-12-06


def test_negative_values_are_dropped_with_a_warning_saying_demand_is_never_negative(prom, caplog) -> None:
    start = prom.web.start + 2880 * 10
    # deriv() of a counter across its reset, or a hand-made difference: here simply minus the trace.
    query = 'nasa_requests{workload="web"} - 1000000'
    with client(prom.url) as c, caplog.at_level(logging.WARNING, logger="scaleahead.prometheus"):
        got = c.range_series(RangeRequest("default/web", query, start, start + 999 * 10, 10.0))
        plain = c.range_series(
            RangeRequest("default/web", 'nasa_requests{workload="web"}', start, start + 999 * 10, 10.0)
        )
    assert np.isnan(got.values).all() and np.isfinite(plain.values).sum() > 900
    assert "default/web" in caplog.text and "dropped 1000 negative value(s)" in caplog.text
    dropped = [(r.kind, r.count) for r in caplog.records if getattr(r, "event", "") == "history_values_dropped"]
    assert dropped == [("negative", 1000)]


def test_a_value_beyond_float32_is_read_as_missing_with_a_warning_naming_the_series(prom, caplog) -> None:
    """An exporter's overflow (1e300) was read as missing everywhere, but silently, unlike NaN, Inf
    and negative samples: now it is said, as they are."""
    from forecaster.base import glitches_as_missing
    from scaleahead.observed import last_finite

    start = prom.web.start + 2880 * 10
    at = start + 500 * 10  # one glitch, at the 501st point of the range
    query = f"{WEB} + 1e300 * (timestamp({WEB}) == bool {at:.0f})"
    with client(prom.url) as c, caplog.at_level(logging.WARNING, logger="scaleahead.prometheus"):
        got = c.range_series(RangeRequest("default/web", query, start, start + 999 * 10, 10.0))
        plain = c.range_series(RangeRequest("default/web", WEB, start, start + 999 * 10, 10.0))
    assert got.values[500] > 1e299, "kept in the series as Prometheus gave it (history counts and blanks it)"
    expected = plain.values.copy()
    expected[500] = np.nan
    np.testing.assert_array_equal(glitches_as_missing(got.values), expected)  # missing, and only that one
    assert last_finite(glitches_as_missing(got.values[:501])) == 499
    text = caplog.text
    assert "default/web" in text and 'workload="web"' in text, text
    assert "1 value(s) beyond the float32 limit (3.4e+38)" in text and "they count as missing" in text, text


def test_a_counter_reset_is_left_to_rate_and_never_gives_negative_demand(prom) -> None:
    r = prom.reset_index
    start = prom.web.start + (r - 100) * 10
    with client(prom.url) as c:
        got = c.range_series(
            RangeRequest("web", 'sum(rate(nasa_requests_total{workload="web"}[1m]))', start, start + 199 * 10, 10.0)
        )
    finite = got.values[np.isfinite(got.values)]
    assert finite.size > 190 and (finite >= 0).all()
    # rate() per second of a counter of requests per 10 s: about the 1-minute mean of the trace / 10.
    want = np.convolve(prom.web.values[r - 100 - 5 : r + 100], np.ones(6) / 6, mode="valid") / 10
    near = np.abs(got.values - want) <= 0.2 * want + 0.5
    assert near[np.isfinite(got.values)].mean() > 0.9


def test_the_garbage_collector_is_paused_only_while_reading(prom) -> None:
    import gc

    from scaleahead.prometheus.client import paused_gc

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with client(prom.url) as c:
        c.fetch_many([RangeRequest("web", WEB, prom.web.start, prom.web.start + 600, 10.0)])
    assert gc.isenabled()
