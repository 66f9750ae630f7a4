"""Demand forecasting: the forecaster protocol, baselines and the LSTM.

Only this package imports torch and Lightning.
"""

from forecaster.base import QUANTILES, Forecaster
from forecaster.registry import available_models, make_model

__all__ = ["QUANTILES", "Forecaster", "available_models", "make_model"]
