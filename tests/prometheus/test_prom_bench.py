"""``scaleahead bench fetch`` end to end on a tiny size (the real size is a command, not a test)."""

from __future__ import annotations

from scaleahead.bench.prometheus import run_fetch_bench


def test_bench_fetch_backfills_once_reads_every_point_and_reports_its_numbers(tmp_path) -> None:
    first = run_fetch_bench(tmp_path / "tsdb", n=3, days=0.05, repeats=1)
    assert first["backfill_s"] is not None and first["requests"] == 3
    assert first["points"] == 3 * 432  # 0.05 day at 10 s, nasa's longest stretch has no gaps
    assert first["incremental_requests"] == 1  # 3 short reads batched into one request
    assert first["fetch_s"] > 0 and first["incremental_ms"] > 0
    again = run_fetch_bench(tmp_path / "tsdb", n=3, days=0.05, repeats=1)
    assert again["backfill_s"] is None  # the TSDB is reused
