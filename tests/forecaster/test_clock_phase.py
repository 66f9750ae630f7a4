"""The clock-phase input of the LSTM (``lstm_clock``): demand that jumps at clock marks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from forecaster.features import FeatureSpec, build_inputs, clock_one_hot, clock_rises
from forecaster.lstm import LSTMConfig, LSTMForecaster
from forecaster.registry import CLOCK_PERIOD_S, LEARNED, make_model
from scaleahead.errors import DataError
from scaleahead.types import Series
from tests.forecaster.conftest import START


def test_the_one_hot_marks_the_origins_step_within_the_period() -> None:
    spec = FeatureSpec(step_s=10.0, clock_period_s=300.0)
    assert spec.clock_phases == 30
    times = START + np.array([0.0, 10.0, 290.0, 300.0, 610.0])
    hot = clock_one_hot(times, spec)
    assert hot.shape == (5, 30)
    assert (hot.sum(axis=1) == 1).all()
    assert list(hot.argmax(axis=1)) == [0, 1, 29, 0, 1]


def test_without_a_clock_period_the_inputs_are_those_of_earlier_releases() -> None:
    plain, clock = FeatureSpec(step_s=60.0), FeatureSpec(step_s=60.0, clock_period_s=300.0)
    assert plain.clock_phases == 0 and clock.clock_phases == 5
    assert clock.n_static == plain.n_static + 5
    values = np.arange(3000, dtype=float)
    origins = np.array([1500, 2000], dtype=np.int64)
    a, b = build_inputs(values, START, plain, origins), build_inputs(values, START, clock, origins)
    assert a.static.shape[1] == plain.n_static and b.static.shape[1] == clock.n_static
    np.testing.assert_array_equal(b.static[:, : plain.n_static], a.static)
    assert list(b.static[:, plain.n_static :].argmax(axis=1)) == [0, 0]  # 1500 and 2000 min are 5-min marks


@pytest.mark.parametrize("period", [15.0, 10.0, -300.0, float("nan"), 36010.0])
def test_a_period_that_is_not_a_whole_number_of_steps_is_refused_before_training(period: float) -> None:
    series = Series("s", START, 10.0, np.ones(5000), "req")
    with pytest.raises(DataError, match="Clock period"):
        LSTMForecaster(LSTMConfig(clock_period_s=period, max_epochs=1)).fit([series])


def cron_series(days: float, seed: int) -> Series:
    """10 s demand at a level of 10 with bursts to 25 of 30-60 s that start only on 5-minute marks (one in ten)."""
    rng = np.random.default_rng(seed)
    n = int(days * 86400 / 10)
    v = 10.0 + rng.normal(0, 0.3, n)
    for mark in range(0, n, 30):
        if rng.random() < 0.3:
            v[mark : mark + int(rng.integers(3, 7))] += 15.0
    return Series("cron", START, 10.0, v, "req")


@pytest.fixture(scope="module")
def fitted(tiny_lstm_config: LSTMConfig) -> dict[str, LSTMForecaster]:
    # The production network's size and 10 epochs at a higher rate: about 20 s each (the tiny config
    # of the other tests does not learn a phase effect).
    cfg = replace(
        tiny_lstm_config, hidden=32, mlp=128, lr=1e-2, max_epochs=10, patience=10, max_train_windows=10000,
        max_val_windows=800,
    )  # fmt: skip
    history = [cron_series(3.0, seed=1)]
    return {
        "lstm": LSTMForecaster(cfg).fit(history),
        "lstm_clock": LSTMForecaster(replace(cfg, clock_period_s=CLOCK_PERIOD_S)).fit(history),
    }


@pytest.mark.slow
def test_with_the_clock_the_p90_rises_after_the_marks_and_not_before_them(fitted: dict[str, LSTMForecaster]) -> None:
    """Bursts start only on 5-minute marks: the clock model learns where in the next 90 steps they can
    start; the plain model cannot tell, so its p90 is flat over the phase."""
    series = cron_series(1.0, seed=2)
    origins = np.arange(2000, 8000, 7, dtype=np.int64)  # every phase
    lift = {}
    for name, model in fitted.items():
        p90 = model.predict_origins(series, origins, 90)[0.9]  # [n, 90]
        phase = np.mod(origins[:, None] + np.arange(90)[None, :], 30)  # step within 300 s (START is midnight)
        lift[name] = float(p90[phase <= 2].mean() - p90[(phase >= 25) & (phase <= 27)].mean())
    assert lift["lstm_clock"] > 1.0, lift  # 10 % of a level of 10
    assert lift["lstm_clock"] > 3 * abs(lift["lstm"]) + 0.5, lift


@pytest.mark.slow
def test_a_clock_checkpoint_keeps_its_period_and_forecasts_the_same(
    fitted: dict[str, LSTMForecaster], tmp_path: Path
) -> None:
    model = fitted["lstm_clock"]
    path = model.save(tmp_path / "c.pt")
    assert torch.load(path, weights_only=True)["format_version"] == 4  # earlier releases refuse it by version
    loaded = LSTMForecaster.load(path, step_s=10.0)
    assert loaded.name == model.name == "lstm_clock"
    assert loaded.spec is not None and loaded.spec.clock_period_s == CLOCK_PERIOD_S
    assert loaded.config.clock_period_s == CLOCK_PERIOD_S
    series = cron_series(1.0, seed=3)
    origins = np.array([3000, 3007], dtype=np.int64)
    a, b = model.predict_origins(series, origins, 90), loaded.predict_origins(series, origins, 90)
    for q in a:
        np.testing.assert_allclose(a[q], b[q], rtol=1e-6)


def test_lstm_clock_is_a_learned_model_with_a_5_minute_period() -> None:
    assert "lstm_clock" in LEARNED
    model = make_model("lstm_clock")
    assert isinstance(model, LSTMForecaster) and model.config.clock_period_s == 300.0
    assert model.name == "lstm_clock" and make_model("lstm").name == "lstm"


def test_clock_rises_finds_bursts_that_start_on_marks_and_not_noise() -> None:
    cron = cron_series(2.0, seed=4)
    c = clock_rises(cron.values, cron.start, cron.step_s)
    assert c.chance == pytest.approx(10 / 300)
    assert c.rises > 100 and c.on_mark == c.rises and c.suggests_clock()  # every burst starts on a mark
    shifted = clock_rises(cron.values, cron.start + 10.0, cron.step_s)  # the same bursts 10 s off the marks
    assert shifted.on_mark == 0 and not shifted.suggests_clock()
    grid = clock_rises(cron.values, cron.start + 3.0, cron.step_s)  # a grid 3 s off the marks: same buckets
    assert grid.on_mark == c.on_mark
    noise = Series("noise", START, 10.0, 10 + np.random.default_rng(0).exponential(2.0, 20000), "req")
    n = clock_rises(noise.values, noise.start, noise.step_s)
    assert n.rises > 1000 and 0.5 < n.lift < 1.5 and not n.suggests_clock()
    assert clock_rises(np.array([np.nan, 1.0, 0.0, 5.0]), START, 10.0).rises == 0  # NaN or zero before: no rise


@pytest.mark.parametrize(("trace", "clock"), [("alibaba-cpu-10s", True), ("nasa-10s", False), ("worldcup-1m", False)])
def test_on_the_real_traces_histories_only_alibaba_rises_on_the_clock(trace: str, clock: bool) -> None:
    from scaleahead.traces import load_series, split_of

    s = load_series(trace)
    sp = split_of(s, trace)
    h = s.between(sp.start, sp.test_start)
    assert clock_rises(h.values, h.start, h.step_s).suggests_clock() is clock


@pytest.mark.slow
def test_train_notes_a_clock_effect_in_the_data_and_names_lstm_clock(tmp_path: Path) -> None:
    import subprocess
    import sys

    s = cron_series(3.0, seed=5)
    csv = tmp_path / "cron.csv"
    csv.write_text("timestamp,value\n" + "".join(f"{int(t)},{v:.3f}\n" for t, v in zip(s.times(), s.values)))
    args = ["train", "--trace", str(csv), "--db", f"sqlite:///{tmp_path / 'm.db'}", "--out", str(tmp_path / "m")]
    proc = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *args, "--epochs", "1"], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert "on 5-minute marks" in proc.stderr and "--model lstm_clock gives the LSTM" in proc.stderr
