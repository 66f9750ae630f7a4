"""Names of the available forecasters, so CLI and benchmarks can build any of them by name.

The LSTM is registered lazily: importing this module (or ``forecaster``) does not import torch;
only ``make_model("lstm")`` does.
"""

from __future__ import annotations

from collections.abc import Callable

from forecaster.base import Forecaster
from forecaster.baselines import Naive, Ridge, SeasonalNaive, WindowMean


def _lstm() -> Forecaster:
    from forecaster.lstm import LSTMForecaster

    return LSTMForecaster()


_FACTORIES: dict[str, Callable[[], Forecaster]] = {
    "naive": Naive,
    "seasonal_naive": SeasonalNaive,
    "window_mean": WindowMean,
    "ridge": Ridge,
    "lstm": _lstm,
}

#: Models that need no training beyond residual statistics (usable as named fallbacks).
BASELINES = ("naive", "seasonal_naive", "window_mean", "ridge")


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
