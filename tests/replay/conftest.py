"""Small slices of real traces for the replay tests (the embedded Alibaba 2018 10 s aggregate)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scaleahead.traces import load_series
from scaleahead.types import Series

DAY_STEPS = 8640


@pytest.fixture(scope="session")
def alibaba_two_days() -> Series:
    """Two days of the real Alibaba 2018 CPU trace at 10 s (history 36 h, test 12 h = 4,320 steps)."""
    full = load_series("alibaba-cpu-10s-embedded")
    return Series("alibaba-2d", full.start, full.step_s, full.values[: 2 * DAY_STEPS].copy(), full.unit)


def write_series_csv(series: Series, path: Path) -> Path:
    pd.DataFrame({"timestamp": series.times(), "value": series.values}).to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def alibaba_csv(alibaba_two_days: Series, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_series_csv(alibaba_two_days, tmp_path_factory.mktemp("trace") / "alibaba-2d.csv")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"},
    )


def finite_fraction(values: np.ndarray) -> float:
    return float(np.isfinite(values).mean())
