"""The noise-floor diagnostic: an oracle that knows the smooth rate, never a selectable model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from forecaster.registry import available_models
from scaleahead.bench import noise_floor as nf
from scaleahead.types import Series
from tests.forecaster.conftest import DAY, START


def poisson_counts(days: float = 2.0, step_s: float = 60.0, seed: int = 0) -> tuple[Series, np.ndarray]:
    """Requests per step: Poisson around a smooth daily rate (the rate is returned too)."""
    rng = np.random.default_rng(seed)
    n = int(days * DAY / step_s)
    t = np.arange(n) * step_s
    rate = 30.0 * (1 + 0.6 * np.sin(2 * np.pi * t / DAY))
    v = rng.poisson(rate).astype(np.float64)
    v[int(1.7 * n / 2) : int(1.7 * n / 2) + 20] = np.nan  # an outage in the test period
    return Series("counts", START, step_s, v, "req"), rate


def test_the_leave_one_out_mean_never_reads_the_step_itself_and_skips_gaps() -> None:
    v = np.array([1.0, 100.0, 3.0, np.nan, 5.0])
    out = nf.loo_centred_mean(v, 1)
    assert out[1] == pytest.approx(2.0)  # (1 + 3) / 2, not including 100
    assert out[2] == pytest.approx(100.0)  # (100 + NaN) -> 100 only
    assert out[3] == pytest.approx(4.0)  # the gap itself gets its neighbours
    assert out[0] == pytest.approx(100.0)


def test_poisson_quantiles_and_expected_losses_match_sampling() -> None:
    lam = np.array([[0.5, 4.0, 30.0]])
    qs = nf.poisson_quantiles(lam, (0.1, 0.5, 0.9))
    rng = np.random.default_rng(1)
    draws = rng.poisson(lam[0], size=(200_000, 3))
    for q, v in qs.items():
        assert np.all((draws <= v[0]).mean(0) >= q)  # the smallest k with P(Y <= k) >= q
        assert np.all((draws <= v[0] - 1).mean(0) < q)
    pin, abs_med = nf.poisson_expected_losses(lam, (0.5,))
    sampled = np.abs(draws - qs[0.5][0]).mean(0)
    np.testing.assert_allclose(abs_med[0], sampled, rtol=0.02)
    np.testing.assert_allclose(pin[0.5][0], sampled / 2, rtol=0.02)


def test_on_pure_poisson_demand_the_oracle_floor_matches_the_theory_and_beats_every_baseline() -> None:
    series, rate = poisson_counts()
    result = nf.run(series, "counts", in_sample=["ridge"])
    assert result.counts
    best = result.bench.split["best_baseline"]
    floor = result.oracles[result.floor]
    assert floor["wql"] < result.bench.models[best]["wql"]
    # the data IS Poisson around a smooth rate: the measured oracle is close to the expected loss
    expected = result.oracles["poisson_expected"]
    assert floor["wql"] == pytest.approx(expected["wql"], rel=0.1)
    assert 0.85 <= floor["coverage_q90"] <= 0.95
    ratios = result.ratios()
    assert ratios["wql"] == pytest.approx(floor["wql"] / result.bench.models[best]["wql"])
    # the in-sample fit is reported beside the floor, never taken for it
    assert "in_sample_ridge" in result.oracles
    assert not result.floor.startswith("in_sample")
    test_rate = float(rate[int(result.bench.origins[0]) :].mean())
    assert result.variogram["nugget"] == pytest.approx(test_rate, rel=0.15)  # Poisson variance = mean rate


def test_the_diagnostic_is_a_bench_command_writing_json_and_never_a_model(tmp_path: Path) -> None:
    assert not [m for m in available_models() if "oracle" in m or "floor" in m]
    series, _ = poisson_counts(days=1.5)
    csv = tmp_path / "counts.csv"
    rows = ["timestamp,value"] + [
        f"{int(t)},{'' if np.isnan(v) else int(v)}" for t, v in zip(series.times(), series.values, strict=True)
    ]
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "nf.json"
    proc = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "bench", "noise-floor", "--trace", str(csv), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["diagnostic"] == "noise-floor"
    assert set(data["models"]) == {"naive", "seasonal_naive", "window_mean", "ridge"}
    assert data["floor"] in data["oracles"]
    assert "oracle" not in " ".join(data["models"])
    bad = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "bench", "noise-floor", "--trace", str(tmp_path / "none.csv")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
