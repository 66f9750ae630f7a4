"""``scaleahead.retraining.retrain`` on real history whose window starts with missing data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from forecaster.baselines import SeasonalNaive
from forecaster.registry import register
from scaleahead.policy import Policy, parse_policies
from scaleahead.retraining import retrain
from scaleahead.settings import Settings
from scaleahead.types import Series
from storage import Store

DAY = 86400.0


def one_policy() -> Policy:
    text = (
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\nmetadata: {name: web, namespace: shop}\n"
        "spec:\n  target: {name: web}\n  demand: {query: 'sum(rate(x[1m]))'}\n  capacityPerReplica: 2\n"
    )
    return parse_policies(text)[0]


def test_a_window_that_starts_missing_is_split_over_the_part_with_data(nasa: Series, tmp_path: Path) -> None:
    # A workload added 1.5 days ago: its 4-day window is missing for the first 2.5 days.
    values = nasa.values.copy()
    values[: int(2.5 * DAY / nasa.step_s)] = np.nan
    late = Series(nasa.name, nasa.start, nasa.step_s, values)
    policy = one_policy()
    settings = Settings()
    settings.forecast.model = "seasonal_naive"
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    result = retrain([policy], {policy.workload: late}, store, settings, now=late.end)
    model = store.model(result.model_version_id)
    assert model.metrics["holdout_wape"] is not None and model.metrics["holdout_wape"] > 0
    assert model.data_start == late.start + 2.5 * DAY, "the registered span starts at the first observation"
    # Registered on the daemon's clock (virtual in `run --virtual`), the clock retention counts on.
    assert model.created_at.timestamp() == late.end


class _Savable(SeasonalNaive):
    """A baseline with a checkpoint file, standing in for the LSTM (which takes minutes to train)."""

    name = "savable_test"

    def save(self, path: Path) -> Path:
        path.write_bytes(b"checkpoint of " + self.name.encode())
        return path


def test_a_retrained_checkpoint_is_stored_with_its_version_with_or_without_artifacts(
    nasa: Series, tmp_path: Path
) -> None:
    policy = one_policy()
    settings = Settings()
    settings.forecast.model = "savable_test"
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    register("savable_test", _Savable)
    try:
        bare = retrain([policy], {policy.workload: nasa}, store, settings, now=nasa.end)
        kept = retrain([policy], {policy.workload: nasa}, store, settings, now=nasa.end, artifact_dir=tmp_path / "a")
    finally:
        from forecaster.registry import _FACTORIES

        _FACTORIES.pop("savable_test")
    assert bare.artifact_path == "" and not list(tmp_path.glob("savable*"))
    assert Path(kept.artifact_path).parent == tmp_path / "a"
    for r in (bare, kept):
        data = store.model_artifact(r.model_version_id)
        assert data is not None and data.startswith(b"checkpoint of ")
    assert store.model_artifact(kept.model_version_id) == Path(kept.artifact_path).read_bytes()


def test_retraining_the_lstm_on_demand_that_rises_on_the_clock_names_lstm_clock(nasa: Series, tmp_path: Path) -> None:
    from forecaster.registry import _FACTORIES
    from tests.forecaster.test_clock_phase import cron_series

    policy = one_policy()
    settings = Settings()  # forecast.model lstm; a stand-in that trains in a second
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    real = _FACTORIES["lstm"]
    register("lstm", _Savable)
    try:
        cron = cron_series(3.0, seed=6)
        on_clock = retrain([policy], {policy.workload: cron}, store, settings, now=cron.end)
        plain = retrain([policy], {policy.workload: nasa}, store, settings, now=nasa.end)
    finally:
        register("lstm", real)
    hint = store.model(on_clock.model_version_id).metrics["clock_hint"]
    assert hint.startswith("1 of 1 series start their sudden rises") and "forecast.model lstm_clock" in hint
    assert "clock_hint" not in store.model(plain.model_version_id).metrics


def test_a_fitted_champion_is_scored_out_of_sample_as_the_challenger_is(nasa: Series, tmp_path: Path) -> None:
    from forecaster import make_model

    policy = one_policy()
    settings = Settings()
    settings.forecast.model = "ridge"
    history = nasa.between(nasa.end - 4 * DAY, nasa.end)
    # Production's ridge was fitted on everything, the holdout included: scored as it is, its error
    # would be in-sample. Retraining scores a fresh one fitted on the fit part, like the challenger.
    champion = make_model("ridge").fit([history])
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    result = retrain([policy], {policy.workload: history}, store, settings, now=history.end, champion=champion)
    m = result.metrics
    assert m["holdout_wape"] is not None and m["champion_holdout_wape"] == m["holdout_wape"]


@pytest.mark.parametrize(
    ("statement", "failing_call"),
    [
        ("UPDATE rollouts", 0),  # the rollout's marker (before: a write of its own) or a supersede
        ("INSERT INTO rollouts", 1),  # the new rollout, after the old one was superseded
    ],
)
def test_a_failed_rollout_write_in_retraining_leaves_no_half_state_and_the_next_retrain_rolls_out(
    nasa: Series, db_url: str, statement: str, failing_call: int
) -> None:
    from sqlalchemy.exc import OperationalError

    from tests.conftest import fail_once

    policy = one_policy()
    settings = Settings()
    settings.forecast.model = "seasonal_naive"
    store = Store(db_url)
    done = None
    failures = 0
    for call in range(3):
        if call == failing_call:
            fail_once(store.engine, statement, "database is locked")
        try:
            done = retrain([policy], {policy.workload: nasa}, store, settings, now=nasa.end + call * DAY)
        except OperationalError:
            failures += 1
        running = [(r.challenger, r.results.get("retrained")) for r in store.rollouts(state="running")]
        # at every moment: the last successful retrain's challenger is on trial, marked as retraining's
        assert running == ([(str(done.model_version_id), True)] if done is not None else [])
    assert failures == 1
    assert done is not None and done.rollout_ids, "the retrain after the failure rolls its model out"


def test_a_retrained_lstm_forecasts_the_configured_horizon_and_records_its_config(nasa: Series, tmp_path: Path) -> None:
    # forecast.horizon_s above the LSTM's default 900 s: the retrained model must forecast it (its
    # holdout score asks for it), record the configuration it was trained with, and a checkpoint
    # shorter than the setting is refused on load so the caller falls back
    from forecaster.lstm import LSTMConfig, LSTMForecaster
    from forecaster.registry import _FACTORIES
    from scaleahead.commands.run import _production_model
    from scaleahead.errors import DataError
    from scaleahead.retraining import load_model_version

    tiny = LSTMConfig(hidden=4, mlp=8, max_epochs=1, patience=1, max_train_windows=300, max_val_windows=100)
    policy = one_policy()
    settings = Settings()  # forecast.model lstm
    settings.forecast.horizon_s = 1800.0
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    history = nasa.between(nasa.start + 2 * DAY, nasa.end)
    real = _FACTORIES["lstm"]
    register("lstm", lambda: LSTMForecaster(tiny))
    try:
        result = retrain([policy], {policy.workload: history}, store, settings, now=history.end)
    finally:
        register("lstm", real)
    assert isinstance(result.model, LSTMForecaster) and result.model.spec is not None
    assert result.model.spec.horizon_s == 1800.0 and result.model.spec.horizon_steps == 180
    assert result.metrics["holdout_wape"] is not None
    version = store.model(result.model_version_id)
    assert version.hyperparams["horizon_s"] == 1800.0 and version.hyperparams["hidden"] == 4

    loaded = load_model_version(store, version.id, 10.0, [], horizon_s=1800.0)
    assert isinstance(loaded, LSTMForecaster) and loaded.spec is not None and loaded.spec.horizon_steps == 180
    with pytest.raises(DataError, match=r"forecasts 180 steps \(1800 s\); forecast.horizon_s 3600 needs 360"):
        load_model_version(store, version.id, 10.0, [], horizon_s=3600.0)
    store.make_champion(version.id)
    longer = Settings()
    longer.forecast.horizon_s = 3600.0
    model, used = _production_model("lstm", store, longer, [history])
    assert used is None and model.name == longer.forecast.fallback_model


def test_two_retrainings_at_the_same_time_keep_their_own_checkpoint_files(nasa: Series, tmp_path: Path) -> None:
    import hashlib

    class _Sized(_Savable):
        name = "savable_test"

        def save(self, path: Path) -> Path:  # a checkpoint that differs with the history fitted on
            path.write_bytes(b"checkpoint fitted on %d steps" % sum(len(s) for s in self._fitted))
            return path

        def fit(self, history, horizon_steps=None):  # type: ignore[no-untyped-def]
            self._fitted = list(history)
            return super().fit(history, horizon_steps)

    policy = one_policy()
    settings = Settings()
    settings.forecast.model = "savable_test"
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    register("savable_test", _Sized)
    try:
        a = retrain([policy], {policy.workload: nasa}, store, settings, now=nasa.end, artifact_dir=tmp_path / "a")
        shorter = nasa.between(nasa.start + DAY, nasa.end)
        b = retrain([policy], {policy.workload: shorter}, store, settings, now=nasa.end, artifact_dir=tmp_path / "a")
    finally:
        from forecaster.registry import _FACTORIES

        _FACTORIES.pop("savable_test")
    assert a.artifact_path != b.artifact_path
    for r in (a, b):
        data = Path(r.artifact_path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == store.model(r.model_version_id).artifact_sha256
        assert data == store.model_artifact(r.model_version_id)


@pytest.mark.parametrize(
    ("values", "said"),
    [
        (np.array([5.0, 5.006]), "Too little history to score a retrained model"),
        (np.zeros(2000), "no demand above zero"),
    ],
)
def test_a_retrain_whose_holdout_cannot_be_scored_registers_nothing_and_keeps_the_rollout(
    nasa: Series, tmp_path: Path, values: np.ndarray, said: str
) -> None:
    """Two rows of history registered a challenger with holdout_wape null and superseded the
    running retrained rollout (found in the audit of 2026-12-05)."""
    from scaleahead.errors import DataError

    policy = one_policy()
    settings = Settings()
    settings.forecast.model = "seasonal_naive"
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    first = retrain([policy], {policy.workload: nasa}, store, settings, now=nasa.end)
    bad = Series(nasa.name, nasa.end, nasa.step_s, values)
    with pytest.raises(DataError, match=said) as refused:
        retrain([policy], {policy.workload: bad}, store, settings, now=bad.end + DAY)
    assert "Nothing was registered" in refused.value.message
    assert [m.id for m in store.models()] == [first.model_version_id]
    assert [(r.id, r.state) for r in store.rollouts()] == [(first.rollout_ids[0], "running")]


def test_a_baseline_retrains_whatever_the_artifacts_folder_is(daemon_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A baseline writes no checkpoint: a broken --artifacts folder must not stop its retraining
    (found in review: the folder check, added for learned models, refused every family)."""
    artifacts = tmp_path / "art"
    daemon, clock, _, store = daemon_factory(n=1, artifact_dir=artifacts / "models")
    assert daemon.settings.forecast.model == "seasonal_naive"
    artifacts.write_text("not a folder")
    now = clock.now()
    result = daemon._record_job("retrain", now, lambda: daemon._retrain(now, "schedule"))
    assert result is not None and result.family == "seasonal_naive" and result.artifact_path == ""
    assert [m.family for m in store.models()] == ["seasonal_naive"]


@pytest.mark.parametrize("broken", ["artifacts", "models"])
def test_an_artifacts_folder_replaced_by_a_file_fails_the_retrain_before_the_fit_saying_so(  # type: ignore[no-untyped-def]
    daemon_factory, tmp_path: Path, caplog, broken: str
) -> None:
    """`run --artifacts` checked the folder at start-up; one that became a file since (a volume gone)
    fails the next retraining at its start, naming the folder and what to do, not after the fit with
    a traceback. Once the folder is back the next retraining writes its checkpoint there."""
    from daemon_helpers import metric_value

    from forecaster.registry import _FACTORIES

    fits: list[int] = []

    class Counted(_Savable):
        def fit(self, series):  # type: ignore[no-untyped-def]
            fits.append(len(series))
            return super().fit(series)

    artifacts = tmp_path / "art"
    register("savable_test", Counted)
    try:
        daemon, clock, _, store = daemon_factory(n=1, artifact_dir=artifacts / "models")
        daemon.settings.forecast.model = "savable_test"
        spoilt = artifacts if broken == "artifacts" else artifacts / "models"
        spoilt.parent.mkdir(exist_ok=True)
        spoilt.write_text("not a folder")
        now = clock.now()
        with caplog.at_level("WARNING", logger="scaleahead"):
            assert daemon._record_job("retrain", now, lambda: daemon._retrain(now, "schedule")) is None
        assert not fits, "nothing is fitted into a folder that cannot take the checkpoint"
        assert store.models() == [] and store.rollouts() == []
        assert metric_value(daemon, "scaleahead_job_runs_total", job_name="retrain", result="error") == 1
        (failed,) = [r for r in caplog.records if getattr(r, "event", "") == "job_failed"]
        said = failed.getMessage()
        assert str(artifacts / "models") in said and f"{spoilt} is a file" in said, said
        assert "--artifacts" in said and "Nothing was fitted" in said
        assert failed.exc_info is None, "a foreseeable failure gets no traceback"
        spoilt.unlink()
        result = daemon._record_job("retrain", now + 60, lambda: daemon._retrain(now + 60, "schedule"))
        assert result is not None and fits
        assert Path(result.artifact_path).parent == artifacts / "models" and Path(result.artifact_path).is_file()
    finally:
        _FACTORIES.pop("savable_test", None)


class _History:
    """Per policy index, the series a history source returned; ``errors`` as PrometheusHistory
    keeps them (a read that failed leaves the workload out of the result)."""

    def __init__(self, data: dict[int, Series], errors: dict[int, str] | None = None) -> None:
        self.data = data
        self.error_at = errors or {}
        self.errors: dict[object, str] = {}

    def read(self, policies, now):  # type: ignore[no-untyped-def]
        self.errors = {p.workload: self.error_at[i] for i, p in enumerate(policies) if i in self.error_at}
        return {p.workload: self.data[i] for i, p in enumerate(policies) if i in self.data}


@pytest.mark.parametrize("odd", ["new_workload", "stopped_reporting", "all_missing"])
def test_one_odd_workload_does_not_stop_retraining_the_others(daemon_factory, nasa, caplog, odd) -> None:
    """A workload whose history starts inside the held-out tail (added 3.6 hours ago) stopped
    retraining for every workload, daily, with advice to check the query (audit of 2026-12-05)."""
    import logging

    daemon, clock, _, store = daemon_factory(n=2)
    now = clock.now()
    base = nasa.between(now - 3 * DAY, now)
    values = base.values.copy()
    if odd == "new_workload":
        values[: int(len(values) * 0.95)] = np.nan
    elif odd == "stopped_reporting":
        values[int(len(values) * 0.5) :] = np.nan
    else:
        values[:] = np.nan
    good = Series(base.name, base.start, base.step_s, base.values.copy())
    daemon.training_history = _History({0: good, 1: Series(base.name, base.start, base.step_s, values)})
    with caplog.at_level(logging.INFO, logger="scaleahead.retraining"):
        result = daemon._record_job("retrain", now, lambda: daemon._retrain(now, "schedule"))
    assert result is not None, [r.getMessage() for r in caplog.records]
    model = store.model(result.model_version_id)
    assert model.status == "challenger" and model.metrics["holdout_wape"] is not None
    odd_key = daemon.deps.policies[1].workload.key
    left = {e["workload"]: e for e in model.metrics["left_out"]}
    assert result.metrics["left_out"] == model.metrics["left_out"]
    reason = {"new_workload": "not_scored", "stopped_reporting": "not_scored", "all_missing": "no_data"}[odd]
    assert set(left) == {odd_key} and left[odd_key]["reason"] == reason
    assert model.metrics["series"] == (1 if odd == "all_missing" else 2)
    assert model.metrics["scored_series"] == 1
    said = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "retrain_left_out"]
    assert len(said) == 1 and odd_key in said[0] and left[odd_key]["detail"] in said[0]
    if odd == "new_workload":
        assert "held-out" in left[odd_key]["detail"]


def test_a_failed_history_read_refuses_the_retraining_unless_allowed(daemon_factory, nasa, caplog) -> None:
    """A retraining fitted on half the workloads (Prometheus failing for the others) was registered
    and superseded the running retrained rollout; only a log line named the failure (audit of 2026-12-05)."""
    import logging

    daemon, clock, _, store = daemon_factory(n=2)
    now = clock.now()
    first = daemon._record_job("retrain", now, lambda: daemon._retrain(now, "schedule"))
    assert first is not None
    good = nasa.between(now - 3 * DAY, now)
    failing = "Workload Deployment/default/web1, query 'x': Prometheus answered 503 (overloaded)."
    daemon.training_history = _History({0: good}, errors={1: failing})
    later = now + DAY
    with caplog.at_level(logging.WARNING):
        refused = daemon._record_job("retrain", later, lambda: daemon._retrain(later, "schedule"))
    assert refused is None
    assert [m.id for m in store.models()] == [first.model_version_id]
    assert [(r.id, r.state) for r in store.rollouts()] == [(first.rollout_ids[0], "running")]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert failing in said and "retrain_allow_failed_reads" in said and "Nothing was registered" in said
    assert not any(r.exc_info for r in caplog.records), "a foreseeable failure: no traceback"

    daemon.settings.jobs.retrain_allow_failed_reads = True
    allowed = daemon._record_job("retrain", later, lambda: daemon._retrain(later, "schedule"))
    assert allowed is not None
    model = store.model(allowed.model_version_id)
    web1 = daemon.deps.policies[1].workload.key
    assert model.metrics["left_out"] == [{"workload": web1, "reason": "history_failed", "detail": failing}]
    assert model.metrics["series"] == 1


def test_a_database_failure_while_registering_deletes_the_checkpoint_file_just_written(
    daemon_factory, tmp_path, caplog
) -> None:
    """The file stayed in the artifacts folder, named by no version, so prune never removed it
    (audit of 2026-12-05)."""
    import logging

    from tests.conftest import fail_once

    art = tmp_path / "art"
    register("savable_test", _Savable)
    daemon, clock, _, store = daemon_factory(n=1, artifact_dir=art)
    daemon.settings.forecast.model = "savable_test"
    fail_once(store.engine, "INSERT INTO model_versions", "database is locked")
    now = clock.now()
    with caplog.at_level(logging.WARNING):
        out = daemon._record_job("retrain", now, lambda: daemon._retrain(now, "schedule"))
    assert out is None and store.models() == []
    assert [p for p in art.rglob("*") if p.is_file()] == [], "no checkpoint file left that no version names"
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "database is locked" in said and "deleted" in said and "Nothing was registered" in said
    assert not any(r.exc_info for r in caplog.records)
    # The next retraining registers normally and keeps its file.
    again = daemon._record_job("retrain", now + 60, lambda: daemon._retrain(now + 60, "schedule"))
    assert again is not None and Path(again.artifact_path).is_file()
