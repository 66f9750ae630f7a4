"""Names of the available forecasters, so CLI and benchmarks can build any of them by name.

The LSTMs (``lstm``, ``lstm_clock``) are registered lazily: importing this module (or
``forecaster``) does not import torch; only ``make_model`` of one of them does.
"""

from __future__ import annotations

from collections.abc import Callable

from forecaster.base import Forecaster
from forecaster.baselines import Naive, Ridge, SeasonalNaive, WindowMean
from forecaster.calibration import CALIBRATED
from forecaster.per_series import PerSeries


def _lstm() -> Forecaster:
    from forecaster.lstm import LSTMForecaster

    return LSTMForecaster()


#: The clock period of ``lstm_clock`` (s): 5-minute marks, where cron-started jobs cluster.
CLOCK_PERIOD_S = 300.0


def _lstm_clock() -> Forecaster:
    from forecaster.lstm import LSTMConfig, LSTMForecaster

    return LSTMForecaster(LSTMConfig(clock_period_s=CLOCK_PERIOD_S))


def _per_series(make: Callable[[], Forecaster]) -> Callable[[], Forecaster]:
    """A baseline fitted on each series alone (``forecaster.per_series``): its errors and, for
    ridge, its regression are in that series' own units, and series at different steps fit."""
    return lambda: PerSeries(make)


_FACTORIES: dict[str, Callable[[], Forecaster]] = {
    "naive": _per_series(Naive),
    "seasonal_naive": _per_series(SeasonalNaive),
    "window_mean": _per_series(WindowMean),
    "ridge": _per_series(Ridge),
    "lstm": _lstm,
    "lstm_clock": _lstm_clock,
    **{name: _per_series(make) for name, make in CALIBRATED.items()},
}

#: Learned models: trained by `scaleahead train` and loaded from a checkpoint (which holds their
#: configuration), never fitted when a process starts.
LEARNED = ("lstm", "lstm_clock")

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
