"""``scaleahead demo``: the real loop on the embedded trace, and the same decisions as the replay."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from scaleahead.bench import replay as rp
from scaleahead.demo import simulate
from tests.replay.conftest import cli


def test_a_short_demo_runs_with_no_setup_and_compares_with_the_hpa() -> None:
    proc = cli("demo", "--hours", "0.5")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "forecaster:" in out
    assert "hpa" in out and "oracle" in out and "scaleahead vs HPA" in out
    assert "180 cycles of 10 s" in out
    assert "replay/demo" in out  # the last plan's reason names the workload


def test_the_demo_records_plans_in_sqlite_and_decides_like_the_batched_replay(tmp_path: Path) -> None:
    result = simulate("alibaba-cpu-10s-embedded", hours=1.0, model="naive", db_dir=tmp_path)
    assert (tmp_path / "demo.db").exists()
    assert result.plans_recorded > 0
    assert result.last_report.plan.actions[0].reason.message
    # The same policy and model through the batched replay path: identical outcomes.
    setup = result.setup
    fit_from = max(setup.split.start, setup.split.test_start - 3 * 86400.0)
    model = rp.make_model("naive")
    model.fit([setup.series.between(fit_from, setup.split.test_start)])
    run = rp.run_predictive(setup, model, rp.replay_policy_object(setup, "demo"), "scaleahead")
    again = rp.compute_metrics(
        setup.demand, run.desired, run.allocated, run.ready, setup.capacity, setup.step_s, setup.initial_ready
    )
    assert again == result.metrics["scaleahead"]
    assert np.isfinite(result.metrics["hpa"]["replica_seconds"])


def test_demo_rejects_non_positive_hours() -> None:
    proc = cli("demo", "--hours", "0")
    assert proc.returncode == 2
    assert "--hours" in proc.stderr


@pytest.mark.parametrize("trace", ["nope", "nab-nope", "/no/such/file.csv"])
def test_an_unknown_trace_is_refused_before_the_demo_starts(trace: str) -> None:
    proc = cli("demo", "--trace", trace)
    assert proc.returncode == 2
    assert "Unknown" in proc.stderr or "neither" in proc.stderr
    assert "replaying" not in proc.stdout  # no banner for a demo that never starts


def test_a_demo_asked_for_more_hours_than_the_test_period_says_so(tmp_path: Path) -> None:
    t0 = 1_700_000_000
    rows = [f"{t0 + 60 * i},{50 + 30 * math.sin(i / 200):.3f}" for i in range(4 * 1440)]  # 4 days at 60 s
    (tmp_path / "s.csv").write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    proc = cli("demo", "--trace", str(tmp_path / "s.csv"), "--hours", "48", "--model", "seasonal_naive")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "holds only 24 h; replayed all of it, not the 48 h asked for" in text
    assert "1,440 cycles of 60 s" in text


def test_the_demo_history_holds_only_steps_that_ended_by_now() -> None:
    # At an off-grid now the step in progress is not known yet (no-peeking audit): the demo's
    # history stopped at the step ending after now.
    from scaleahead.demo import TraceHistory
    from scaleahead.policy import parse_policies
    from scaleahead.types import Series

    pols = parse_policies(
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\nmetadata: {name: web}\n"
        "spec: {target: {name: web}, demand: {query: q}, capacityPerReplica: 1}\n"
    )
    series = Series("d", 0.0, 10.0, np.arange(100, dtype=float))
    (part,) = TraceHistory(series, window_s=60.0).read(pols, 505.0).values()
    assert part.values.tolist() == [45.0, 46.0, 47.0, 48.0, 49.0]  # steps [450, 460) .. [490, 500)
    (part,) = TraceHistory(series, window_s=60.0).read(pols, 500.0).values()
    assert part.values.tolist() == [44.0, 45.0, 46.0, 47.0, 48.0, 49.0]
