"""Forecaster defects found in review (2026-12-04 night), each with the input that showed it:
a calibrated baseline started without history, one validation time cut across series, leading
missing data in a baseline's fit, infinite samples, and checkpoints edited or damaged by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from forecaster import QUANTILES
from forecaster.base import common_cut
from forecaster.baselines import Naive, WindowMean
from forecaster.calibration import LevelCalibrated
from forecaster.datamodule import WindowDataModule
from forecaster.lstm import CheckpointError, LSTMForecaster
from scaleahead.types import Series
from tests.forecaster.conftest import DAY, daily_series

V2 = Path(__file__).parent / "fixtures" / "lstm_v2_60s.pt"


def test_a_calibrated_baseline_without_history_asks_to_be_fitted() -> None:
    model = LevelCalibrated(Naive(), "calibrated_naive")
    assert model.needs_fit, "the loop fits a model on its first history only when it says it needs it"
    model.fit([daily_series(days=1.0)])
    assert not model.needs_fit


def test_one_validation_time_cut_for_series_of_different_spans() -> None:
    old = daily_series(days=4.0)
    new_start = old.start + 3 * DAY
    new = Series("new", new_start, old.step_s, old.between(new_start, old.end).values * 2, "req")
    cut_old, cut_new = common_cut([old, new], 0.15)
    t_cut = old.start + cut_old * old.step_s
    assert cut_old == int(len(old) * 0.85)
    assert new.start + cut_new * new.step_s == t_cut, "the same instant in both series"
    assert common_cut([old], 0.15) == [int(len(old) * 0.85)]

    from forecaster.lstm import LSTMConfig

    spec = LSTMConfig().feature_spec(old.step_s)
    dm = WindowDataModule([old, new], spec, max_train_windows=2000, max_val_windows=500)
    dm.setup()
    assert dm.train is not None and dm.val is not None
    h = spec.horizon_steps
    for k, s in enumerate((old, new)):
        tr = dm.train.origin[dm.train.series == k]
        va = dm.val.origin[dm.val.series == k]
        # every training target ends before the cut, every validation origin is at or after it
        assert (s.start + (tr + h) * s.step_s <= t_cut + 1e-6).all()
        assert (s.start + va * s.step_s >= t_cut - 1e-6).all()
    assert (dm.train.series == 1).sum() > 0 and (dm.val.series == 1).sum() > 0


@pytest.mark.parametrize("make", [Naive, WindowMean])
def test_missing_data_before_the_first_observation_does_not_widen_a_baselines_quantiles(make: type) -> None:
    observed = daily_series(days=1.0)
    leading = Series(
        observed.name,
        observed.start - DAY,
        observed.step_s,
        np.concatenate([np.full(len(observed), np.nan), observed.values]),
        "req",
    )
    a, b = make().fit([observed]), make().fit([leading])
    for q in (0.9, 0.99):
        # the same residuals up to the fit origins' spacing; before the fix p99 was several times wider
        assert b.resid[q][-1] == pytest.approx(a.resid[q][-1], rel=0.25)


def test_an_infinite_sample_is_read_as_a_missing_one_by_the_lstm(tiny_lstm_config) -> None:  # type: ignore[no-untyped-def]
    model = LSTMForecaster(tiny_lstm_config).fit([daily_series(days=2.5)])
    s = daily_series(days=3.0)
    o = 3500
    with_nan, with_inf = s.values.copy(), s.values.copy()
    with_nan[o - 5] = np.nan
    with_inf[o - 5] = np.inf
    a = model.predict_origins(Series(s.name, s.start, s.step_s, with_nan), np.array([o]), 15)
    b = model.predict_origins(Series(s.name, s.start, s.step_s, with_inf), np.array([o]), 15)
    for q in QUANTILES:
        assert np.isfinite(b[q]).all()
        np.testing.assert_allclose(a[q], b[q])
    from scaleahead.types import WorkloadRef

    ref = WorkloadRef("Deployment", "default", "web")
    origin = s.start + o * s.step_s
    (f,) = model.forecast_many([(ref, Series(s.name, s.start, s.step_s, with_inf))], origin, 15)
    (g,) = model.forecast_many([(ref, Series(s.name, s.start, s.step_s, with_nan))], origin, 15)
    for q in QUANTILES:
        assert np.isfinite(f.quantiles[q]).all()
        np.testing.assert_allclose(f.quantiles[q], g.quantiles[q], rtol=1e-6)


@pytest.fixture(scope="module")
def current(tiny_lstm_config, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    """A checkpoint of the current format (V2 predates the blend: its upgrade sets the weight)."""
    model = LSTMForecaster(tiny_lstm_config).fit([daily_series(days=2.5)])
    return model.save(tmp_path_factory.mktemp("ckpt") / "current.pt")


def _edited(tmp_path: Path, edit, source: Path = V2) -> Path:  # type: ignore[no-untyped-def]
    raw = torch.load(source, weights_only=True)
    edit(raw)
    path = tmp_path / "edited.pt"
    torch.save(raw, path)
    return path


def _set(key: str, value: object):  # type: ignore[no-untyped-def]
    def edit(raw: dict) -> None:  # type: ignore[type-arg]
        raw[key] = value

    return edit


def _nan_weight(raw: dict) -> None:  # type: ignore[type-arg]
    name = next(iter(raw["state_dict"]))
    raw["state_dict"][name] = raw["state_dict"][name].clone().fill_(float("nan"))


def _spec_edit(raw: dict) -> None:  # type: ignore[type-arg]
    raw["spec"]["scale_s"] = 60.0


def _config_edit(raw: dict) -> None:  # type: ignore[type-arg]
    raw["config"]["recent_s"] = 1800.0


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_set("quantiles", [0.9, 0.5, 0.1, 0.99]), "distinct and increasing"),
        (_set("quantiles", [0.1, 0.5, 0.5, 0.99]), "distinct and increasing"),
        (_set("calibration", [float("nan")] * 4), "spread factors"),
        (_set("calibration", [1.0, 1.0, float("inf"), 1.0]), "spread factors"),
        (_set("blend_weight", float("nan")), "blend weight"),
        (_set("blend_weight", 2.0), "blend weight"),
        (_nan_weight, "NaN or infinite weights"),
        (_spec_edit, "differ from its config's in scale_s"),
        (_config_edit, "differ from its config's in recent_s"),
    ],
)
def test_an_edited_or_damaged_checkpoint_is_refused(tmp_path: Path, current: Path, edit, says: str) -> None:  # type: ignore[no-untyped-def]
    # V2 predates the blend (its upgrade writes the weight) and kept no window settings in its
    # config (its spec is their only record): only the current format can carry those edits.
    for source in (current,) if "blend" in says or "differ" in says else (V2, current):
        assert len(torch.load(source, weights_only=True)["quantiles"]) == 4
        with pytest.raises(CheckpointError, match=says):
            LSTMForecaster.load(_edited(tmp_path, edit, source), step_s=60.0)


def test_a_checkpoint_never_sets_more_threads_than_the_machine_has(tmp_path: Path) -> None:
    import os

    def many(raw: dict) -> None:  # type: ignore[type-arg]
        raw["config"]["threads"] = 512

    before = torch.get_num_threads()
    try:
        LSTMForecaster.load(_edited(tmp_path, many), step_s=60.0)
        assert torch.get_num_threads() <= (os.cpu_count() or 1)
    finally:
        torch.set_num_threads(before)


def test_the_loop_says_when_its_history_is_shorter_than_what_the_lstm_reads() -> None:
    from forecaster.baselines import SeasonalNaive
    from scaleahead.commands.run import history_short_for

    model = LSTMForecaster.load(V2, step_s=60.0)
    assert "SCALEAHEAD_LOOP__HISTORY_DAYS=7.02" in history_short_for(model, 2.0)
    assert history_short_for(model, 7.02) == ""
    assert history_short_for(SeasonalNaive(), 2.0) == ""


def test_an_old_format_checkpoint_is_not_checked_against_window_settings_its_config_never_had(
    tmp_path: Path,
) -> None:
    raw = torch.load(V2, weights_only=True)
    assert raw["format_version"] == 2
    raw["spec"]["horizon_s"] = 1800.0  # its config keeps no horizon: only the spec says it
    path = tmp_path / "v2-1800.pt"
    torch.save(raw, path)
    # Not "differ from its config" (the window check runs first, and skips format 2): the fixture's
    # network has 15 outputs, so what stops this file is its network, as before the check existed.
    with pytest.raises(CheckpointError, match="does not match the network it declares"):
        LSTMForecaster.load(path, step_s=60.0)


def test_a_workload_at_exactly_zero_is_forecast_at_zero_by_the_lstm(tiny_lstm_config) -> None:  # type: ignore[no-untyped-def]
    """Found by a review (2026-12-07): a flat-zero context took a placeholder scale of 1, so the
    LSTM forecast about 1 unit of demand for an idle workload (p99 1.6 req/s for one at 0)."""
    from scaleahead.types import WorkloadRef

    busy = daily_series(days=2.5)
    model = LSTMForecaster(tiny_lstm_config).fit([busy])
    idle = Series("idle", busy.start, busy.step_s, np.zeros(len(busy)), "req")
    origins = np.array([len(idle) - 100, len(idle) - 10])
    for q, v in model.predict_origins(idle, origins, 15).items():
        np.testing.assert_array_equal(v, 0.0, err_msg=f"q{q}")
    (fc,) = model.forecast_many([(WorkloadRef("Deployment", "shop", "idle"), idle)], idle.end, 15)
    for q in fc.quantiles:
        np.testing.assert_array_equal(fc.quantiles[q], 0.0)
    # one observed non-zero value in the context: forecast by the network as before, not forced to 0
    once = Series("once", busy.start, busy.step_s, np.where(np.arange(len(busy)) == len(busy) - 50, 3.0, 0.0), "req")
    assert model.predict_origins(once, np.array([len(once) - 10]), 15)[0.99].max() > 0.0
