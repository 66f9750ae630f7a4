"""Found in review of the forecaster: diverged training kept as a model, DDP processes drifting
apart and misreporting, checkpoints that their own loader refuses or that load damaged, and
unhelpful errors on data ending in an outage. Tiny models only: each fit takes about a second."""

from __future__ import annotations

import dataclasses
import io
import socket
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from forecaster import QUANTILES
from forecaster.lstm import CheckpointError, LSTMConfig, LSTMForecaster
from scaleahead.errors import DataError
from scaleahead.types import Series
from tests.forecaster.conftest import START, daily_series


@pytest.fixture(scope="module")
def trained(tiny_lstm_config: LSTMConfig) -> LSTMForecaster:
    return LSTMForecaster(tiny_lstm_config).fit([daily_series(days=2.5)])


def _with_glitches(s: Series) -> Series:
    v = s.values.copy()
    v[1000:2400:100] = 1e42  # finite in float64, infinite in the network's float32 (a counter glitch)
    return Series(s.name, s.start, s.step_s, v, s.unit)


# -- 1: a NaN model is never kept -----------------------------------------------------------------


def test_a_value_too_large_for_float32_is_missing_and_training_stays_finite(tiny_lstm_config: LSTMConfig) -> None:
    model = LSTMForecaster(tiny_lstm_config).fit([_with_glitches(daily_series(days=2.5))])
    assert np.isfinite(model.report.val_loss)
    assert all(bool(torch.isfinite(t).all()) for t in model.net.state_dict().values())  # type: ignore[union-attr]


def test_a_fit_whose_training_diverges_is_a_data_error_and_saves_nothing(
    tiny_lstm_config: LSTMConfig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import forecaster.datamodule as dm

    make_windows = dm.make_windows

    def poisoned(*args, **kwargs):  # type: ignore[no-untyped-def]
        w = make_windows(*args, **kwargs)
        w.seq[:, 0, 0] = np.inf  # what the data's guards prevent: the loss, then every weight, NaN
        return w

    monkeypatch.setattr(dm, "make_windows", poisoned)
    model = LSTMForecaster(tiny_lstm_config)
    with pytest.raises(DataError, match="diverged"):
        model.fit([daily_series(days=2.5)])
    assert model.net is None
    with pytest.raises(Exception, match="Nothing to save"):
        model.save(tmp_path / "m.pt")


# -- 2, 3: DDP ----------------------------------------------------------------------------------


def test_the_validation_loss_is_averaged_over_processes(tiny_lstm_config: LSTMConfig) -> None:
    """Each DDP process validates its own shard; the scheduler, EarlyStopping and ModelCheckpoint
    of every process must see the global loss (sync_dist), or the copies drift apart."""
    from forecaster.lightning_module import QuantileLSTMModule

    module = QuantileLSTMModule(2, 3, 2, QUANTILES, 4, hidden=2, mlp=4)
    logged: dict[str, dict[str, object]] = {}
    module.log = lambda name, value, **kw: logged.__setitem__(name, kw)  # type: ignore[method-assign]
    batch = (torch.zeros(5, 4, 2), torch.zeros(5, 3), torch.ones(5, 2), torch.ones(5, 2), torch.ones(5))
    module.validation_step(batch, 0)
    assert logged["val_loss"].get("sync_dist") is True


@pytest.mark.slow
def test_a_ddp_fit_reports_its_best_validation_loss_and_epochs(
    tiny_lstm_config: LSTMConfig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from forecaster.distributed import ddp_trainer_kwargs

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    model = LSTMForecaster(dataclasses.replace(tiny_lstm_config, max_epochs=3, patience=9), checkpoint_dir=tmp_path)
    model.trainer_kwargs = ddp_trainer_kwargs(2)
    model.fit([daily_series(days=2.5)])
    assert model.world_size == 2
    assert model.report.epochs == 3  # the main process's trainer stays at epoch 0
    best = torch.load(tmp_path / "best.ckpt", map_location="cpu", weights_only=False)
    (state,) = [v for k, v in best["callbacks"].items() if k.startswith("ModelCheckpoint")]
    assert model.report.val_loss == pytest.approx(float(state["best_model_score"]), abs=0)


# -- 4: LevelCalibrated on a history with no error to learn from ---------------------------------


def test_level_calibration_on_data_then_an_outage_fits_unfitted_and_refuses_to_forecast() -> None:
    from forecaster.registry import make_model

    v = np.full(3000, np.nan)
    v[:50] = 20.0 + np.arange(50) % 3  # 50 minutes of data, then two days of outage
    s = Series("s", START, 60.0, v)
    model = make_model("calibrated_window_mean")
    model.fit([s])
    with pytest.raises(DataError, match="no forecast uncertainty"):
        model.predict_origins(s, np.array([40]), 15)


# -- 5, 6, 7: checkpoints -----------------------------------------------------------------------


def test_numpy_scalars_in_the_spec_and_config_are_saved_as_plain_numbers(
    trained: LSTMForecaster, tmp_path: Path
) -> None:
    model = LSTMForecaster(dataclasses.replace(trained.config, horizon_s=np.float64(900.0)))  # type: ignore[arg-type]
    model.net, model.calibration, model.meta = trained.net, trained.calibration, trained.meta
    assert trained.spec is not None
    model.spec = dataclasses.replace(trained.spec, step_s=np.float64(60.0))  # type: ignore[arg-type]
    loaded = LSTMForecaster.load(model.save(tmp_path / "np.pt"), step_s=60.0)
    assert type(loaded.spec.step_s) is float  # type: ignore[union-attr]


def _flip_in_member(data: bytes, member: str) -> bytes:
    """``data`` (a torch zip) with one byte in the middle of ``member``'s stored bytes changed."""
    z = zipfile.ZipFile(io.BytesIO(data))
    (info,) = [i for i in z.infolist() if i.filename.endswith(member)]
    local_extra = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + len(info.filename.encode()) + local_extra
    out = bytearray(data)
    out[start + info.compress_size // 2] ^= 0x5A
    return bytes(out)


def test_a_byte_changed_in_a_weight_tensor_is_refused_not_loaded(trained: LSTMForecaster, tmp_path: Path) -> None:
    path = trained.save(tmp_path / "m.pt")
    names = [i.filename for i in zipfile.ZipFile(path).infolist()]
    largest = max((n for n in names if "/data/" in n), key=lambda n: zipfile.ZipFile(path).getinfo(n).file_size)
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(_flip_in_member(path.read_bytes(), largest))
    torch.load(damaged, weights_only=True)  # torch itself does not notice
    with pytest.raises(CheckpointError, match="digest"):
        LSTMForecaster.load(damaged, step_s=60.0)


def test_a_checkpoint_without_a_digest_still_loads(trained: LSTMForecaster, tmp_path: Path) -> None:
    """Checkpoints written before the digest (and the committed fixtures) have none."""
    path = trained.save(tmp_path / "m.pt")
    raw = torch.load(path, weights_only=True)
    del raw["digest"]
    torch.save(raw, path)
    LSTMForecaster.load(path, step_s=60.0)


def test_a_format_1_checkpoint_with_another_horizon_loads_again_after_saving(tmp_path: Path) -> None:
    from forecaster.features import FeatureSpec
    from forecaster.lstm import V1_WINDOWS
    from forecaster.net import QuantileLSTM

    torch.manual_seed(0)
    spec = FeatureSpec(step_s=60.0, horizon_s=1800.0, **V1_WINDOWS)  # type: ignore[arg-type]
    hp = {"hidden": 4, "mlp": 8, "dropout": 0.0, "lr": 3e-3, "weight_decay": 1e-5, "highway": False}
    net = QuantileLSTM(2, spec.n_static, spec.horizon_steps, 4, spec.recent.length, 4, 8, 0.0, False)
    v1 = {
        "format": "scaleahead-lstm",
        "format_version": 1,
        "hyper_parameters": {**hp, "quantiles": list(QUANTILES), "horizon": spec.horizon_steps},
        "step_s": 60.0,
        "horizon_s": 1800.0,
        "state_dict": {f"net.{k}": t for k, t in net.state_dict().items()},
    }
    torch.save(v1, tmp_path / "v1.pt")
    model = LSTMForecaster.load(tmp_path / "v1.pt", step_s=60.0)
    assert model.config.horizon_s == 1800.0
    again = LSTMForecaster.load(model.save(tmp_path / "again.pt"), step_s=60.0)
    assert again.spec == model.spec


# -- 8: a validation span that is all missing -----------------------------------------------------


def test_a_validation_span_without_observed_values_is_named_as_such(tiny_lstm_config: LSTMConfig) -> None:
    s = daily_series(days=2.5)
    v = s.values.copy()
    v[int(len(v) * 0.8) :] = np.nan  # the data ends in an outage
    with pytest.raises(DataError, match="validation span") as err:
        LSTMForecaster(tiny_lstm_config).fit([Series(s.name, s.start, s.step_s, v, s.unit)])
    assert "outage" in err.value.message and "few hours of history" not in err.value.message
