"""Which forecaster `scaleahead run` starts with: the registry's LSTM champion, else the fallback."""

from __future__ import annotations

import os
from pathlib import Path

from scaleahead.commands.run import _production_model
from scaleahead.settings import Settings
from scaleahead.traces import load_series
from storage import Store

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _history():  # type: ignore[no-untyped-def]
    s = load_series("nasa-10s")
    return [s.between(s.start + 2 * 86400.0, s.start + 4 * 86400.0)]


def test_without_a_trained_lstm_the_daemon_starts_on_the_fitted_fallback(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    model, version = _production_model("lstm", store, Settings(), _history())
    assert model.name == "seasonal_naive"
    assert version is None


def test_the_newest_lstm_champion_is_loaded_not_trained(tmp_path: Path) -> None:
    from forecaster.lstm import LSTMConfig, LSTMForecaster

    history = _history()
    trained = LSTMForecaster(LSTMConfig(max_epochs=1, hidden=8, max_train_windows=500, calibrate=False)).fit(history)
    path = trained.save(tmp_path / "lstm.pt")
    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    store.register_model("lstm-old", "lstm", artifact_path=str(path), status="retired")
    mid = store.register_model("lstm-now", "lstm", artifact_path=str(path), status="champion")
    model, version = _production_model("lstm", store, Settings(), history)
    assert model.name == "lstm"
    assert version == mid
    assert model.report.epochs == 0, "loaded from the checkpoint, not fitted again"


def test_an_lstm_clock_champion_is_loaded_with_its_clock_not_trained(tmp_path: Path) -> None:
    from forecaster.lstm import LSTMConfig, LSTMForecaster

    history = _history()
    cfg = LSTMConfig(max_epochs=1, hidden=8, max_train_windows=500, calibrate=False, clock_period_s=300.0)
    path = LSTMForecaster(cfg).fit(history).save(tmp_path / "clock.pt")
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    store.register_model("lstm-plain", "lstm", artifact_path=str(path), status="champion")
    mid = store.register_model("lstm-clock-now", "lstm_clock", artifact_path=str(path), status="champion")
    model, version = _production_model("lstm_clock", store, Settings(), history)
    assert version == mid
    assert isinstance(model, LSTMForecaster) and model.report.epochs == 0, "loaded, not fitted again"
    assert model.spec is not None and model.spec.clock_period_s == 300.0


def test_a_champion_trained_on_data_after_now_is_not_used(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    # No peeking: a version trained on the trace a virtual run replays (`train --whole`) would
    # forecast a period it has seen. Until 2026-12-07 `run` planned with it and said nothing
    # (no-peeking audit).
    from forecaster.lstm import LSTMConfig, LSTMForecaster

    history = _history()
    path = LSTMForecaster(LSTMConfig(max_epochs=1, hidden=8, max_train_windows=500, calibrate=False)).fit(history)
    saved = path.save(tmp_path / "lstm.pt")
    end = history[0].end
    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    mid = store.register_model("lstm-whole", "lstm", artifact_path=str(saved), status="champion", data_end=end)
    fell_back: list[str] = []
    unloadable: list[int] = []
    model, version = _production_model("lstm", store, Settings(), history, unloadable, fell_back, now=end - 3600.0)
    assert (model.name, version, fell_back, unloadable) == ("seasonal_naive", None, ["unloadable"], [mid])
    assert f"Model version {mid} was trained on data up to" in caplog.text and "after now" in caplog.text
    # Its data ending within one step of now is what a loop reads: used.
    model, version = _production_model("lstm", store, Settings(), history, now=end - 10.0)
    assert (model.name, version) == ("lstm", mid)
    model, version = _production_model("lstm", store, Settings(), history, now=end + 600.0)
    assert (model.name, version) == ("lstm", mid)


def test_a_registered_champion_of_a_baseline_family_is_production_with_its_id(tmp_path: Path) -> None:
    """As the running daemon follows it (model_changed); until 2026-12-07 a start ignored it, and a
    retraining's rollout named its champion by the family only (an operator audit)."""
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    sn = store.register_model("sn-1", "seasonal_naive", status="challenger")
    store.make_champion(sn)
    model, version = _production_model("seasonal_naive", store, Settings(), _history())
    assert (model.name, version) == ("seasonal_naive", sn)


def test_a_promotion_of_another_family_leaves_forecast_models_champion_for_a_restart(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    """An operator audit: a rollout of a version of another family than forecast.model retired
    forecast.model's champion when it was promoted, so a restart fell back to a baseline (for the
    lstm, its fallback). The champion stays; a start runs it and says what to set."""
    from actuator.rollouts import RolloutBook

    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    sn = store.register_model("sn-1", "seasonal_naive", status="challenger")
    store.make_champion(sn)
    wm = store.register_model("wm-1", "window_mean", status="challenger")
    book = RolloutBook(store)
    book.start("default", "canary", str(sn), str(wm), 1000.0)
    book.promote("default", 2000.0)
    assert {m.id: m.status for m in store.models()} == {sn: "champion", wm: "champion"}
    with caplog.at_level("WARNING"):
        model, version = _production_model("seasonal_naive", store, Settings(), _history())
    assert (model.name, version) == ("seasonal_naive", sn)
    assert "rollout 1 promoted window_mean version 2, but a start runs forecast.model's family" in caplog.text
    assert "set forecast.model: window_mean" in caplog.text
