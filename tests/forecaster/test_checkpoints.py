"""Versioned LSTM checkpoints: round trip, an earlier format version, and the named fallback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from forecaster import QUANTILES
from forecaster.lstm import FORMAT_VERSION, CheckpointError, LSTMForecaster, load_or_fallback
from tests.forecaster.conftest import daily_series

V1 = Path(__file__).parent / "fixtures" / "lstm_v1_60s.pt"
V2 = Path(__file__).parent / "fixtures" / "lstm_v2_60s.pt"
#: FeatureSpec's fields in the releases of checkpoint format 3 (before the clock input).
V3_SPEC_KEYS = (
    "step_s", "horizon_s", "recent_s", "min_recent_steps", "long_s", "long_bucket_s", "seasonal_before_s",
    "seasonal_after_s", "seasonal_bucket_s", "scale_s",
)  # fmt: skip


@pytest.fixture(scope="module")
def trained(tiny_lstm_config) -> LSTMForecaster:  # type: ignore[no-untyped-def]
    return LSTMForecaster(tiny_lstm_config).fit([daily_series(days=2.5)])


def test_a_saved_checkpoint_loads_and_forecasts_exactly_the_same(trained: LSTMForecaster, tmp_path: Path) -> None:
    path = trained.save(tmp_path / "m.pt")
    loaded = LSTMForecaster.load(path, step_s=60.0)
    s = daily_series(days=3.0)
    origins = np.array([3000, 3500, 4000])
    a, b = trained.predict_origins(s, origins, 15), loaded.predict_origins(s, origins, 15)
    for q in QUANTILES:
        np.testing.assert_array_equal(a[q], b[q])
    # Without a clock input it is written as format 3, spec without the clock's key, so that the
    # releases before the clock (which reject a spec key they do not know) still load it.
    raw = torch.load(path, weights_only=True)
    assert raw["format_version"] == 3 and FORMAT_VERSION == 4
    assert set(raw["spec"]) == set(V3_SPEC_KEYS)
    assert loaded.meta["fit"]["epochs"] >= 1


def test_a_checkpoint_of_format_version_1_still_loads_and_forecasts() -> None:
    assert V1.stat().st_size < 20_000  # the committed fixture stays tiny
    model = LSTMForecaster.load(V1, step_s=60.0)
    assert model.meta == {"upgraded_from": 1}
    np.testing.assert_array_equal(model.calibration, np.ones(4))
    s = daily_series(days=3.0)
    qs = model.predict_origins(s, np.array([4000]), 15)
    stacked = np.stack([qs[q][0] for q in QUANTILES])
    assert (np.diff(stacked, axis=0) >= 0).all()
    # Golden value (tolerance for float summation order): the fixture's untrained weights on this input.
    assert stacked.sum() == pytest.approx(GOLDEN_V1_SUM, rel=1e-4)


GOLDEN_V1_SUM = 3185.3633486583763


def test_a_checkpoint_of_format_version_2_loads_without_a_prior_and_forecasts_as_its_release_did() -> None:
    assert V2.stat().st_size < 20_000
    model = LSTMForecaster.load(V2, step_s=60.0)
    assert model.ridge is None
    assert model.blend_weight == 1.0
    np.testing.assert_array_equal(model.blend_calibration, np.ones(4))
    assert model.config.prior == "none"
    assert model.config.blend is False
    assert model.meta["upgraded_from"] == 2
    qs = model.predict_origins(daily_series(days=3.0), np.array([4000]), 15)
    # printed by fixtures/make_v2_checkpoint.py with the format-2 release's own code
    assert sum(qs[q].sum() for q in qs) == pytest.approx(3043.848422534883, rel=1e-4)


def test_a_hybrid_blended_checkpoint_keeps_its_ridge_and_weight_and_forecasts_exactly_the_same(
    tiny_lstm_config, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    model = LSTMForecaster(replace(tiny_lstm_config, prior="ridge", blend=True)).fit([daily_series(days=2.5)])
    assert model.ridge is not None
    assert 0.0 <= model.blend_weight <= 1.0
    model.blend_weight = 0.3  # whatever validation chose, a blend must survive the round trip
    model.blend_calibration = np.array([1.2, 1.0, 0.9, 1.1])
    path = model.save(tmp_path / "hybrid.pt")
    loaded = LSTMForecaster.load(path, step_s=60.0)
    assert loaded.ridge is not None
    assert loaded.blend_weight == 0.3
    np.testing.assert_array_equal(loaded.blend_calibration, [1.2, 1.0, 0.9, 1.1])
    assert loaded.config.prior == "ridge"
    s = daily_series(days=3.0, seed=3)
    origins = np.array([3000, 3500, 4000])
    a, b = model.predict_origins(s, origins, 15), loaded.predict_origins(s, origins, 15)
    for q in QUANTILES:
        np.testing.assert_array_equal(a[q], b[q])


def test_a_corrupt_checkpoint_is_a_clear_error_and_the_named_fallback_takes_over(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(V1.read_bytes()[:3000])
    with pytest.raises(CheckpointError, match="corrupt"):
        LSTMForecaster.load(bad)
    model, why = load_or_fallback(bad, step_s=60.0, fallback="seasonal_naive")
    assert model.name == "seasonal_naive"
    assert why is not None
    assert "corrupt" in why
    assert "seasonal_naive" in why


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("spec", "step_s"), "60", "no valid resolution (spec.step_s is '60')"),
        (("spec", "step_s"), None, "no valid resolution (spec.step_s is None)"),
        (("config", "threads"), "2", "no valid thread count (config.threads is '2')"),
    ],
)
def test_a_hand_edited_checkpoint_field_falls_back_instead_of_raising(
    tmp_path: Path, path: tuple[str, str], value: object, says: str
) -> None:
    raw = torch.load(V2, weights_only=True)
    raw[path[0]][path[1]] = value
    edited = tmp_path / "edited.pt"
    torch.save(raw, edited)
    model, why = load_or_fallback(edited, step_s=60.0, fallback="seasonal_naive")
    assert model.name == "seasonal_naive" and why is not None and says in why


def test_a_checkpoint_trained_at_another_resolution_falls_back_with_a_message() -> None:
    with pytest.raises(CheckpointError, match="60 s resolution.*10 s"):
        LSTMForecaster.load(V1, step_s=10.0)
    model, why = load_or_fallback(V1, step_s=10.0, fallback="ridge")
    assert model.name == "ridge"
    assert why is not None
    assert "resolution" in why


def test_forecasting_a_series_of_another_resolution_is_refused(trained: LSTMForecaster) -> None:
    s = daily_series(days=1.0, step_s=10.0)
    with pytest.raises(CheckpointError, match="trained at 60 s"):
        trained.predict_origins(s, np.array([5000]), 90)


def test_a_newer_or_foreign_file_is_refused_with_its_version(tmp_path: Path) -> None:
    newer = tmp_path / "newer.pt"
    torch.save({"format": "scaleahead-lstm", "format_version": 99}, newer)
    with pytest.raises(CheckpointError, match="version 99"):
        LSTMForecaster.load(newer)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    with pytest.raises(CheckpointError, match="not a scaleahead LSTM checkpoint"):
        LSTMForecaster.load(foreign)
    with pytest.raises(CheckpointError, match="does not exist"):
        LSTMForecaster.load(tmp_path / "missing.pt")


def test_training_and_forecasting_leave_denormal_floats_working_for_the_rest_of_the_process(
    trained: LSTMForecaster,
) -> None:
    trained.predict_origins(daily_series(days=3.0), np.array([4000]), 15)
    tiny = np.float64(5e-324)  # the smallest subnormal double
    assert tiny > 0
    assert torch.tensor([1e-40], dtype=torch.float32).item() > 0  # not flushed to zero


@pytest.fixture(scope="module")
def hybrid(tiny_lstm_config, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    model = LSTMForecaster(replace(tiny_lstm_config, prior="ridge")).fit([daily_series(days=2.5)])
    return model.save(tmp_path_factory.mktemp("hybrid") / "hybrid.pt")


def _nan_resid(ridge: dict) -> None:
    ridge["resid"] = {q: [float("nan")] * len(r) for q, r in ridge["resid"].items()}


def _nan_coef(ridge: dict) -> None:
    ridge["coef"] = [[c * float("nan") for c in row] for row in ridge["coef"]]


def _set(key: str, value):  # type: ignore[no-untyped-def]
    return lambda ridge: ridge.__setitem__(key, value(ridge[key]))


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_set("coef", lambda c: c[:-1]), "malformed 'ridge' (ridge coef has shape (20, 15), expected (21, 15))"),
        (_nan_coef, "ridge coef holds NaN"),
        (_set("mu", lambda m: m[:3]), "ridge mu has shape (3,), expected (20,)"),
        (_set("sd", lambda sd: [0.0] * len(sd)), "ridge sd must be > 0"),
        (_nan_resid, "ridge resid 0.1 holds NaN"),
        (_set("resid", lambda _: {"0.5": [0.0] * 3}), "ridge resid 0.5 has shape (3,), expected (15,)"),
    ],
)  # fmt: skip
def test_a_damaged_embedded_ridge_is_refused_at_load_not_when_forecasting(
    hybrid: Path, tmp_path: Path, edit, says: str
) -> None:  # type: ignore[no-untyped-def]
    assert LSTMForecaster.load(hybrid, step_s=60.0).ridge is not None  # the undamaged one loads
    raw = torch.load(hybrid, weights_only=True)
    edit(raw["ridge"])
    damaged = tmp_path / "damaged.pt"
    torch.save(raw, damaged)
    with pytest.raises(CheckpointError, match="malformed 'ridge'") as err:
        LSTMForecaster.load(damaged, step_s=60.0)
    assert says in err.value.message
    model, why = load_or_fallback(damaged, step_s=60.0, fallback="seasonal_naive")
    assert model.name == "seasonal_naive" and why is not None and says in why


def test_a_hybrid_checkpoint_without_its_ridge_is_refused(hybrid: Path, tmp_path: Path) -> None:
    raw = torch.load(hybrid, weights_only=True)
    raw["ridge"] = None
    damaged = tmp_path / "no-ridge.pt"
    torch.save(raw, damaged)
    with pytest.raises(CheckpointError, match="has no 'ridge', but its config forecasts with one"):
        LSTMForecaster.load(damaged, step_s=60.0)
