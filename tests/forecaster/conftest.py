"""Small synthetic series and tiny, fast model settings shared by the forecaster tests."""

from __future__ import annotations

import os

import numpy as np
import pytest

from scaleahead.types import Series

os.environ.setdefault("OMP_NUM_THREADS", "1")

START = 1_700_006_400.0  # a midnight UTC (2023-11-15)
DAY = 86400.0


def daily_series(days: float = 3.0, step_s: float = 60.0, seed: int = 0, level: float = 100.0) -> Series:
    """A daily cycle with noise, a few short gaps and one 2-hour outage (NaN, not zero)."""
    rng = np.random.default_rng(seed)
    n = int(days * DAY / step_s)
    t = np.arange(n) * step_s
    v = level * (1 + 0.5 * np.sin(2 * np.pi * t / DAY)) + rng.normal(0, level * 0.05, n)
    v[rng.random(n) < 0.02] = np.nan
    out_at = int(1.3 * DAY / step_s)
    v[out_at : out_at + int(7200 / step_s)] = np.nan
    return Series("synthetic", START, step_s, np.maximum(v, 0.0), "req")


@pytest.fixture(scope="session")
def tiny_lstm_config():  # type: ignore[no-untyped-def]
    from forecaster.lstm import LSTMConfig

    return LSTMConfig(
        hidden=4,
        mlp=8,
        max_epochs=2,
        patience=1,
        max_train_windows=400,
        max_val_windows=100,
        batch_size=64,
        threads=1,
        seed=0,
    )
