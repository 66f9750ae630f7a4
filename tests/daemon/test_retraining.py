"""``scaleahead.retraining.retrain`` on real history whose window starts with missing data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from conftest import DAY, make_policies

from scaleahead.retraining import retrain
from scaleahead.settings import Settings
from scaleahead.types import Series
from storage import Store


def test_a_window_that_starts_missing_is_split_over_the_part_with_data(nasa: Series, tmp_path: Path) -> None:
    # A workload added 1.5 days ago: its 4-day window is missing for the first 2.5 days.
    values = nasa.values.copy()
    values[: int(2.5 * DAY / nasa.step_s)] = np.nan
    late = Series(nasa.name, nasa.start, nasa.step_s, values)
    (policy,) = make_policies(1)
    settings = Settings()
    settings.forecast.model = "seasonal_naive"
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    result = retrain([policy], {policy.workload: late}, store, settings, now=late.end)
    model = store.model(result.model_version_id)
    assert model.metrics["holdout_wape"] is not None and model.metrics["holdout_wape"] > 0
    assert model.data_start == late.start + 2.5 * DAY, "the registered span starts at the first observation"
