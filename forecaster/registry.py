"""Names of the available forecasters, so CLI and benchmarks can build any of them by name."""

from __future__ import annotations

from collections.abc import Callable

from forecaster.base import Forecaster
from forecaster.baselines import Naive, SeasonalNaive, WindowMean
from forecaster.calibration import CALIBRATED

_FACTORIES: dict[str, Callable[[], Forecaster]] = {
    "naive": Naive,
    "seasonal_naive": SeasonalNaive,
    "window_mean": WindowMean,
    **CALIBRATED,
}


def register(name: str, factory: Callable[[], Forecaster]) -> None:
    _FACTORIES[name] = factory


def available_models() -> list[str]:
    return sorted(_FACTORIES)


def make_model(name: str) -> Forecaster:
    try:
        return _FACTORIES[name]()
    except KeyError:
        from scaleahead.errors import UserError

        raise UserError(f"Unknown model {name!r}.", f"Known models: {', '.join(available_models())}.") from None
