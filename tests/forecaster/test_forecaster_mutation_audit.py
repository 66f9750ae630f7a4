"""Tests that pin behaviour a mutation audit of 2026-12-06 found unpinned: each failed on a mutant
of the code (named in the comment above each test: the audit's id and the behaviour) that every
earlier test let pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from forecaster.lstm import CheckpointError, LSTMForecaster, load_or_fallback

V2 = Path(__file__).resolve().parent / "fixtures" / "lstm_v2_60s.pt"


# F04: a checkpoint whose weights hold NaN is refused at load (CheckpointError -> the named fallback).


def test_nan_weights_are_refused_at_load(tmp_path):
    raw = torch.load(V2, weights_only=True)
    raw["state_dict"]["head.0.weight"][0, 0] = float("nan")
    bad = tmp_path / "nan.pt"
    torch.save(raw, bad)
    with pytest.raises(CheckpointError, match="NaN or infinite weights"):
        LSTMForecaster.load(bad, step_s=60.0)
    model, why = load_or_fallback(bad, step_s=60.0, fallback="seasonal_naive")
    assert model.name == "seasonal_naive" and why and "NaN" in why


# F05: a checkpoint whose calibration (spread factors) lies outside [0.25, 4] is refused at load.


@pytest.mark.parametrize("bad", [[40.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0], [float("nan"), 1.0, 1.0, 1.0]])
def test_spread_factors_outside_their_range_are_refused_at_load(tmp_path, bad):
    raw = torch.load(V2, weights_only=True)
    raw["calibration"] = bad
    path = tmp_path / "cal.pt"
    torch.save(raw, path)
    with pytest.raises(CheckpointError, match="calibration"):
        LSTMForecaster.load(path, step_s=60.0)
