"""The HTML accuracy report's edges: a NaN score listed first, nothing scored at all, and the
live-error gauge before any forecast has matured."""

from __future__ import annotations

import math

from scaleahead.bench import report as rp


def _summary(models: dict) -> dict:  # type: ignore[type-arg]
    return {"trace": "t", "resolution_s": 60.0, "models": models}


def test_a_nan_score_listed_first_still_leaves_a_best_row() -> None:
    page = rp.render(
        [
            _summary(
                {
                    "zeros": {"mae": 0.0, "wql": math.nan, "coverage_q90": 1.0},  # all actuals zero: no wql
                    "naive": {"mae": 2.0, "wql": 0.2, "coverage_q90": 0.9},
                    "ridge": {"mae": 1.0, "wql": 0.1, "coverage_q90": 0.9},
                }
            )
        ],
        [],
    )
    assert "<tr class='best'><td>t</td><td>ridge</td>" in page
    assert "<td>nan</td>" not in page


def test_a_report_with_nothing_scored_says_so() -> None:
    page = rp.render([_summary({"lstm": {"error": "not registered"}})], [])
    assert "Nothing was scored" in page


def test_the_overall_live_error_is_not_zero_before_any_forecast_matured() -> None:
    from scaleahead.observability import Metrics

    text = Metrics().render().decode()
    line = next(x for x in text.splitlines() if x.startswith("scaleahead_live_forecast_error_overall "))
    assert line.split()[-1] == "NaN"  # was 0.0: a dashboard showed 0 % error after every restart


def test_stored_forecasts_of_a_second_model_are_named_not_dropped_silently() -> None:
    """Found by a review (2026-12-07): a rollout's challenger's stored forecasts were left out of
    the report without a word; the report still scores one model's origins, and names the rest."""
    import numpy as np

    from scaleahead.types import Forecast, Series

    actual = Series("web", 0.0, 10.0, np.full(400, 50.0))
    q = {0.1: np.full(6, 45.0), 0.5: np.full(6, 50.0), 0.9: np.full(6, 55.0)}
    stored = [Forecast(None, 10.0 * i, 10.0, q, "ridge") for i in range(0, 200, 10)]  # type: ignore[arg-type]
    stored += [Forecast(None, 10.0 * i, 10.0, q, "seasonal_naive") for i in range(200, 300, 10)]  # type: ignore[arg-type]
    scored = rp.from_stored("Deployment/shop/web", stored, actual)
    assert list(scored.forecasts) == ["ridge"]
    assert "stored forecasts of ridge (20); not scored here" in scored.source
    assert "seasonal_naive (10)" in scored.source
