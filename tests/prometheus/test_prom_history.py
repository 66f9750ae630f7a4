"""``PrometheusHistory``: no peeking, incremental reads, a restart without a full re-read, and one
workload's failure leaving the others' history intact."""

from __future__ import annotations

import numpy as np

from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig
from scaleahead.prometheus.history import PrometheusHistory, last_point_before

HOUR = 3600.0


def source(url: str, window_s: float = 2 * HOUR, cache_dir=None, **kw: object) -> PrometheusHistory:
    return PrometheusHistory(PrometheusClient(PrometheusConfig(url, **kw)), window_s=window_s, cache_dir=cache_dir)  # type: ignore[arg-type]


def test_history_holds_the_steps_known_by_now(prom, make_policy) -> None:
    p = make_policy("web", 'nasa_requests{workload="web"}')
    # A point is known at its timestamp: it is the step that ends there (history.as_steps).
    now = prom.web.start + 5000 * 10  # exactly on a point: that point is known, as the step ending now
    got = source(prom.url).read([p], now)[p.workload]
    assert got.end == now and got.start == now - 2 * HOUR
    np.testing.assert_array_equal(got.values, prom.web.values[5001 - 720 : 5001])
    later = source(prom.url).read([p], now + 9.5)[p.workload]
    assert later.end == now and later.values[-1] == prom.web.values[5000]  # the next point is not there yet
    earlier = source(prom.url).read([p], now - 0.5)[p.workload]
    assert earlier.end == now - 10 and earlier.values[-1] == prom.web.values[4999]  # no peeking
    # The planner counts the newest step's age from its point's time, not a step later.
    from scaleahead.observed import observed_demand

    assert observed_demand(later, 10.0) == (prom.web.values[5000], now)


def test_each_cycle_after_the_first_reads_only_the_new_points(prom, make_policy) -> None:
    policies = [make_policy(k, f'nasa_requests{{workload="{k}"}}') for k in prom.workers]
    now = prom.workers["w01"].start + 4 * HOUR
    hist = source(prom.url)
    first = hist.read(policies, now)
    assert len(first) == 8
    before = hist.client.stats.points
    requests_before = hist.client.stats.requests
    second = hist.read(policies, now + 60)
    # 6 new points and 3 re-read (overlap) per workload, all 8 workloads in one batched request.
    assert hist.client.stats.points - before <= 8 * 9
    assert hist.client.stats.requests - requests_before == 1
    fresh = source(prom.url).read(policies, now + 60)
    for ref, s in second.items():
        assert s.start == fresh[ref].start
        np.testing.assert_array_equal(s.values, fresh[ref].values)


def test_history_survives_a_restart_without_a_full_re_read(prom, make_policy, tmp_path) -> None:
    policies = [make_policy(k, f'nasa_requests{{workload="{k}"}}') for k in prom.workers]
    now = prom.workers["w01"].start + 3 * HOUR
    source(prom.url, cache_dir=tmp_path).read(policies, now)
    restarted = source(prom.url, cache_dir=tmp_path)
    got = restarted.read(policies, now + 120)
    assert restarted.client.stats.points <= 8 * 15  # 12 new + 3 overlap each, not 2 hours each
    fresh = source(prom.url).read(policies, now + 120)
    for ref, s in got.items():
        np.testing.assert_array_equal(s.values, fresh[ref].values)
        w = prom.workers[ref.name]
        # the points at or before now + 120 (each is the step that ends at it)
        np.testing.assert_array_equal(s.values, w.between(now + 130 - 2 * HOUR, now + 130).values)


def test_a_long_run_of_cycles_keeps_the_window_and_the_cache_file_bounded(prom, make_policy, tmp_path) -> None:
    p = make_policy("w02", 'nasa_requests{workload="w02"}')
    w = prom.workers["w02"]
    hist = source(prom.url, window_s=600, cache_dir=tmp_path)
    now = w.start + 700
    for _ in range(200):  # 200 cycles of 10 s: the cached run wraps around several times
        got = hist.read([p], now)[p.workload]
        now += 10
    np.testing.assert_array_equal(got.values, w.between(now - 600, now).values)  # the points at or before now - 10
    sizes = [f.stat().st_size for f in tmp_path.glob("*.f64")]
    assert sizes and max(sizes) <= (1 + 60 + 64) * 8  # start, the window plus its headroom, never the whole run
    # After the compactions (the grid start moved), a restart reads the same history as a fresh read.
    restarted = source(prom.url, window_s=600, cache_dir=tmp_path).read([p], now)[p.workload]
    fresh = source(prom.url, window_s=600).read([p], now)[p.workload]
    assert restarted.start == fresh.start
    np.testing.assert_array_equal(restarted.values, fresh.values)


def test_a_cache_of_the_old_format_is_read_afresh_not_misread(prom, make_policy, tmp_path) -> None:
    import json

    p = make_policy("w04", 'nasa_requests{workload="w04"}')
    now = prom.workers["w04"].start + HOUR
    hist = source(prom.url, cache_dir=tmp_path)
    hist.read([p], now)
    (meta,) = tmp_path.glob("*.json")
    # Format 1 kept the start in the JSON file: a compaction torn between its two renames paired
    # the new values with the old start. Such a file is never loaded.
    meta.write_text(json.dumps({"start": 0.0, "step_s": 10.0, "format": 1}))
    again = source(prom.url, cache_dir=tmp_path)
    got = again.read([p], now)[p.workload]
    np.testing.assert_array_equal(got.values, source(prom.url).read([p], now)[p.workload].values)
    assert again.client.stats.points >= 350  # the whole hour there is, read afresh (not 3 + 0 new points)


def test_a_cache_whose_metadata_is_damaged_is_repaired_not_given_up(prom, make_policy, tmp_path, caplog) -> None:
    """An emptied or damaged `<key>.json`: until 2026-12-07 the next write took the JSON error for a
    failed write, deleted the values and never rewrote the metadata, so every cycle warned and every
    restart read the whole window again (a review)."""
    p = make_policy("w04", 'nasa_requests{workload="w04"}')
    now = prom.workers["w04"].start + HOUR
    source(prom.url, cache_dir=tmp_path).read([p], now)
    (meta,) = tmp_path.glob("*.json")
    meta.write_text("")
    with caplog.at_level("WARNING"):
        source(prom.url, cache_dir=tmp_path).read([p], now + 10)  # read afresh, and the entry rewritten
    assert "cannot write the history cache" not in caplog.text
    again = source(prom.url, cache_dir=tmp_path)
    again.read([p], now + 20)
    assert again.client.stats.points <= 10  # a restart reads only what is new


def test_another_tenant_on_the_same_url_gets_its_own_cache_entry(prom, make_policy, tmp_path) -> None:
    """Mimir or Grafana Cloud: the basic-auth user (or an X-Scope-OrgID header) is the tenant. Until
    2026-12-07 the key held the URL, the query and the step only (a review)."""
    p = make_policy("w04", 'nasa_requests{workload="w04"}')
    now = prom.workers["w04"].start + HOUR
    source(prom.url, cache_dir=tmp_path, username="a", password="x").read([p], now)
    source(prom.url, cache_dir=tmp_path, username="b", password="x").read([p], now)
    source(prom.url, cache_dir=tmp_path, headers={"X-Scope-OrgID": "c"}).read([p], now)
    assert len(list(tmp_path.glob("*.json"))) == 3
    rotated = source(prom.url, cache_dir=tmp_path, username="a", password="rotated")
    rotated.read([p], now)
    assert len(list(tmp_path.glob("*.json"))) == 3 and rotated.client.stats.points <= 10  # the same entry


def test_a_cache_that_cannot_be_written_loses_no_history(prom, make_policy, tmp_path, caplog) -> None:
    p = make_policy("w06", 'nasa_requests{workload="w06"}')
    now = prom.workers["w06"].start + HOUR
    hist = source(prom.url, cache_dir=tmp_path)
    key = hist._key(p.spec.demand.query, p.spec.demand.step_seconds)
    (tmp_path / f"{key}.tmp").mkdir()  # the data file's temporary name cannot be written (as on a full disk)
    with caplog.at_level("WARNING", logger="scaleahead.prometheus"):
        got = hist.read([p], now)
    assert p.workload in got and not hist.errors
    np.testing.assert_array_equal(got[p.workload].values, source(prom.url).read([p], now)[p.workload].values)
    assert "cannot write the history cache" in caplog.text
    assert not (tmp_path / f"{key}.f64").exists()
    assert p.workload in hist.read([p], now + 10), "the next cycle goes on from memory"


def test_one_failing_workload_does_not_stop_the_others(prom, make_policy) -> None:
    good = make_policy("w03", 'nasa_requests{workload="w03"}')
    bad = make_policy("typo", "sum(rate(nasa_requests[1m]")
    empty = make_policy("gone", 'nasa_requests{workload="gone"}')
    now = prom.workers["w03"].start + HOUR
    hist = source(prom.url)
    got = hist.read([good, bad, empty], now)
    assert set(got) == {good.workload}
    assert set(hist.errors) == {bad.workload, empty.workload}
    assert "default/typo" in hist.errors[bad.workload] and "sum(rate(nasa_requests[1m]" in hist.errors[bad.workload]
    assert "default/gone" in hist.errors[empty.workload] and "no data" in hist.errors[empty.workload]


def test_last_point_before_is_strict() -> None:
    assert last_point_before(100.0, 10.0) == 90.0
    assert last_point_before(100.5, 10.0) == 100.0
    assert last_point_before(99.9, 10.0) == 90.0


class _RecordingTarget:
    """A cluster of fixed replica counts that records what the loop applies."""

    def __init__(self) -> None:
        self.applied: list[object] = []

    def read_state(self, workloads):
        from scaleahead.types import ClusterState, WorkloadState

        return ClusterState({w: WorkloadState(w, 2, 2) for w in workloads})

    def apply(self, action):
        from actuator.base import ActionResult

        self.applied.append(action)
        return ActionResult(action, "applied", "")


def test_a_control_cycle_forecasts_from_prometheus_and_falls_back_for_a_broken_query(prom, make_policy) -> None:
    from forecaster import make_model
    from scaleahead.loop import Deps, run_once
    from scaleahead.prometheus.history import history_from_settings
    from scaleahead.settings import PrometheusSettings, Settings

    good = make_policy("w05", 'nasa_requests{workload="w05"}')
    bad = make_policy("typo", "sum(rate(nasa_requests[1m]")
    hist = history_from_settings(PrometheusSettings(url=prom.url))
    model = make_model("window_mean")
    deps = Deps(hist, model, _RecordingTarget(), None, [good, bad])
    report = run_once(deps, Settings(), prom.workers["w05"].start + 5 * HOUR, dry_run=True)
    assert set(report.forecasts) == {good.workload}
    assert bad.workload in report.plan.fallbacks and good.workload not in report.plan.fallbacks
    assert "default/typo" in hist.errors[bad.workload]
    # ... and the cycle's report says so (`run --once` printed "errors": {} before)
    assert report.errors[bad.workload.key].startswith("history: ") and "default/typo" in report.errors[bad.workload.key]
    assert good.workload.key not in report.errors


def test_history_from_settings_without_a_url_says_how_to_set_one() -> None:
    import pytest

    from scaleahead.errors import UserError
    from scaleahead.prometheus.history import history_from_settings
    from scaleahead.settings import PrometheusSettings

    with pytest.raises(UserError, match="SCALEAHEAD_PROMETHEUS__URL"):
        history_from_settings(PrometheusSettings())


def test_series_returned_earlier_never_change_when_a_re_read_point_changes() -> None:
    from scaleahead.types import Series

    hist = source("http://127.0.0.1:9", window_s=100.0)  # nothing is fetched here
    key = hist._key("q", 10.0)
    hist._merge(key, Series("q", 0.0, 10.0, np.array([1.0, 2.0, 3.0, 4.0])))
    earlier = hist._entries[key].values
    buffer = hist._entries[key].buf
    hist._merge(key, Series("q", 20.0, 10.0, np.array([3.0, 4.0, 5.0])))  # overlap unchanged: appended in place
    assert hist._entries[key].buf is buffer
    hist._merge(key, Series("q", 20.0, 10.0, np.array([30.0, 4.0, 5.0, 6.0])))  # a late point changed
    np.testing.assert_array_equal(earlier, [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(hist._entries[key].values, [1.0, 2.0, 30.0, 4.0, 5.0, 6.0])


def test_returned_history_is_read_only(prom, make_policy) -> None:
    import pytest

    p = make_policy("w06", 'nasa_requests{workload="w06"}')
    got = source(prom.url).read([p], prom.workers["w06"].start + HOUR)[p.workload]
    with pytest.raises(ValueError, match="read-only"):
        got.values[0] = 0.0


def test_read_range_gives_each_workload_its_history_for_training(prom, make_policy) -> None:
    from scaleahead.prometheus.history import read_range

    good = make_policy("web", 'nasa_requests{workload="web"}')
    bad = make_policy("gone", 'nasa_requests{workload="gone"}')
    with PrometheusClient(PrometheusConfig(prom.url)) as c:
        series, errors = read_range(c, [good, bad], prom.web.start, prom.web.end)
    np.testing.assert_array_equal(series[good.workload].values, prom.web.values)
    assert set(errors) == {bad.workload} and "default/gone" in errors[bad.workload]


def test_a_released_history_reads_from_its_disk_cache_only_what_is_new(prom, make_policy, tmp_path) -> None:
    policies = [make_policy(k, f'nasa_requests{{workload="{k}"}}') for k in prom.workers]
    now = prom.workers["w01"].start + 3 * HOUR
    hist = source(prom.url, cache_dir=tmp_path)
    kept = hist.read(policies, now)
    hist.release()  # as the daemon does after a retraining: nothing held in memory
    assert hist._entries == {}
    before = hist.client.stats.points
    again = hist.read(policies, now + 120)
    assert hist.client.stats.points - before <= 8 * 15  # from the disk cache: 12 new + 3 overlap each
    fresh = source(prom.url).read(policies, now + 120)
    for ref, s in again.items():
        np.testing.assert_array_equal(s.values, fresh[ref].values)
    assert all(len(s) for s in kept.values())  # what was returned before stays valid


class _Lagging:
    """Makes the test Prometheus (through the ``proxy`` fixture) answer as one whose newest points
    arrive late: a sample at ``T`` is in the answer only once ``T <= seen_until`` (ingestion delay,
    remote write, a slow scrape, Prometheus's clock behind the daemon's). The samples come from the
    real server; only the newer ones are taken out of its JSON answer."""

    def __init__(self) -> None:
        self.seen_until = 0.0

    def __call__(self, doc):  # type: ignore[no-untyped-def]
        result = (doc.get("data") or {}).get("result")
        if isinstance(result, list):
            for series in result:
                series["values"] = [tv for tv in series.get("values", []) if float(tv[0]) <= self.seen_until]
            doc["data"]["result"] = [s for s in result if s["values"]]
        return doc


def _count_asked(hist: PrometheusHistory) -> list[int]:
    """Per read, the grid points asked for (all requests together)."""
    asked: list[int] = []
    fetch = hist.client.fetch_many

    def counting(reqs):  # type: ignore[no-untyped-def]
        asked.append(sum(int(round((r.end - r.start) / r.step_s)) + 1 for r in reqs))
        return fetch(reqs)

    hist.client.fetch_many = counting  # type: ignore[method-assign]
    return asked


def test_a_prometheus_lagging_longer_than_the_overlap_leaves_no_missing_points_behind(
    prom, proxy, make_policy, caplog
) -> None:
    """Until 2026-12-05 a point that was missing when first read was re-read only while it was among
    the ``overlap_steps`` newest (30 s): with Prometheus 60 s behind, every new point was missing
    when read and never read again, so the loop's history stayed stale for ever while a fresh read
    saw data 60 s old (audit F5)."""
    import logging

    p = make_policy("web", 'nasa_requests{workload="web"}')
    lag = _Lagging()
    proxy.state.rewrite = lag
    hist = source(proxy.url)
    asked = _count_asked(hist)
    t0 = prom.web.start + 20 * HOUR
    with caplog.at_level(logging.WARNING, logger="scaleahead.prometheus"):
        for cycle in range(30):  # 5 minutes of 10 s cycles, Prometheus 60 s behind
            now = t0 + 10 * cycle
            lag.seen_until = now - 60
            got = hist.read([p], now)[p.workload]
    fresh = source(proxy.url).read([p], now)[p.workload]
    assert got.start == fresh.start
    np.testing.assert_array_equal(got.values, fresh.values)
    assert np.isfinite(got.values[:-6]).all()  # the newest 6 points (60 s) are not in Prometheus yet
    # A steady lag costs the missing points (6) on top of the new one and the overlap, no more.
    assert max(asked[1:]) <= 6 + 1 + 1
    lagging = [r for r in caplog.records if "lags" in r.getMessage()]
    assert len(lagging) == 1 and "default/web" in lagging[0].getMessage()  # said once, not every cycle


def test_missing_newest_points_are_re_read_only_within_the_look_back(prom, proxy, make_policy) -> None:
    """A query whose newest points stay missing (Prometheus 20 minutes behind, or a series that
    ended) costs at most the look-back per cycle, not the window."""
    p = make_policy("web", 'nasa_requests{workload="web"}')
    lag = _Lagging()
    proxy.state.rewrite = lag
    hist = source(proxy.url)
    asked = _count_asked(hist)
    t0 = prom.web.start + 20 * HOUR
    for cycle in range(150):
        now = t0 + 10 * cycle
        lag.seen_until = now - 1200
        hist.read([p], now)
    assert max(asked[1:]) <= hist.missing_lookback_s / 10 + 2
    # Once the whole look-back is missing (20 minutes behind, or ended) only the overlap is read
    # again: the new point and the 3 before it, as for a series with no gap.
    assert asked[-1] <= 4, asked[-10:]


def _ahead_then_corrected(prom, proxy, make_policy, tmp_path, ahead: float):  # type: ignore[no-untyped-def]
    """A daemon whose clock ran ``ahead`` s ahead of Prometheus's for 1,000 s of cycles, then was
    corrected: the history read after the correction, and a fresh read at the same time."""
    p = make_policy("web", 'nasa_requests{workload="web"}')
    lag = _Lagging()
    proxy.state.rewrite = lag
    hist = source(proxy.url, cache_dir=tmp_path)
    real0 = prom.web.start + 20 * HOUR
    for cycle in range(100):
        real = real0 + 10 * cycle
        lag.seen_until = real
        hist.read([p], real + ahead)  # the daemon's clock is ahead
    key = next(iter(hist._entries))
    assert hist._entries[key].start < real + 10 - 2 * HOUR  # the cache is kept across the correction
    real += 10
    lag.seen_until = real
    return p, hist, real


def test_after_the_daemons_clock_is_corrected_backwards_its_history_has_no_holes(
    prom, proxy, make_policy, tmp_path
) -> None:
    """Until 2026-12-05 the points the cache held beyond the corrected clock (read while it ran
    ahead, so missing) were never read again: the history kept a hole of the clock's error (audit
    F6). Now the cache is cut back to the corrected clock and the missing points re-read."""
    for ahead in (300.0, 900.0):  # within and beyond the look-back for missing points
        d = tmp_path / str(int(ahead))
        p, hist, real = _ahead_then_corrected(prom, proxy, make_policy, d, ahead)
        got = hist.read([p], real)[p.workload]
        fresh = source(proxy.url).read([p], real)[p.workload]
        assert got.end == real and got.start == fresh.start
        np.testing.assert_array_equal(got.values, fresh.values)
        assert np.isfinite(got.values).all()
        # and a daemon restarted on the disk cache after the correction
        p, hist, real = _ahead_then_corrected(prom, proxy, make_policy, tmp_path / f"{int(ahead)}-restart", ahead)
        restarted = source(proxy.url, cache_dir=tmp_path / f"{int(ahead)}-restart")
        got = restarted.read([p], real)[p.workload]
        np.testing.assert_array_equal(got.values, fresh.values)
        later = restarted.read([p], real + 10)[p.workload]  # the cut-back file goes on growing normally
        assert later.end == real + 10 and np.isfinite(later.values[:-1]).all()
        key = next(iter(restarted._entries))
        assert restarted._paths(key)[1].stat().st_size == 8 * (1 + restarted._entries[key].n)  # the file cut back too


def test_a_failed_read_right_after_the_clock_was_corrected_leaves_no_hole(prom, proxy, make_policy, tmp_path) -> None:
    """The review's case: the first read after the correction fails (a 503, retries included);
    the window is read again at the next cycle, not only the 10-minute look-back (the hole of the
    hour the clock ran ahead stayed for good), and no lag is blamed on Prometheus for it."""
    import logging

    p, hist, real = _ahead_then_corrected(prom, proxy, make_policy, tmp_path, 900.0)
    from dataclasses import replace

    hist.client.config = replace(hist.client.config, retries=0)
    proxy.state.fail_first = 1
    assert p.workload not in hist.read([p], real)  # failed: reported in hist.errors
    assert p.workload in hist.errors
    logger = logging.getLogger("scaleahead.prometheus")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        got = hist.read([p], real + 10)[p.workload]
    finally:
        logger.removeHandler(handler)
    fresh = source(proxy.url).read([p], real + 10)[p.workload]
    np.testing.assert_array_equal(got.values, fresh.values)
    assert not [r for r in records if getattr(r, "event", "") == "prometheus_lag"]


def test_an_ended_series_reads_only_the_overlap_whatever_its_step(prom, proxy, make_policy) -> None:
    """The look-back's 600 s is no whole number of 45 s steps: an ended series read 14 points a
    cycle for ever instead of the overlap's 4."""
    p = make_policy("web", 'nasa_requests{workload="web"}', step=45.0)
    lag = _Lagging()
    proxy.state.rewrite = lag
    hist = source(proxy.url)
    asked = _count_asked(hist)
    t0 = prom.web.start + 20 * HOUR
    lag.seen_until = t0 - 3600  # ended an hour ago
    for cycle in range(40):
        hist.read([p], t0 + 45 * cycle)
    assert asked[-1] <= 4, asked[-10:]


def _cache_keys(folder) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.name.split(".")[0] for f in folder.iterdir()}


def test_retain_drops_the_history_of_queries_no_policy_uses_any_more(prom, make_policy, tmp_path) -> None:
    """Until 2026-12-05 nothing dropped a removed workload's window: with workloads replaced over
    time, memory and the cache folder grew for ever (soak audit finding 1). ``retain`` with the
    policies in force drops, in memory and on disk, what none of them uses; a query two policies
    share stays while either uses it, and a workload that comes back reads its window afresh."""
    policies = [make_policy(k, f'nasa_requests{{workload="{k}"}}') for k in prom.workers]
    twin = make_policy("twin", 'nasa_requests{workload="w01"}')  # shares w01's query
    now = prom.workers["w01"].start + 3 * HOUR
    hist = source(prom.url, cache_dir=tmp_path)
    hist.read([*policies, twin], now)
    assert len(hist._entries) == 8 and len(list(tmp_path.iterdir())) == 16
    keep = [twin, *policies[1:4]]  # w01 removed, but its twin still uses its query
    assert hist.retain(keep) == 4
    kept = {hist._key(p.spec.demand.query, 10.0) for p in keep}
    assert set(hist._entries) == kept and set(hist._keys.values()) == kept
    assert _cache_keys(tmp_path) == kept and len(list(tmp_path.iterdir())) == 8
    assert hist.retain(keep) == 0  # nothing more to drop
    # the kept ones go on incrementally; a removed one that comes back reads its window afresh
    before = hist.client.stats.points
    got = hist.read([*keep, policies[5]], now + 60)
    assert hist.client.stats.points - before <= 4 * 9 + 720
    fresh = source(prom.url).read([*keep, policies[5]], now + 60)
    for ref, s in got.items():
        np.testing.assert_array_equal(s.values, fresh[ref].values)
    # and a restart on the folder loads only what was kept
    restarted = source(prom.url, cache_dir=tmp_path)
    restarted.read(keep, now + 60)
    assert restarted.client.stats.points <= 4 * 9


def test_retain_also_forgets_the_queries_the_client_reads_alone(prom, make_policy) -> None:
    """A query Prometheus refuses is read alone for a while (not batched); the client's memory of it
    stayed for good once its policy was removed, since it was never read again (found by a review).
    ``retain`` forgets it with the policy; one still in force is kept."""
    good = make_policy("w01", 'nasa_requests{workload="w01"}')
    typo = make_policy("typo", "sum(nasa_requests) nope")
    other = make_policy("other", "sum(nasa_requests) nope too")
    now = prom.workers["w01"].start + 3 * HOUR
    hist = source(prom.url)
    hist.read([good, typo, other], now)
    assert set(hist.client._alone) == {"sum(nasa_requests) nope", "sum(nasa_requests) nope too"}
    hist.retain([good, other])
    assert set(hist.client._alone) == {"sum(nasa_requests) nope too"}


def test_retain_with_a_policy_whose_query_changed_drops_the_old_query(prom, make_policy, tmp_path) -> None:
    old = make_policy("web", 'nasa_requests{workload="w01"}')
    new = make_policy("web", 'nasa_requests{workload="w02"}')
    hist = source(prom.url, cache_dir=tmp_path)
    hist.read([old], prom.workers["w01"].start + 3 * HOUR)
    hist.read([new], prom.workers["w01"].start + 3 * HOUR + 10)
    assert len(hist._entries) == 2
    assert hist.retain([new]) == 1
    assert set(hist._entries) == _cache_keys(tmp_path) == {hist._key(new.spec.demand.query, 10.0)}


def test_prune_cache_deletes_the_files_older_than_the_window_of_queries_not_held(prom, make_policy, tmp_path) -> None:
    """A workload removed while no process held it leaves its files, which ``retain`` never sees:
    ``prune_cache`` deletes the cache files not written for longer than the window, except those of
    queries this process holds; files that are not the cache's stay."""
    import os
    import time

    policies = [make_policy(k, f'nasa_requests{{workload="{k}"}}') for k in ("w01", "w02", "w03")]
    now = prom.workers["w01"].start + 3 * HOUR
    source(prom.url, cache_dir=tmp_path).read(policies, now)  # a process that stopped
    restarted = source(prom.url, cache_dir=tmp_path)
    restarted.read(policies[:1], now + 60)  # w02 and w03 were removed while it was down
    namer = source(prom.url)  # the keys, without making them held by the restarted history
    w01, w02, w03 = (namer._key(p.spec.demand.query, 10.0) for p in policies)
    (tmp_path / "notes.txt").write_text("not the cache's")
    old = time.time() - 2 * HOUR - 60  # older than the window (2 hours)
    for f in tmp_path.iterdir():
        if not f.name.startswith(w03):
            os.utime(f, (old, old))
    assert restarted.prune_cache() == 2  # w02's pair; w03 was written recently, w01 is held
    assert _cache_keys(tmp_path) == {w01, w03, "notes"}
    assert restarted.prune_cache(now=time.time() + 2 * HOUR + 60) == 2  # w03's, once a window old
    assert _cache_keys(tmp_path) == {w01, "notes"}
    assert source(prom.url).prune_cache() == 0  # no cache folder: nothing to do
