"""The daemon on a virtual clock: many cycles against SQLite, a real trace and an in-memory cluster."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from daemon_helpers import metric_value

from scaleahead.daemon import Daemon, LiveError, PolicyStatus
from scaleahead.errors import DataError
from scaleahead.observability import serve
from scaleahead.settings import Settings
from scaleahead.types import Forecast, ScaleTo, Series, WorkloadRef

DAY = 86400.0


def test_the_daemon_runs_many_cycles_on_a_virtual_clock_and_records_them(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, target, store = daemon_factory(n=3)
    t0 = clock.now()
    last: dict[WorkloadRef, Forecast] = {}  # the forecasts of the last cycle, as scored by LiveError
    observe = daemon.live.observe

    def keep_last(forecasts, *args, **kwargs):  # type: ignore[no-untyped-def]
        last.clear()
        last.update(forecasts)
        return observe(forecasts, *args, **kwargs)

    daemon.live.observe = keep_last  # type: ignore[method-assign]
    ticks = daemon.run(lambda: False, max_ticks=600)
    assert ticks == 600
    # 600 ticks of 10 s: the virtual clock advanced exactly 599 intervals (no sleep after the last).
    assert clock.now() == pytest.approx(t0 + 599 * 10.0)
    assert store.count_plans() > 0
    assert store.count_forecasts() > 0
    assert target.applied, "the loop scaled something over 100 minutes of real demand"
    assert metric_value(daemon, "scaleahead_cycles_total", result="ok") == 600
    assert metric_value(daemon, "scaleahead_phase_seconds_count", phase="forecast") == 600
    # Every workload got a planned and a current replica count and a forecast at each exported lead.
    for p in daemon.deps.policies:
        key = p.workload.key
        assert metric_value(daemon, "scaleahead_planned_replicas", workload=key) == target.replicas[p.workload]
        # The forecast gauges are the last forecast at the step that ends lead_s after its origin.
        fc = last[p.workload]
        assert fc.origin == clock.now() and fc.step_s == 10.0 and fc.horizon_steps >= 90
        q90_at_900 = metric_value(daemon, "scaleahead_forecast", workload=key, quantile="0.9", lead_s="900")
        q50_at_900 = metric_value(daemon, "scaleahead_forecast", workload=key, quantile="0.5", lead_s="900")
        assert q90_at_900 == float(fc.quantile(0.9)[89])  # steps 0..89 end at 10 s .. 900 s
        assert q50_at_900 == float(fc.quantile(0.5)[89])
        assert q90_at_900 > q50_at_900
        assert metric_value(daemon, "scaleahead_forecast", workload=key, quantile="0.9", lead_s="60") == float(
            fc.quantile(0.9)[5]
        )
    assert daemon.live.matured > 0, "forecasts older than the horizon were scored against later demand"


def test_a_failing_workload_backs_off_without_stopping_the_others(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, target, _ = daemon_factory(n=2)
    bad, good = (p.workload for p in daemon.deps.policies)
    target.fail = {bad.key}
    skipped_at: list[float] = []
    acted_good = 0
    for _ in range(60):
        res = daemon.tick(clock.now())
        if bad.key in res.skipped:
            skipped_at.append(res.now)
        if res.report is not None:
            acted_good += sum(1 for r in res.report.results if r.action.target == good.key)
        clock.sleep(10.0)
    assert acted_good == 60, "the healthy workload was planned in every cycle"
    assert skipped_at, "the failing workload sat out cycles"
    # Back-off doubles per consecutive failure: 10, 20, 40, 80, 160 s ... capped at max_backoff_s.
    assert daemon.backoff.failures[bad.key] >= 4
    assert metric_value(daemon, "scaleahead_workload_errors_total", workload=bad.key, stage="action") >= 4
    # Once the error is gone the workload comes back and its back-off is cleared.
    target.fail = set()
    for _ in range(40):
        daemon.tick(clock.now())
        clock.sleep(10.0)
    assert bad.key not in daemon.backoff.failures


def test_a_failed_cycle_backs_off_the_loop_and_it_recovers(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, target, _ = daemon_factory(n=1)
    target.fail_reads = True
    times: list[float] = []

    def stop() -> bool:
        times.append(clock.now())
        if len(times) == 6:
            target.fail_reads = False
        return len(times) > 12

    daemon.run(stop)
    gaps = [round(b - a) for a, b in zip(times, times[1:], strict=False)]
    # The loop checks stop() twice per tick (before and after); tick starts are every other entry.
    starts = times[::2]
    tick_gaps = [round(b - a) for a, b in zip(starts, starts[1:], strict=False)]
    assert tick_gaps[:2] == [20, 30], f"interval + growing back-off after failed cycles, got {gaps}"
    assert metric_value(daemon, "scaleahead_cycles_total", result="error") >= 2
    assert metric_value(daemon, "scaleahead_cycles_total", result="ok") >= 1
    assert daemon.health.readiness()[0]


def test_a_long_back_off_is_not_a_hang_to_the_liveness_probe(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    # The database or API down for minutes: the back-off grows past the probe's 60 s, but the loop
    # is waiting on purpose, so /healthz stays 200 (the probe restarting it would not help).
    daemon, clock, target, _ = daemon_factory(n=1)
    target.fail_reads = True
    live: list[bool] = []
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        for _ in range(int(seconds // 5)):
            clock.sleep(5.0)
            live.append(daemon.health.liveness()[0])
        clock.sleep(seconds % 5)

    daemon.run(lambda: False, sleep=sleep, max_ticks=7)
    assert max(waits) > daemon.health.stale_after_s, f"the back-off outgrew the probe's limit: {waits}"
    assert live and all(live)
    clock.sleep(daemon.health.stale_after_s + max(waits) + 1)  # and a loop that stops ticking is still caught
    assert not daemon.health.liveness()[0]


def test_tick_lateness_is_recorded(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, _, _ = daemon_factory(n=1)
    inner = daemon.history.inner

    class SlowHistory:
        def read(self, policies, now):  # type: ignore[no-untyped-def]
            clock.sleep(25.0)  # a read that takes longer than the interval
            return inner.read(policies, now)

    daemon.history.inner = SlowHistory()
    daemon.run(lambda: False, max_ticks=4)
    assert metric_value(daemon, "scaleahead_tick_lateness_seconds_sum") > 0
    assert metric_value(daemon, "scaleahead_tick_lateness_seconds_count") == 4


def test_scheduled_retraining_registers_a_challenger_rollout_not_production(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    settings = Settings()
    settings.jobs.retrain_cron = "0 * * * *"  # every hour
    daemon, _, _, store = daemon_factory(n=2, settings=settings, reference_error=100.0)  # no drift
    production = daemon.deps.forecaster
    daemon.run(lambda: False, max_ticks=400)  # 04:00 to 05:06: the hour marks 04:00 and 05:00
    assert len(daemon.retrained) == 2, "the hourly retraining ran at each hour mark"
    result = daemon.retrained[-1]
    model = store.model(result.model_version_id)
    assert model.status == "challenger"
    assert model.metrics["trigger"] == "schedule"
    assert model.metrics["series"] == 2
    rollouts = store.rollouts(state="running")
    assert [r.challenger for r in rollouts] == [str(result.model_version_id)]
    assert rollouts[0].mode == "shadow"
    assert rollouts[0].champion == production.name
    assert rollouts[0].params["salt"] == f"default:{result.model_version_id}", "started via the RolloutBook"
    assert daemon.deps.forecaster is production, "a retrained model never goes straight into production"
    assert metric_value(daemon, "scaleahead_job_runs_total", job_name="retrain", result="ok") >= 1


class _NoTrainingHistory:
    def read(self, policies: object, now: float) -> object:
        raise DataError("the training history is empty (test).", "Give history.")


def test_a_failed_job_is_counted_once_as_an_error_with_its_time(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    settings = Settings()
    settings.jobs.retrain_cron = "0 * * * *"
    daemon, clock, _, _ = daemon_factory(n=1, settings=settings, reference_error=100.0)
    daemon.training_history = _NoTrainingHistory()
    # Exported at 0 before any run, so an alert sees the first failure as an increase.
    for job in ("retrain", "prune", "accuracy_report"):
        for result in ("ok", "error"):
            assert metric_value(daemon, "scaleahead_job_runs_total", job_name=job, result=result) == 0
    assert metric_value(daemon, "scaleahead_cycles_total", result="error") == 0
    assert metric_value(daemon, "scaleahead_actions_total", kind="ScaleTo", result="failed") == 0
    daemon.run(lambda: False, max_ticks=400)  # the hour marks 04:00 and 05:00
    assert metric_value(daemon, "scaleahead_job_runs_total", job_name="retrain", result="error") == 2
    assert metric_value(daemon, "scaleahead_job_runs_total", job_name="retrain", result="ok") == 0
    last = metric_value(daemon, "scaleahead_job_last_run_timestamp_seconds", job_name="retrain", result="error")
    assert last % 3600 == 0 and clock.now() - 3600 < last <= clock.now(), "the 05:00 run"
    assert not daemon.retrained


def test_retraining_never_steps_on_a_rollout_someone_else_started(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    from actuator.rollouts import RolloutBook

    settings = Settings()
    settings.jobs.retrain_cron = "*/10 * * * *"
    daemon, clock, _, store = daemon_factory(n=1, settings=settings, reference_error=100.0)
    mine = RolloutBook(store).start("default", "canary", "seasonal_naive", "window_mean", clock.now())
    daemon.run(lambda: False, max_ticks=100)
    assert daemon.retrained, "models were still trained and registered"
    assert [r.id for r in store.rollouts(state="running")] == [mine]
    assert all(store.model(r.model_version_id).status == "challenger" for r in daemon.retrained)


def test_the_daemon_keeps_only_the_last_retraining_results(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """``retrained`` kept every result, each with its fitted model, for the life of the process."""
    from scaleahead.daemon import RETRAINED_KEPT

    settings = Settings()
    settings.jobs.retrain_cron = "* * * * *"  # every minute
    daemon, _, _, store = daemon_factory(n=1, settings=settings, reference_error=100.0)
    daemon.run(lambda: False, max_ticks=6 * (RETRAINED_KEPT + 3))
    runs = metric_value(daemon, "scaleahead_job_runs_total", job_name="retrain", result="ok")
    assert runs > RETRAINED_KEPT
    registered = sorted(m.id for m in store.models())
    assert len(registered) == runs
    assert [r.model_version_id for r in daemon.retrained] == registered[-RETRAINED_KEPT:], "the newest, in order"
    assert daemon.trial is not None and daemon.trial[1] is daemon.retrained[-1], "the newest is still followed"


def test_a_newer_challenger_supersedes_a_running_retrained_one(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    settings = Settings()
    settings.jobs.retrain_cron = "*/10 * * * *"
    daemon, _, _, store = daemon_factory(n=1, settings=settings, reference_error=100.0)
    daemon.run(lambda: False, max_ticks=200)  # 33 minutes: three retrainings
    assert len(daemon.retrained) >= 3
    running = store.rollouts(state="running")
    assert [r.challenger for r in running] == [str(daemon.retrained[-1].model_version_id)]
    assert len(store.rollouts(state="superseded")) == len(daemon.retrained) - 1


def test_live_error_past_the_drift_limit_triggers_a_retraining(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    settings = Settings()
    settings.jobs.drift_min_forecasts = 2
    settings.jobs.error_sample_interval_s = 60.0
    # A reference error far below anything real: the live error is bound to exceed 1.5 x it.
    daemon, _, _, store = daemon_factory(n=1, settings=settings, reference_error=0.01)
    daemon.run(lambda: False, max_ticks=200)  # 33 min: forecasts (15 min horizon) mature and are scored
    assert daemon.retrained, "drift triggered a retraining"
    assert daemon.retrained[0].metrics["trigger"] == "drift"
    assert store.rollouts()[0].results["trigger"] == "drift"
    assert metric_value(daemon, "scaleahead_live_forecast_error_overall") >= 0


def test_no_drift_retraining_while_live_error_is_within_the_limit(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    settings = Settings()
    settings.jobs.drift_min_forecasts = 2
    settings.jobs.error_sample_interval_s = 60.0
    daemon, _, _, store = daemon_factory(n=1, settings=settings, reference_error=100.0)
    daemon.run(lambda: False, max_ticks=200)
    assert daemon.live.matured >= 2
    assert not daemon.retrained
    assert store.rollouts() == []


def test_the_accuracy_report_is_written_on_its_schedule(daemon_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings()
    settings.jobs.report_cron = "*/30 * * * *"
    daemon, _, _, _ = daemon_factory(n=2, settings=settings, report_dir=tmp_path / "reports")
    daemon.run(lambda: False, max_ticks=400)
    assert daemon.reports
    doc = json.loads(daemon.reports[-1].read_text())
    assert set(doc["workloads"]) == {p.workload.key for p in daemon.deps.policies}
    for stats in doc["workloads"].values():
        assert stats["forecasts"] >= 1
        assert 0 <= stats["coverage_q90"] <= 1
        assert stats["wape"] >= 0


def test_a_report_that_cannot_be_written_keeps_its_counts_for_the_next_one(  # type: ignore[no-untyped-def]
    daemon_factory, tmp_path: Path, caplog
) -> None:
    """The reports folder replaced by a file: the job fails saying so (no traceback), and nothing
    scored is lost: the next report covers the whole period since the last one written."""
    from datetime import UTC, datetime

    reports = tmp_path / "reports"
    daemon, clock, _, _ = daemon_factory(n=2, report_dir=reports)
    start = clock.now()
    daemon.run(lambda: False, max_ticks=200)  # ~33 min: forecasts mature and are scored
    before = {ref.key: d.forecasts for ref, d in daemon.live.daily.items()}
    assert len(before) == 2 and all(n > 0 for n in before.values())
    reports.write_text("not a folder")
    now = clock.now()
    with caplog.at_level("WARNING", logger="scaleahead"):
        assert daemon._record_job("accuracy_report", now, lambda: daemon.accuracy_report(now)) is None
    assert metric_value(daemon, "scaleahead_job_runs_total", job_name="accuracy_report", result="error") == 1
    assert {ref.key: d.forecasts for ref, d in daemon.live.daily.items()} == before
    assert daemon.report_since == start and not daemon.reports
    (failed,) = [r for r in caplog.records if getattr(r, "event", "") == "job_failed"]
    said = failed.getMessage()
    assert str(reports / "accuracy-") in said and "counts are kept" in said and "Make " in said
    assert failed.exc_info is None, "a foreseeable failure gets no traceback"
    reports.unlink()
    daemon.run(lambda: False, max_ticks=200)  # more forecasts are scored meanwhile
    now = clock.now()
    path = daemon.accuracy_report(now)
    assert path is not None and list(daemon.reports) == [path]
    doc = json.loads(path.read_text())
    assert doc["period_start"] == datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for key, n in before.items():
        assert doc["workloads"][key]["forecasts"] > n, "the scores of the failed period are in the next report"
    assert [p.name for p in reports.iterdir()] == [path.name], "no temporary file is left"
    assert daemon.live.daily == {} and daemon.report_since == now


def test_the_daily_accuracy_of_hand_built_forecasts_is_exact() -> None:
    """Known errors in, exact WAPE, MAE and q90 coverage out (per workload and per model version)."""
    a = WorkloadRef("Deployment", "shop", "a")
    b = WorkloadRef("Deployment", "shop", "b")
    origin, step = 1_000_000.0, 10.0

    def forecast(ref: WorkloadRef, median: list[float], q90: list[float]) -> Forecast:
        return Forecast(ref, origin, step, {0.5: np.array(median), 0.9: np.array(q90)})

    def series(ref: WorkloadRef, values: list[float]) -> Series:
        return Series(ref.key, origin, step, np.array(values))

    # a: median 10 against 8 at each of 4 steps; q90 covers steps 2-4 (8 > 7 at step 1).
    # b: median 5 against 4, 6, missing, 5; q90 6 covers all three observed steps.
    forecasts = {
        a: forecast(a, [10.0] * 4, [7.0, 12.0, 12.0, 12.0]),
        b: forecast(b, [5.0] * 4, [6.0] * 4),
    }
    history = {a: series(a, [8.0] * 4), b: series(b, [4.0, 6.0, float("nan"), 5.0])}
    live = LiveError(sample_interval_s=300.0)
    live.observe(forecasts, {}, now=origin, versions={b: 3})
    assert live.matured == 0, "nothing is scored before its horizon has passed"
    live.observe({}, history, now=origin + 4 * step)
    per, totals = live.take_daily()
    assert per == {
        a.key: {
            "forecasts": 1,
            "steps": 4,
            "mae": pytest.approx(2.0),  # |10 - 8| per step
            "wape": pytest.approx(8.0 / 32.0),  # 4 * 2 over 4 * 8
            "coverage_q90": pytest.approx(0.75),  # 3 of 4 steps at or under the q90
            "forecasts_by_model_version": {"none": 1},
        },
        b.key: {
            "forecasts": 1,
            "steps": 3,  # the missing step is not scored
            "mae": pytest.approx(2.0 / 3.0),  # (1 + 1 + 0) / 3
            "wape": pytest.approx(2.0 / 15.0),  # 2 over 4 + 6 + 5
            "coverage_q90": pytest.approx(1.0),  # 4, 6 and 5 are all <= 6
            "forecasts_by_model_version": {"3": 1},
        },
    }
    assert totals == {"3": 1, "none": 1}
    assert live.matured == 2
    assert live.overall() == pytest.approx((0.25 + 2.0 / 15.0) / 2)
    assert live.take_daily() == ({}, {}), "taking the day's numbers resets them"


def test_counts_taken_for_a_report_that_fails_are_put_back_with_those_scored_meanwhile() -> None:
    a = WorkloadRef("Deployment", "shop", "a")
    origin, step = 1_000_000.0, 10.0
    live = LiveError(sample_interval_s=300.0)

    def score(at: float, version: int | None) -> None:
        fc = Forecast(a, at, step, {0.5: np.full(4, 10.0), 0.9: np.full(4, 12.0)})
        live.observe({a: fc}, {}, now=at, versions={a: version})
        live.observe({}, {a: Series(a.key, at, step, np.full(4, 8.0))}, now=at + 4 * step)

    score(origin, 1)

    def write_fails() -> None:
        with live.daily_taken() as (per, _):
            assert per[a.key]["forecasts"] == 1
            score(origin + 600.0, 2)  # scored on the loop's thread while the report is being written
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_fails()
    per, totals = live.take_daily()
    assert per[a.key]["forecasts"] == 2 and per[a.key]["steps"] == 8
    assert per[a.key]["mae"] == pytest.approx(2.0)
    assert totals == {"1": 1, "2": 1}


def test_a_workload_forgotten_while_a_report_fails_is_not_put_back() -> None:
    """Its policy was removed while the report was being written (found in review: the put-back
    restored it, and the next report listed a workload without a policy)."""
    a, b = WorkloadRef("Deployment", "shop", "a"), WorkloadRef("Deployment", "shop", "b")
    origin, step = 1_000_000.0, 10.0
    live = LiveError(sample_interval_s=300.0)
    for ref in (a, b):
        fc = Forecast(ref, origin, step, {0.5: np.full(4, 10.0), 0.9: np.full(4, 12.0)})
        live.observe({ref: fc}, {}, now=origin)
        live.observe({}, {ref: Series(ref.key, origin, step, np.full(4, 8.0))}, now=origin + 4 * step)

    def write_fails() -> None:
        with live.daily_taken() as (per, _):
            assert set(per) == {a.key, b.key}
            live.forget({a.key})  # a policy reload on the loop's thread
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_fails()
    per, _ = live.take_daily()
    assert set(per) == {b.key}


def test_pruning_runs_on_schedule_and_keeps_recent_records(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    settings = Settings()
    settings.jobs.prune_cron = "*/20 * * * *"
    settings.jobs.forecast_retention_days = 600 / DAY  # keep 10 minutes
    settings.jobs.plan_retention_days = 600 / DAY
    daemon, clock, _, store = daemon_factory(n=2, settings=settings)
    t0 = clock.now()
    assert t0 % 1200 == 0, "the run starts on a 20-minute mark"
    daemon.run(lambda: False, max_ticks=250)  # t0 .. t0 + 2490 s
    # Runs at t0, t0 + 20 min and t0 + 40 min, each with the time of its tick.
    assert metric_value(daemon, "scaleahead_job_runs_total", job_name="prune", result="ok") == 3
    last_prune = metric_value(daemon, "scaleahead_job_last_run_timestamp_seconds", job_name="prune", result="ok")
    assert last_prune == t0 + 2400
    # Every cycle forecasts; the store keeps one per workload per forecast_interval_s (from t0 on).
    made = [t0 + k * store.forecast_interval_s for k in range(int(2490 // store.forecast_interval_s) + 1)]
    cutoff = last_prune - 600  # forecast_retention_days: 10 minutes before the last prune
    kept = [t for t in made if t >= cutoff]
    assert made[0] < cutoff and kept[0] == cutoff and len(kept) >= 3
    for p in daemon.deps.policies:
        # Those within the retention before the last prune survive (the one at its edge too), and
        # those made since; nothing older does.
        assert [f.origin for f in store.forecasts(p.workload)] == kept, p.workload.key


def test_pruning_deletes_unneeded_checkpoints_and_only_their_files_in_the_artifact_folder(  # type: ignore[no-untyped-def]
    daemon_factory, tmp_path: Path
) -> None:
    import time

    folder = tmp_path / "artifacts"
    daemon, _, _, store = daemon_factory(n=1, artifact_dir=folder)
    folder.mkdir()
    elsewhere = tmp_path / "trained-by-hand.ckpt"
    ids = {}
    for name, status, path in (
        ("champion", "champion", folder / "lstm-1.ckpt"),
        ("lost", "challenger", folder / "lstm-2.ckpt"),
        ("by-hand", "candidate", elsewhere),
    ):
        path.write_bytes(b"checkpoint " + name.encode())
        ids[name] = store.register_model(
            name, "lstm", status=status, artifact_path=str(path), artifact=path.read_bytes()
        )
    out = daemon.prune(time.time() + 40 * DAY)  # every version is older than model_retention_days (30)
    assert out["checkpoints"] == 2 and out["checkpoint_files"] == 1
    assert store.models_with_artifacts() == {ids["champion"]}
    assert (folder / "lstm-1.ckpt").is_file() and not (folder / "lstm-2.ckpt").exists()
    assert elsewhere.is_file(), "a file outside the daemon's artifact folder is not the daemon's to delete"


def test_a_checkpoint_file_that_cannot_be_deleted_keeps_its_version_for_the_next_prune(  # type: ignore[no-untyped-def]
    daemon_factory, tmp_path: Path, monkeypatch, caplog
) -> None:
    """One file refuses deletion (a read-only volume): it is named with the reason, its version keeps
    its stored checkpoint, the others are pruned, and the next prune deletes both."""
    import time

    folder = tmp_path / "artifacts"
    daemon, _, _, store = daemon_factory(n=1, artifact_dir=folder)
    folder.mkdir()
    ids = {}
    for i in range(3):
        path = folder / f"lstm-{i}.ckpt"
        path.write_bytes(b"checkpoint")
        ids[path.name] = store.register_model(
            f"m{i}", "lstm", status="challenger", artifact_path=str(path), artifact=b"checkpoint"
        )
    stuck = folder / "lstm-1.ckpt"
    unlink = Path.unlink

    def refuse(self: Path, missing_ok: bool = False) -> None:
        if self == stuck:
            raise PermissionError(13, "Permission denied", str(self))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse)
    now = time.time() + 40 * DAY  # every version is older than model_retention_days (30)
    with caplog.at_level("WARNING", logger="scaleahead"):
        out = daemon._record_job("prune", now, lambda: daemon.prune(now))
    assert isinstance(out, dict)
    assert (out["checkpoints"], out["checkpoint_files"], out["checkpoint_files_not_deleted"]) == (2, 2, 1)
    assert [p.name for p in folder.iterdir()] == [stuck.name]
    assert store.models_with_artifacts() == {ids[stuck.name]}, "the undeleted file's version keeps its stored copy"
    assert "checkpoint_pruned_at" not in store.model(ids[stuck.name]).metrics
    (warned,) = [r for r in caplog.records if getattr(r, "event", "") == "checkpoint_file_not_deleted"]
    assert str(stuck) in warned.getMessage() and "Permission denied" in warned.getMessage()
    (event,) = [r for r in caplog.records if getattr(r, "event", "") == "prune"]
    assert getattr(event, "checkpoint_files_not_deleted", None) == 1
    monkeypatch.setattr(Path, "unlink", unlink)
    out = daemon.prune(now + 60)
    assert (out["checkpoints"], out["checkpoint_files"], out["checkpoint_files_not_deleted"]) == (1, 1, 0)
    assert list(folder.iterdir()) == [] and store.models_with_artifacts() == set()


def test_a_standby_replica_serves_metrics_but_never_acts(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    class NotLeader:
        def is_leader(self, now: float) -> bool:
            return False

        def release(self) -> None:
            pass

    daemon, _, target, store = daemon_factory(n=2, leadership=NotLeader())
    daemon.run(lambda: False, max_ticks=30)
    assert target.applied == []
    assert target.reads == 0
    assert store.count_plans() == 0
    assert metric_value(daemon, "scaleahead_leader") == 0
    assert metric_value(daemon, "scaleahead_cycles_total", result="standby") == 30
    assert daemon.health.readiness()[0]


def test_the_journal_is_reconciled_each_time_the_replica_starts_to_lead_and_never_on_standby(  # type: ignore[no-untyped-def]
    daemon_factory,
) -> None:
    """A standby that reconciled would rewrite what the leader is applying (docs/actuator.md)."""
    leading = {"now": False}

    class Toggle:
        def is_leader(self, now: float) -> bool:
            return leading["now"]

        def release(self) -> None:
            pass

    starts: list[float] = []
    daemon, clock, _, _ = daemon_factory(n=1, leadership=Toggle(), on_lead=starts.append)
    daemon.run(lambda: False, max_ticks=5)
    assert starts == [], "not while standing by"
    leading["now"] = True
    daemon.run(lambda: False, max_ticks=5)
    assert len(starts) == 1, "once when it starts to lead, not every cycle"
    leading["now"] = False
    daemon.run(lambda: False, max_ticks=2)
    leading["now"] = True
    daemon.run(lambda: False, max_ticks=2)
    assert len(starts) == 2, "again after standing by"


def test_actions_left_unresolved_are_reconciled_again_every_retry_period_while_leading(  # type: ignore[no-untyped-def]
    daemon_factory,
) -> None:
    """Before 2026-12-05 evening an action whose object could not be read when the replica started to
    lead stayed 'planned' until the next restart: nothing looked at it again while the leader ran."""
    left = [2, 1, 0]
    calls: list[float] = []

    def on_lead(now: float) -> int:
        calls.append(now)
        return left[len(calls) - 1]

    settings = Settings()
    settings.actuation.reconcile_retry_s = 60.0
    daemon, clock, _, _ = daemon_factory(n=1, settings=settings, on_lead=on_lead)
    t0 = clock.now()
    daemon.tick(t0)
    assert calls == [t0] and metric_value(daemon, "scaleahead_actions_unresolved") == 2
    for dt in (10.0, 30.0, 59.0):
        daemon.tick(t0 + dt)
    assert calls == [t0], "not before the retry period"
    daemon.tick(t0 + 60.0)
    assert calls == [t0, t0 + 60.0] and metric_value(daemon, "scaleahead_actions_unresolved") == 1
    daemon.tick(t0 + 100.0)
    daemon.tick(t0 + 120.0)
    assert calls == [t0, t0 + 60.0, t0 + 120.0] and metric_value(daemon, "scaleahead_actions_unresolved") == 0
    for dt in (180.0, 240.0, 600.0):
        daemon.tick(t0 + dt)
    assert len(calls) == 3, "none left: not called again"


def test_a_failed_retry_is_tried_again_and_a_zero_period_retries_only_on_leading(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    calls: list[float] = []

    def failing(now: float) -> int:
        calls.append(now)
        if len(calls) == 2:
            raise RuntimeError("the database is gone for a moment")
        return 1

    settings = Settings()
    settings.actuation.reconcile_retry_s = 30.0
    daemon, clock, _, _ = daemon_factory(n=1, settings=settings, on_lead=failing)
    t0 = clock.now()
    for dt in (0.0, 30.0, 60.0):
        daemon.tick(t0 + dt)
    assert calls == [t0, t0 + 30.0, t0 + 60.0], "the failed retry keeps its count and is tried a period later"
    assert metric_value(daemon, "scaleahead_actions_unresolved") == 1

    calls.clear()
    settings = Settings()
    settings.actuation.reconcile_retry_s = 0.0
    daemon, clock, _, _ = daemon_factory(n=1, settings=settings, on_lead=lambda now: calls.append(now) or 3)
    for dt in (0.0, 60.0, 600.0):
        daemon.tick(t0 + dt)
    assert calls == [t0] and metric_value(daemon, "scaleahead_actions_unresolved") == 3


def test_policy_status_shows_peak_desired_replicas_reason_and_fallback(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    published: list[list[PolicyStatus]] = []

    class Sink:
        def publish(self, statuses):  # type: ignore[no-untyped-def]
            published.append(list(statuses))

    daemon, clock, _, _ = daemon_factory(n=2, status_sink=Sink())
    daemon.tick(clock.now())
    (first, second) = published[0]
    assert first.name == "web0" and first.namespace == "shop"
    status = first.to_status()
    assert status["desiredReplicas"] >= 1
    assert status["forecastPeak"] > 0
    assert status["fallbackMode"] == "none"
    assert "forecast" in status["lastReason"]
    # A workload without history falls back, and the status says which rule decided: the policy's
    # reactive fallback has no observed demand to react to, so the current count is kept (the
    # status said "reactive": loop reasons audit).
    daemon.history.inner = type("Empty", (), {"read": lambda self, p, n: {}})()
    clock.sleep(10)
    daemon.tick(clock.now())
    assert {s.fallback_mode for s in published[-1]} == {"current"}
    assert all("fallback reactive has no observed demand to react to" in s.last_reason for s in published[-1])
    for s in published[-1]:
        key = f"Deployment/{s.namespace}/{s.name}"
        for mode, want in (("current", 1.0), ("reactive", 0.0)):
            got = daemon.metrics.registry.get_sample_value(
                "scaleahead_fallback_active", {"workload": key, "mode": mode}
            )
            assert got == want, (key, mode)


def test_metrics_and_health_are_served_over_http(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, _, _ = daemon_factory(n=1)
    server = serve(daemon.metrics, daemon.health, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen(base + "/readyz", timeout=5)
        assert not_ready.value.code == 503
        daemon.run(lambda: False, max_ticks=3)
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            body = r.read().decode()
        assert "scaleahead_planned_replicas{" in body
        assert "scaleahead_slo_risk{" in body  # the weight each service was planned with (risk adaptation)
        assert "scaleahead_phase_seconds_bucket{" in body
        assert urllib.request.urlopen(base + "/healthz", timeout=5).status == 200
        assert urllib.request.urlopen(base + "/readyz", timeout=5).status == 200
        clock.sleep(10 * 60)  # no tick for 10 minutes: the loop is stuck
        with pytest.raises(urllib.error.HTTPError) as stuck:
            urllib.request.urlopen(base + "/healthz", timeout=5)
        assert stuck.value.code == 503
    finally:
        server.shutdown()


def test_the_loop_uses_only_history_before_now(daemon_factory, nasa: Series) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, _, _ = daemon_factory(n=1)
    daemon.tick(clock.now())
    seen = next(iter(daemon.history.last.values()))
    assert seen.end <= clock.now()
    report = daemon.tick(clock.now() + 10).report
    assert report is not None
    assert all(fc.origin >= seen.end for fc in report.forecasts.values())
    assert isinstance(report.plan.actions[0], ScaleTo)


def test_jobs_coalesce_missed_fire_times_into_one_run(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    settings = Settings()
    settings.jobs.prune_cron = "* * * * *"
    daemon: Daemon
    daemon, clock, _, _ = daemon_factory(n=1, settings=settings)
    clock.sleep(3600)  # the process was suspended for an hour: 60 missed minutes
    ran = daemon.jobs.run_due(clock.now(), daemon._run_job)
    assert ran.count("prune") == 1
    assert daemon.jobs.jobs["prune"].next_fire == pytest.approx((clock.now() // 60 + 1) * 60)


def test_a_retrained_challenger_plans_in_shadow_and_takes_over_once_promoted(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    from actuator.rollouts import RolloutBook

    settings = Settings()
    settings.jobs.retrain_cron = "5 4 * * *"  # 04:05, five minutes after the start
    daemon, clock, _, store = daemon_factory(n=2, settings=settings, reference_error=100.0)
    production = daemon.deps.forecaster
    daemon.run(lambda: False, max_ticks=40)  # past 04:05
    (result,) = daemon.retrained
    ((view, challenger),) = daemon.deps.trials
    assert view.mode == "shadow" and view.group == "default" and challenger is result.model
    report = daemon.tick(clock.now()).report
    assert report is not None and report.shadow_plan is not None, "the challenger plans without acting"
    assert daemon.deps.forecaster is production
    RolloutBook(store).promote("default", clock.now())
    assert store.model(result.model_version_id).status == "champion"
    clock.sleep(70)
    daemon.tick(clock.now())
    assert daemon.deps.forecaster is result.model, "the promoted challenger is now in production"
    assert daemon.deps.model_version_id == result.model_version_id
    assert daemon.deps.trials == ()
    assert (
        daemon.metrics.registry.get_sample_value(
            "scaleahead_model_info", {"model": result.model.name, "version": str(result.model_version_id)}
        )
        == 1
    )


def test_a_rollout_started_outside_the_daemon_is_followed_and_its_promotion_taken(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    # What the retraining CronJob does: register a model version and open a rollout of it.
    from actuator.rollouts import RolloutBook

    daemon, clock, _, store = daemon_factory(n=2, reference_error=100.0)
    mid = store.register_model("window_mean-cron", "window_mean", status="challenger")
    broken = store.register_model("lstm-cron", "lstm", status="challenger")  # no checkpoint anywhere
    book = RolloutBook(store)
    bad = book.start("default", "canary", "seasonal_naive", str(broken), clock.now())
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.trial is None and daemon.deps.trials == (), "an unloadable challenger is not planned with"
    book.abort("default", clock.now())
    rid = book.start("default", "canary", "seasonal_naive", str(mid), clock.now())
    assert rid != bad
    daemon.run(lambda: False, max_ticks=8)  # the next minute's check adopts it
    assert daemon.trial is not None and daemon.trial[0] == rid
    ((view, challenger),) = daemon.deps.trials
    assert challenger.name == "window_mean" and view.mode == "canary"
    book.promote("default", clock.now())
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.deps.forecaster.name == "window_mean" and daemon.deps.model_version_id == mid
    assert daemon.trial is None and daemon.deps.trials == ()
    assert metric_value(daemon, "scaleahead_model_info", model="window_mean", version=str(mid)) == 1


def test_production_follows_the_registry_champion_and_a_rollback(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    # The champion changes without the daemon: another group's rollout promoted, or
    # `scaleahead models promote ID` (a rollback). Production follows within a minute.
    daemon, _, _, store = daemon_factory(n=2, reference_error=100.0)
    first = store.register_model("seasonal_naive-a", "seasonal_naive", status="champion")
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.deps.model_version_id == first and daemon.deps.forecaster.name == "seasonal_naive"
    second = store.register_model("seasonal_naive-b", "seasonal_naive", status="challenger")
    store.set_model_status(second, "champion")  # what a promoted rollout of another group does
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.deps.model_version_id == second
    assert metric_value(daemon, "scaleahead_model_info", model="seasonal_naive", version=str(second)) == 1
    store.make_champion(first)  # the rollback
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.deps.model_version_id == first
    assert metric_value(daemon, "scaleahead_model_info", model="seasonal_naive", version=str(first)) == 1
    # Another family's champion is not the family this daemon plans with.
    store.register_model("window_mean-x", "window_mean", status="champion")
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.deps.model_version_id == first


def test_following_reads_only_the_followed_rollouts_and_the_familys_champion(daemon_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The once-a-minute follow_champion / follow_rollout read every row of model_versions and
    rollouts (never pruned: ~0.2 s each at 10,000 rows). They now read the family's champion and
    the followed rollouts by id, and follow as before."""
    from actuator.rollouts import RolloutBook

    daemon, clock, _, store = daemon_factory(n=2, reference_error=100.0)
    for i in range(5):  # history the daemon has no use for
        old = store.register_model(f"seasonal_naive-{i}", "seasonal_naive", status="retired")
        store.update_rollout(
            store.rollout(store.create_rollout("default", "shadow", "x", str(old), now=1.0)), 2.0, state="aborted"
        )
    champion = store.register_model("seasonal_naive-a", "seasonal_naive", status="champion")
    mid = store.register_model("window_mean-cron", "window_mean", status="challenger")
    book = RolloutBook(store)
    rid = book.start("default", "canary", "seasonal_naive", str(mid), clock.now())
    wide: list[str] = []
    models, rollouts = store.models, store.rollouts

    def all_models():  # type: ignore[no-untyped-def]
        wide.append("models()")
        return models()

    def some_rollouts(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not args and not kwargs:
            wide.append("rollouts()")
        return rollouts(*args, **kwargs)

    monkeypatch.setattr(store, "models", all_models)
    monkeypatch.setattr(store, "rollouts", some_rollouts)
    daemon.run(lambda: False, max_ticks=20)  # three minute checks
    assert daemon.deps.model_version_id == champion, "production follows the registry's champion"
    assert daemon.trial is not None and daemon.trial[0] == rid, "the running rollout is adopted"
    book.promote("default", clock.now())
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.deps.model_version_id == mid and daemon.deps.forecaster.name == "window_mean"
    assert daemon.trial is None and daemon.deps.trials == ()
    assert wide == [], "a once-a-minute check read a whole registry table"


def test_a_champion_that_cannot_be_loaded_is_logged_once_and_production_stays(daemon_factory, caplog) -> None:  # type: ignore[no-untyped-def]
    daemon, _, _, store = daemon_factory(n=2, reference_error=100.0)
    daemon.settings.forecast.model = "lstm"  # no version in production yet: the family to follow
    production = daemon.deps.forecaster
    broken = store.register_model("lstm-x", "lstm", status="champion")  # no checkpoint anywhere
    with caplog.at_level("WARNING", logger="scaleahead"):
        daemon.run(lambda: False, max_ticks=20)  # three minute checks
    assert daemon.deps.forecaster is production and daemon.deps.model_version_id is None
    said = [r for r in caplog.records if getattr(r, "event", "") == "champion_not_loaded"]
    assert len(said) == 1 and f"model {broken} is the champion of lstm" in said[0].getMessage()


def test_a_rollout_running_before_the_first_cycle_is_adopted_once_there_is_history(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    # A restart: the rollout of a baseline family was running already. At the first check there
    # is no history to fit it on yet; that is no reason to give up on it.
    from actuator.rollouts import RolloutBook

    daemon, clock, _, store = daemon_factory(n=2, reference_error=100.0)
    mid = store.register_model("window_mean-cron", "window_mean", status="challenger")
    rid = RolloutBook(store).start("default", "canary", "seasonal_naive", str(mid), clock.now())
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.trial is not None and daemon.trial[0] == rid and rid not in daemon._unfollowed
    assert [c.name for _, c in daemon.deps.trials] == ["window_mean"]


def test_each_rollout_group_follows_its_own_rollout_and_a_promotion_in_any_reaches_production(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    from actuator.rollouts import CanaryParams, RolloutBook

    daemon, clock, _, store = daemon_factory(n=4, groups=("blue", "green"), reference_error=100.0)
    book = RolloutBook(store)
    everyone = CanaryParams(steps=(1.0,))  # the whole group on the challenger: arms are known
    blue = store.register_model("window_mean-blue", "window_mean", status="challenger")
    green = store.register_model("naive-green", "naive", status="challenger")
    book.start("blue", "canary", "seasonal_naive", str(blue), clock.now(), canary=everyone)
    book.start("green", "canary", "seasonal_naive", str(green), clock.now(), canary=everyone)
    daemon.run(lambda: False, max_ticks=8)
    assert sorted((v.group, c.name) for v, c in daemon.deps.trials) == [("blue", "window_mean"), ("green", "naive")]
    report = daemon.tick(clock.now()).report
    assert report is not None
    by_group = {p.workload: p.spec.rollout_group for p in daemon.deps.policies}
    models = {(by_group[ref], fc.model) for ref, fc in report.forecasts.items()}
    assert models == {("blue", "window_mean"), ("green", "naive")}, models
    # Green's rollout is promoted: its model is production (the champion) for every group;
    # blue's rollout goes on.
    book.promote("green", clock.now())
    clock.sleep(70)
    daemon.run(lambda: False, max_ticks=2)
    assert daemon.deps.model_version_id == green and daemon.deps.forecaster.name == "naive"
    assert [(v.group, c.name) for v, c in daemon.deps.trials] == [("blue", "window_mean")]


def test_the_daily_accuracy_report_is_named_for_the_day_it_covers(daemon_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    daemon, clock, _, _ = daemon_factory(n=1, report_dir=tmp_path / "reports")  # 1995-07-04 04:00 UTC
    start = clock.now()
    daemon.run(lambda: False, max_ticks=6 * 60 * 21)  # past the default 00:05 report of the next day
    first = daemon.reports[0]
    doc = json.loads(first.read_text())
    day = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d")
    # Before: named for the day it was written (00:05 of the next day), holding the day before.
    assert first.name == f"accuracy-{day}.json"
    assert doc["period_start"] == datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert doc["period_end"] == doc["created_at"] and doc["created_at"].endswith("00:05:00Z")


def test_a_challengers_forecasts_are_stored_and_reported_as_its_model_version(  # type: ignore[no-untyped-def]
    daemon_factory, tmp_path: Path
) -> None:
    """In a canary, the challenger arm's forecasts are the challenger version's: stored under its id
    and counted under it in the daily accuracy report, not under production's."""
    from sqlalchemy import select

    from actuator.rollouts import RolloutBook, assign
    from storage.schema import ForecastRow, WorkloadRow

    settings = Settings()
    settings.jobs.report_cron = "*/30 * * * *"
    daemon, clock, _, store = daemon_factory(
        n=6, settings=settings, report_dir=tmp_path / "reports", reference_error=100.0
    )
    mid = store.register_model("window_mean-cron", "window_mean", status="challenger")
    book = RolloutBook(store)
    rid = book.start("default", "canary", "seasonal_naive", str(mid), clock.now())
    store.update_rollout(store.rollout(rid), clock.now(), share=0.5)
    daemon.run(lambda: False, max_ticks=6 * 75)
    assert len(daemon.reports) >= 2, "the last report covers only forecasts made after the adoption"
    salt = str(store.rollouts()[-1].params.get("salt", ""))
    arms = {p.workload.key: assign(p.workload.key, 0.5, salt) for p in daemon.deps.policies}
    assert set(arms.values()) == {"champion", "challenger"}, "both arms have workloads"
    with store.session() as s:
        rows = s.execute(select(WorkloadRow.key, ForecastRow.model, ForecastRow.model_version_id).join(ForecastRow))
        stored = {(key, model, version) for key, model, version in rows}
    # Adopted at the first minute's check: from then on each workload's forecasts come from its arm.
    later = {(key, version) for key, model, version in stored if model == "window_mean"}
    assert later == {(key, mid) for key, arm in arms.items() if arm == "challenger"}
    assert all(version is None for key, model, version in stored if model == "seasonal_naive")
    doc = json.loads(daemon.reports[-1].read_text())
    assert set(doc["forecasts_by_model_version"]) == {str(mid), "none"}
    for key, arm in arms.items():
        made = doc["workloads"][key]["forecasts_by_model_version"]
        assert set(made) == ({str(mid)} if arm == "challenger" else {"none"}), (key, made)


class _Lease:
    def __init__(self) -> None:
        self.released = 0

    def is_leader(self, now: float) -> bool:
        return True

    def release(self) -> None:
        self.released += 1


def test_shutdown_does_not_wait_a_retrain_out_and_then_releases_the_lease(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """Found in review: shutdown waited for a running job with no limit and released the lease after
    it, so a retrain (minutes) outlived the pod's 60-s grace period: SIGKILL, the lease held until
    it ran out. A job is waited for at most a bound, then abandoned, and the lease released. (For a
    while the lease went first; since 2026-12-06 it goes after the bounded wait, so a job never
    writes while a successor leads: tests/daemon/test_daemon_ha.py.)"""
    import threading

    lease = _Lease()
    daemon, clock, _, _ = daemon_factory(leadership=lease, background_jobs=True)
    gate, started = threading.Event(), threading.Event()

    def slow(now: float) -> None:  # a retrain still training
        started.set()
        gate.wait(10.0)

    daemon.jobs.add("retrain", daemon.jobs.jobs["retrain"].trigger, slow, clock.now())
    assert daemon.jobs.submit_now("retrain", clock.now(), lambda job, now: job.func(now))
    assert started.wait(5.0)
    assert daemon.shutdown(job_wait_s=0.2) is False  # abandoned: `scaleahead run` then exits 0 at once
    assert lease.released == 1
    gate.set()

    quick = _Lease()
    daemon2, clock2, _, _ = daemon_factory(leadership=quick, background_jobs=True)
    daemon2.jobs.add("retrain", daemon2.jobs.jobs["retrain"].trigger, lambda now: None, clock2.now())
    assert daemon2.jobs.submit_now("retrain", clock2.now(), lambda job, now: job.func(now))
    assert daemon2.shutdown(job_wait_s=5.0) is True and quick.released == 1


def test_following_the_rollouts_runs_one_call_at_a_time_across_threads(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    # the loop's thread (every minute) and the job thread (after a retraining) both follow the
    # rollouts and change ``trials``: a second call waits for the first
    import threading
    import time

    daemon, clock, _, store = daemon_factory(n=2)
    inside, most = [0], [0]
    guard = threading.Lock()
    real = store.rollouts

    def slow_rollouts(*args, **kwargs):  # type: ignore[no-untyped-def]
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.2)
            return real(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1

    store.rollouts = slow_rollouts  # type: ignore[method-assign]
    threads = [threading.Thread(target=daemon.follow_rollout, args=(clock.now(),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert most[0] == 1, "two follow_rollout calls read and changed the trials at once"


class _TwoRowTrainingHistory:
    def read(self, policies: list, now: float) -> dict:  # type: ignore[type-arg]
        return {p.workload: Series("two", now - 20.0, 10.0, np.array([5.0, 6.0])) for p in policies}


def test_a_scheduled_retraining_on_too_little_history_registers_nothing(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """The scheduled path refuses as `retrain` does: logged and counted as an error, no version."""
    settings = Settings()
    settings.jobs.retrain_cron = "0 * * * *"
    daemon, _, _, store = daemon_factory(n=1, settings=settings, reference_error=100.0)
    daemon.training_history = _TwoRowTrainingHistory()
    daemon.run(lambda: False, max_ticks=400)  # the hour marks 04:00 and 05:00
    assert metric_value(daemon, "scaleahead_job_runs_total", job_name="retrain", result="error") == 2
    assert not daemon.retrained and store.models() == [] and store.rollouts() == []


def test_the_observed_gauge_skips_a_sample_beyond_float32_as_missing(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """Before, ``scaleahead_observed_demand`` exported the newest *finite* sample, so a 1e300 from an
    exporter's overflow (which every forecaster, the planner and ``history`` read as missing) was
    shown as the demand. Now it shows the newest real one: the sample before the glitch."""
    daemon, clock, _, _ = daemon_factory(n=1)
    inner = daemon.history.inner

    class Glitching:
        def read(self, policies, now):  # type: ignore[no-untyped-def]
            out = {}
            for ref, s in inner.read(policies, now).items():
                values = np.array(s.values, dtype=np.float64)
                values[-2:] = [17.0, 1e300]  # the newest sample is an overflow, the one before it real
                out[ref] = Series(s.name, s.start, s.step_s, values, s.unit)
            return out

    daemon.history.inner = Glitching()
    daemon.tick(clock.now())
    (ref,) = daemon.history.last
    assert daemon.history.last[ref].values[-1] == 1e300, "the history still holds the glitch (read as missing)"
    assert metric_value(daemon, "scaleahead_observed_demand", workload=ref.key) == 17.0


def test_an_unreadable_workload_gets_a_status_saying_so_and_loses_its_current_replicas_series(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """A workload whose object the target cannot read is not planned: its policy status says why
    (code ``state_unreadable``, no replicas: they are unknown now), and ``scaleahead_current_replicas``
    drops its series instead of keeping the last read frozen; both come back with the next read."""
    from dataclasses import replace as dc_replace

    published: list[list[PolicyStatus]] = []

    class Sink:
        def publish(self, statuses):  # type: ignore[no-untyped-def]
            published.append(list(statuses))

    daemon, clock, target, _ = daemon_factory(n=2, status_sink=Sink())
    daemon.tick(clock.now())
    web0 = next(p.workload for p in daemon.deps.policies if p.metadata.name == "web0")
    assert metric_value(daemon, "scaleahead_current_replicas", workload=web0.key) >= 1
    read = target.read_state

    def failing(workloads):  # type: ignore[no-untyped-def]
        state = read(workloads)
        rest = {ref: ws for ref, ws in state.workloads.items() if ref != web0}
        return dc_replace(state, workloads=rest, unreadable={web0: f"{web0.key}: API server error 500"})

    target.read_state = failing  # type: ignore[method-assign]
    clock.sleep(10)
    daemon.tick(clock.now())
    by_name = {s.name: s for s in published[-1]}
    assert by_name["web0"].last_reason_code == "state_unreadable"
    assert "not planned: its state cannot be read" in by_name["web0"].last_reason
    assert "API server error 500" in by_name["web0"].last_reason
    assert by_name["web0"].to_status()["desiredReplicas"] is None
    assert by_name["web1"].last_reason_code != "state_unreadable" and by_name["web1"].desired_replicas
    for name in ("scaleahead_current_replicas", "scaleahead_planned_replicas", "scaleahead_forecast_peak"):
        assert daemon.metrics.registry.get_sample_value(name, {"workload": web0.key}) is None, name
    assert (
        daemon.metrics.registry.get_sample_value(
            "scaleahead_fallback_active", {"workload": web0.key, "mode": "reactive"}
        )
        is None
    )
    target.read_state = read  # type: ignore[method-assign]
    clock.sleep(10)
    daemon.tick(clock.now())
    assert {s.name: s for s in published[-1]}["web0"].last_reason_code != "state_unreadable"
    assert metric_value(daemon, "scaleahead_current_replicas", workload=web0.key) >= 1


def test_a_wall_clock_stepped_back_does_not_stop_the_ticker_for_the_size_of_the_step(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """NTP steps the wall clock back an hour after the first tick: the next tick comes one
    interval later on the new clock, not an hour and an interval later (found by the clock audit,
    2026-12-05: the loop stopped while /healthz stayed live)."""
    daemon, clock, _, _ = daemon_factory(n=1)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.sleep(seconds)
        if len(sleeps) == 1:
            clock._now -= 3600.0  # the step, during the first wait

    assert daemon.run(lambda: False, sleep=sleep, max_ticks=3) == 3
    assert all(s <= daemon.settings.loop.interval_s for s in sleeps), sleeps


def test_run_forever_goes_on_after_the_wall_clock_steps_back() -> None:
    from types import SimpleNamespace

    import scaleahead.loop as loop_module
    from scaleahead.clock import VirtualClock
    from scaleahead.settings import Settings

    clock = VirtualClock(1_800_000_000.0)
    sleeps: list[float] = []
    real_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        real_sleep(seconds)
        if len(sleeps) == 1:
            clock._now -= 3600.0

    clock.sleep = sleep  # type: ignore[method-assign]
    cycles: list[float] = []
    original = loop_module.run_once
    loop_module.run_once = lambda deps, settings, now: cycles.append(now)  # type: ignore[assignment,misc,return-value]
    try:
        loop_module.run_forever(SimpleNamespace(actuator=None), Settings(), clock, stop=lambda: len(cycles) >= 3)  # type: ignore[arg-type]
    finally:
        loop_module.run_once = original
    assert sleeps[:2] == [10.0, 10.0], sleeps


def test_a_back_off_is_not_stretched_by_a_wall_clock_stepped_back() -> None:
    """One failure (10 s), then the clock steps back an hour: the workload waits at most the
    longest back-off (300 s), not an hour and 10 s."""
    from scaleahead.daemon import Backoff

    backoff = Backoff(10.0, 300.0)
    assert backoff.failed("w", 5000.0) == 10.0
    assert backoff.blocked("w", 5005.0) and backoff.remaining("w", 5005.0) == 5.0
    stepped = 5005.0 - 3600.0
    assert backoff.remaining("w", stepped) == 300.0
    assert not backoff.blocked("w", stepped + 300.0)
    assert backoff.remaining("other", stepped) == 0.0 and not backoff.blocked("other", stepped)


def test_after_the_wall_clock_steps_back_the_daemons_own_decisions_count_from_now(daemon_factory, caplog) -> None:  # type: ignore[no-untyped-def]
    """The planner reads no decision stamped after now (no peeking), so the daemon's own decisions
    of the last window, stamped before an NTP step back, fell out of the scale-down stabilization
    window: a scale-down it would have held went ahead at once. They now count from the step, and
    the step is logged (``clock_stepped_back``)."""
    import logging

    daemon, clock, _, _ = daemon_factory(n=1)
    t0 = clock.now()
    daemon.tick(t0)
    daemon.tick(t0 + 10)
    ref = daemon.deps.policies[0].workload
    assert [t for t, _ in daemon.target.recent[ref]] == [t0, t0 + 10]
    caplog.set_level(logging.WARNING)
    back = t0 + 20 - 3600
    daemon.tick(back)
    seen = daemon.target.last_state.workloads[ref].recent_desired
    assert len(seen) >= 2 and all(t <= back for t, _ in seen), seen  # the planner read them as now's
    assert any(getattr(r, "event", "") == "clock_stepped_back" for r in caplog.records)
    # The live error samples again from the step (it waited until the clock caught up with it).
    assert daemon.live.last_sample and all(t <= back for t in daemon.live.last_sample.values())
    # A step of less than a second (a small NTP slew) is not one.
    caplog.clear()
    daemon.tick(back - 0.5)
    assert not any(getattr(r, "event", "") == "clock_stepped_back" for r in caplog.records)


def test_a_removed_workloads_error_counter_goes_with_its_policy(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """``scaleahead_workload_errors_total`` of a workload whose policy was removed stayed in /metrics
    for ever (found by the soak audit: one more pair of series per churned workload that failed)."""
    daemon, clock, target, _ = daemon_factory(n=2)
    gone, kept = daemon.deps.policies
    target.fail.add(gone.workload.key)
    daemon.tick(clock.now())
    body = daemon.metrics.render().decode()
    assert f'scaleahead_workload_errors_total{{stage="action",workload="{gone.workload.key}"}}' in body
    daemon.set_policies([kept])
    clock.sleep(10)
    daemon.tick(clock.now())
    body = daemon.metrics.render().decode()
    assert gone.workload.key not in body, [line for line in body.splitlines() if gone.workload.key in line]


def test_after_the_wall_clock_steps_back_policy_reloads_and_minute_checks_go_on(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """The review's case: an hour's step back; a policy added to the cluster right after is read
    by the next reload (every 30 s), not an hour later, and the minute checks are due within a
    minute. A cron job keeps its absolute next fire time (it does not run twice)."""
    from tests.daemon.conftest import make_policies

    pols = make_policies(3)
    source = {"p": pols[:2]}
    daemon, clock, _, _ = daemon_factory(n=2, policy_source=lambda: source["p"], policy_reload_s=30.0)
    t = clock.now()
    for _ in range(5):
        daemon.tick(t)
        t += 10
    prune_at = daemon.jobs.jobs["prune"].next_fire
    t -= 3600.0
    source["p"] = pols
    reloads = []
    for _ in range(6):  # one minute on the new clock
        clock._now = t
        reloads += [j for j in daemon.tick(t).jobs if j == "reload_policies"]
        t += 10
    assert reloads and len(daemon.deps.policies) == 3
    assert daemon._rollout_checked + 60 - t <= 60
    assert daemon.jobs.jobs["prune"].next_fire == prune_at


class _FlappingLease:
    """Leads 3 ticks, stands by 3 ticks, and so on (the audit's flapping Lease)."""

    identity = "scaleahead-7d9f-abcde_1234"

    def __init__(self) -> None:
        self.n = 0

    def is_leader(self, now: float) -> bool:
        self.n += 1
        return ((self.n - 1) // 3) % 2 == 0

    def release(self) -> None:
        pass


def test_leadership_changes_are_logged_with_the_identity_and_counted(daemon_factory, caplog) -> None:  # type: ignore[no-untyped-def]
    """Until 2026-12-06 a replica gaining or losing the Lease logged nothing (only the gauge
    scaleahead_leader changed: a flap between two scrapes was not seen at all)."""
    daemon, clock, _, _ = daemon_factory(n=1, leadership=_FlappingLease())
    reg = daemon.metrics.registry
    assert reg.get_sample_value("scaleahead_leader_transitions_total", {"to": "leader"}) == 0
    with caplog.at_level(logging.INFO, logger="scaleahead.daemon"):
        for _ in range(12):  # leader, standby, leader, standby: 3 ticks each
            daemon.tick(clock.now())
            clock.advance_to(clock.now() + daemon.settings.loop.interval_s)
    events = [
        (r.event, r.identity) for r in caplog.records if getattr(r, "event", "") in ("leader_acquired", "leader_lost")
    ]  # type: ignore[attr-defined]
    who = _FlappingLease.identity
    assert events == [("leader_acquired", who), ("leader_lost", who)] * 2
    assert reg.get_sample_value("scaleahead_leader_transitions_total", {"to": "leader"}) == 2
    assert reg.get_sample_value("scaleahead_leader_transitions_total", {"to": "standby"}) == 2


def test_the_observed_gauge_goes_when_the_history_read_fails(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """As the forecast series go: until 2026-12-07 `scaleahead_observed_demand` kept its last value
    while the reads failed, a flat stale line on the dashboard (a review of in-cluster operation)."""
    daemon, clock, _, _ = daemon_factory(n=1)
    ref = daemon.deps.policies[0].workload
    daemon.tick(clock.now())
    assert metric_value(daemon, "scaleahead_observed_demand", workload=ref.key) is not None
    inner = daemon.history.inner

    class Failing:
        def read(self, policies, now):  # type: ignore[no-untyped-def]
            return {}  # nothing read: Prometheus did not answer for it

    daemon.history.inner = Failing()
    clock.sleep(10.0)
    daemon.tick(clock.now())
    assert daemon.metrics.registry.get_sample_value("scaleahead_observed_demand", {"workload": ref.key}) is None
    daemon.history.inner = inner
    clock.sleep(10.0)
    daemon.tick(clock.now())
    assert metric_value(daemon, "scaleahead_observed_demand", workload=ref.key) is not None


def test_persistent_drift_does_not_supersede_a_retrained_canary_the_daemon_decides(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """With `jobs.evaluate_canaries`, a retrained canary decides on its measured outcomes (4 steps
    of `window_s`, an hour each by default). Until 2026-12-07 persistent drift retrained every
    cooldown (an hour) and superseded it, so none was ever promoted (a review). Now drift waits
    while it runs, and says so once per cooldown."""
    settings = Settings()
    settings.jobs.drift_min_forecasts = 2
    settings.jobs.error_sample_interval_s = 60.0
    settings.jobs.drift_cooldown_s = 600.0
    settings.jobs.rollout_mode = "canary"
    settings.jobs.evaluate_canaries = True
    daemon, _, _, store = daemon_factory(n=1, settings=settings, reference_error=0.01)
    daemon.run(lambda: False, max_ticks=400)  # 66 min: drift at once and past several cooldowns
    assert len(daemon.retrained) == 1, "one drift retraining, then none while its canary runs"
    assert [r.state for r in store.rollouts()] == ["running"]
    # without evaluate_canaries nobody decides by itself: a newer retrained challenger supersedes it
    settings.jobs.evaluate_canaries = False
    daemon.run(lambda: False, max_ticks=100)
    assert len(daemon.retrained) == 2 and [r.state for r in store.rollouts()] == ["superseded", "running"]
