"""``LSTMForecaster``: the learned model behind the ``Forecaster`` protocol, with versioned checkpoints.

Why: the network (``net.py``), the training loop (``lightning_module.py``) and the windowing
(``datamodule.py``) know nothing of series, resolutions, files or fallbacks; this module does.
It fits one global model on any number of history series of one resolution, forecasts many
origins or many workloads in one batch, calibrates its quantile spread on the validation span,
and saves/loads a versioned checkpoint. ``load_or_fallback`` turns a checkpoint that cannot be
used (corrupt, unknown version, other resolution) into a clear message and the named fallback.

Checkpoint format (``torch.save`` of plain dicts, loaded with ``weights_only=True``):

- version 1 (first release): ``hyper_parameters`` (the LightningModule's), ``step_s``,
  ``horizon_s``, ``state_dict`` with Lightning's ``net.`` key prefix; no calibration.
- version 2: ``spec`` (all window lengths), ``config``, ``quantiles``, ``state_dict`` of
  the bare network, ``calibration`` (spread factor per quantile) and ``meta`` (data span, metrics).
- version 3: version 2 plus ``ridge`` (the ridge baseline fitted on the training span,
  ``Ridge.state()``, or ``None``), ``blend_weight`` and ``blend_calibration``. The ridge serves the hybrid input
  (``config.prior == "ridge"``: the network corrects its forecast) and the quantile blend
  (``config.blend``: ``w * lstm + (1 - w) * ridge``, ``w = blend_weight`` chosen on the
  validation span, then its spread recalibrated there). A version-2 checkpoint is upgraded with
  ``ridge: None``, ``blend_weight: 1``, ``blend_calibration: 1``
  and ``config.prior = "none"``, ``config.blend = False`` (it had neither).
- version 4 (current): version 3 plus ``spec.clock_period_s`` (the clock input of ``lstm_clock``).
  Only a model with a clock is written as version 4; one without is written as version 3 (its
  spec without that key), which releases before the clock input still load.

Older versions are upgraded on load (``_upgrade``); newer ones are refused with a message.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from forecaster.base import (
    QUANTILES,
    Forecaster,
    common_cut,
    fill_short_gaps_causal,
    glitches_as_missing,
    without_glitches,
)
from forecaster.baselines import Ridge, _last_valid
from forecaster.features import (
    FeatureSpec,
    Inputs,
    IntArray,
    Segment,
    build_inputs,
    gather,
    inputs_from_windows,
    offsets,
    with_prior,
)
from forecaster.net import QuantileLSTM
from scaleahead.errors import DataError, UserError
from scaleahead.types import FloatArray, Forecast, Series, WorkloadRef, batch_forecasts

FORMAT = "scaleahead-lstm"
#: Version 4 is version 3 plus ``spec.clock_period_s`` (the clock input, ``lstm_clock``). A checkpoint
#: without a clock is still written as version 3, so that earlier releases keep loading it (they
#: reject a spec key they do not know); one with a clock is version 4, which they refuse with
#: "upgrade scaleahead" instead of reading it wrong.
FORMAT_VERSION = 4


class CheckpointError(DataError):
    """A checkpoint that cannot be used: missing, corrupt, of an unknown version or resolution."""


@dataclass
class LSTMConfig:
    """Hyperparameters; times in seconds. Defaults are the ones the benchmark was run with."""

    hidden: int = 32
    mlp: int = 128
    dropout: float = 0.1
    lr: float = 3e-3
    weight_decay: float = 1e-5
    batch_size: int = 256
    max_epochs: int = 30
    patience: int = 4  # epochs without a better validation loss before stopping
    max_train_windows: int = 80000
    max_val_windows: int = 6000
    val_fraction: float = 0.15  # the last 15 % of the span the series cover together (one cut: common_cut)
    threads: int = 1  # measured: on the shared 2-core machine 1 thread trained 6x faster than 2
    seed: int = 0
    max_minutes: float = 9.0  # hard cap on training time (the target is 10 min on 2 cores)
    calibrate: bool = True
    highway: bool = False  # linear path from recent values + context to the forecast (net.py); overfitted in tests
    horizon_s: float = 900.0
    recent_s: float = 450.0
    long_s: float = 6 * 3600.0
    #: "ridge": the network corrects the ridge baseline's forecast (a hybrid; net.py), "none": it
    #: forecasts from its inputs alone. The ridge is fitted on the training span only.
    prior: str = "none"
    #: Blend the calibrated LSTM quantiles with the ridge baseline's, ``w * lstm + (1 - w) * ridge``,
    #: ``w`` in 0, 0.1, ..., 1 chosen on the validation span (1 = the LSTM alone), then the blend's
    #: spread recalibrated there. Off by default: it lowered wql (alibaba-cpu-10s 1.010 -> 0.974 x
    #: ridge) but also coverage_q90 (0.878 -> 0.839, below the 0.87-0.93 target); docs/benchmarks.md.
    blend: bool = False
    #: The origin's phase within this period (s) as an input, for demand that jumps at clock marks
    #: (cron, batch schedulers); 0 = off (features.py; docs/forecaster.md, "Clock phase").
    clock_period_s: float = 0.0

    def feature_spec(self, step_s: float) -> FeatureSpec:
        """The input windows of this configuration at resolution ``step_s``."""
        return FeatureSpec(
            step_s=step_s,
            horizon_s=self.horizon_s,
            recent_s=self.recent_s,
            long_s=self.long_s,
            clock_period_s=self.clock_period_s,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LSTMConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


#: Most phases a clock input may have (a 1-hour period at 10 s).
MAX_CLOCK_PHASES = 360


def check_clock_period(period_s: float, step_s: float) -> None:
    """Refuse a clock period that is not 0 or a whole number (2 to ``MAX_CLOCK_PHASES``) of steps."""
    if period_s == 0:
        return
    phases = period_s / step_s if math.isfinite(period_s) and period_s > 0 else 0.0
    if not (2 <= round(phases) <= MAX_CLOCK_PHASES and abs(phases - round(phases)) < 1e-6):
        raise DataError(
            f"Clock period {period_s:g} s is not a whole number of the series' {step_s:g} s steps between 2 and "
            f"{MAX_CLOCK_PHASES}.",
            f"Give 0 (off) or a multiple of {step_s:g} s such as 300 (5-minute marks).",
        )


def _quiet_lightning() -> None:
    for name in ("pytorch_lightning", "lightning", "lightning.pytorch", "lightning_fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")


@contextmanager
def _interrupt_is_keyboard_interrupt(trainer: Any, watch: Any = None) -> Iterator[None]:
    """Ctrl-C during ``trainer.fit`` raises ``KeyboardInterrupt``, as anywhere else.

    Lightning catches the ``KeyboardInterrupt``, ignores SIGINT from then on and calls
    ``sys.exit(1)``: ``scaleahead train`` ended with exit code 1 and no word, where Ctrl-C is exit
    130 and "interrupted" (docs/cli.md), and nothing is registered. The SIGINT handler is restored.

    Where SIGINT has Python's own handler (not a daemon's stop handler, not ignored), ``watch`` (a
    ``StopOnInterrupt`` among the trainer's callbacks) is told of a Ctrl-C as well: a
    ``KeyboardInterrupt`` that library code swallowed is raised again at the next batch, and a fit
    that returns all the same raises it here.
    """
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGINT) if main else None

    def interrupted(signum: int, frame: Any) -> None:
        watch.requested = True
        raise KeyboardInterrupt

    try:
        if watch is not None and handler is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupted)
        yield
    except SystemExit as exc:
        if not getattr(trainer, "interrupted", False):
            raise
        raise KeyboardInterrupt from exc
    finally:
        # signal.signal runs a pending handler first: a Ctrl-C pressed again right now raises from
        # the call, before the handler is put back (a review of 2026-12-07). Put back all the same.
        while main and handler is not None:
            try:
                signal.signal(signal.SIGINT, handler)
                break
            except KeyboardInterrupt:
                if watch is not None:
                    watch.requested = True
    if watch is not None and watch.requested:
        raise KeyboardInterrupt


@contextmanager
def flushed_denormals() -> Iterator[None]:
    """Flush denormal floats to zero inside the block only.

    Denormals make CPU LSTM backward passes 6-7x slower, but the flag is CPU state of the calling
    thread: left on, it breaks other code on that thread (hypothesis refuses to run), so it is
    restored. Threads that already exist (torch's intra-op pool with ``threads`` > 1) keep theirs;
    processes DDP spawns set it themselves (``QuantileLSTMModule.on_fit_start``).
    """
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def _set_threads(threads: int) -> None:
    if threads > 0 and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@dataclass
class FitReport:
    epochs: int = 0
    train_s: float = 0.0
    train_windows: int = 0
    val_windows: int = 0
    val_loss: float = float("nan")
    calibration: dict[str, float] = field(default_factory=dict)
    blend_weight: float = 1.0  # the LSTM's weight in the blend with the ridge (1 = no blend)
    blend_calibration: dict[str, float] = field(default_factory=dict)


class LSTMForecaster(Forecaster):
    """A global quantile LSTM across series of one resolution (see docs/forecaster.md)."""

    name = "lstm"

    def __init__(self, config: LSTMConfig | None = None, checkpoint_dir: str | Path | None = None) -> None:
        self.config = config or LSTMConfig()
        # the registry's name of this configuration (stored forecasts, metrics, logs)
        self.name = "lstm_clock" if self.config.clock_period_s > 0 else "lstm"
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.quantiles = QUANTILES
        self.spec: FeatureSpec | None = None
        self.net: QuantileLSTM | None = None
        self.calibration = np.ones(len(self.quantiles))
        self.ridge: Ridge | None = None
        #: Weight of the LSTM in the quantile blend with ``ridge`` (1 = no blend).
        self.blend_weight = 1.0
        #: Spread factor per quantile applied to the blend (fitted on the validation span).
        self.blend_calibration = np.ones(len(self.quantiles))
        self.meta: dict[str, Any] = {}
        self.report = FitReport()
        #: How many origins of the last call were served by the named per-origin fallback.
        self.last_fallback_origins = 0
        #: Extra ``pl.Trainer`` arguments, e.g. a DDP strategy (``forecaster.distributed``).
        self.trainer_kwargs: dict[str, Any] = {}
        #: Called after each validation epoch of ``fit`` with ``(epoch, max_epochs, val_loss, seconds
        #: since the fit started)`` (`scaleahead train` prints it); None: nothing is reported.
        self.on_epoch: Callable[[int, int, float | None, float], None] | None = None
        #: The trainer's world size in the last fit (processes x nodes).
        self.world_size = 1

    # -- training -------------------------------------------------------------------------------
    def fit(self, history: Sequence[Series]) -> LSTMForecaster:
        import pytorch_lightning as pl
        from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint

        from forecaster.datamodule import WindowDataModule
        from forecaster.lightning_module import EpochCount, EpochProgress, QuantileLSTMModule, StopOnInterrupt

        cleaned = (without_glitches(s) for s in history if len(s))
        usable = [s for s in cleaned if np.isfinite(s.values).any()]
        if not usable:
            raise DataError("Every history series is empty or all missing (NaN).", "Check the demand data.")
        steps = sorted({s.step_s for s in usable})
        if len(steps) > 1:
            raise DataError(
                f"History series have different resolutions {steps} s; one LSTM serves one resolution.",
                "Train one model per resolution.",
            )
        cfg = self.config
        check_clock_period(cfg.clock_period_s, steps[0])
        _quiet_lightning()
        _set_threads(cfg.threads)
        pl.seed_everything(cfg.seed, workers=True, verbose=False)
        spec = cfg.feature_spec(steps[0])
        self.spec = spec
        self.ridge = self._fit_ridge(usable, spec)
        self.blend_weight = 1.0
        self.blend_calibration = np.ones(len(self.quantiles))
        dm = WindowDataModule(
            usable,
            spec,
            cfg.max_train_windows,
            cfg.max_val_windows,
            cfg.val_fraction,
            cfg.batch_size,
            cfg.seed,
            prior=self._prior_for if self._uses_prior else None,
        )
        dm.setup()
        assert dm.train is not None
        assert dm.val is not None
        module = QuantileLSTMModule(
            spec.n_seq_features,
            self._n_static(spec),
            spec.horizon_steps,
            self.quantiles,
            spec.recent.length,
            cfg.hidden,
            cfg.mlp,
            cfg.dropout,
            cfg.lr,
            cfg.weight_decay,
            cfg.highway,
            self._uses_prior,
        )
        with tempfile.TemporaryDirectory() as tmp:
            ckpt_dir = self.checkpoint_dir or Path(tmp)
            best = ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor="val_loss", save_top_k=1)
            watch = StopOnInterrupt()
            trainer_args: dict[str, Any] = {
                "max_epochs": cfg.max_epochs,
                "max_time": timedelta(minutes=cfg.max_minutes),
                "callbacks": [
                    EarlyStopping("val_loss", patience=cfg.patience),
                    best,
                    EpochCount(),
                    watch,
                    *([EpochProgress(self.on_epoch)] if self.on_epoch is not None else []),
                ],
                "accelerator": "cpu",
                "devices": 1,
                "logger": False,
                "enable_progress_bar": False,
                "enable_model_summary": False,
                "num_sanity_val_steps": 0,
                "deterministic": True,
            }
            trainer = pl.Trainer(**{**trainer_args, **self.trainer_kwargs})
            self.world_size = int(trainer.world_size)
            t0 = time.perf_counter()
            with flushed_denormals(), _interrupt_is_keyboard_interrupt(trainer, watch):
                trainer.fit(module, datamodule=dm)
            train_s = time.perf_counter() - t0
            # Global rank 0 saves the best checkpoint in its own (node-local) folder and every rank
            # is told its path: on another node of a multi-node DDP run that file does not exist.
            # Such a rank keeps its last weights; only node 0's model is kept (train-distributed).
            best_score = None if best.best_model_score is None else float(best.best_model_score)
            epochs = int(trainer.current_epoch)
            if int(trainer.global_rank) == 0 or Path(best.best_model_path).is_file():
                saved = torch.load(best.best_model_path, map_location="cpu", weights_only=False)
                module.load_state_dict(saved["state_dict"])
                if best_score is None:  # spawned DDP workers: the main trainer never saw the scores
                    best_score, epochs = _fit_stats(saved, trainer)
        _check_trained(module.net, best_score)
        self.spec = spec
        self.net = module.net.eval()
        self.calibration = np.ones(len(self.quantiles))
        if cfg.calibrate:
            self.calibration = self._calibrate(dm.val.seq, dm.val.static, dm.val.target)
        if cfg.blend and self.ridge is not None:
            self.blend_weight, self.blend_calibration = self._choose_blend_weight(dm.val, usable)
        self.report = FitReport(
            epochs=epochs,
            train_s=round(train_s, 2),
            train_windows=len(dm.train),
            val_windows=len(dm.val),
            val_loss=(
                best_score if best_score is not None else float(trainer.callback_metrics.get("val_loss", float("nan")))
            ),
            calibration={f"{q:g}": round(float(c), 4) for q, c in zip(self.quantiles, self.calibration, strict=True)},
            blend_weight=self.blend_weight,
            blend_calibration={
                f"{q:g}": round(float(c), 4) for q, c in zip(self.quantiles, self.blend_calibration, strict=True)
            },
        )
        self.meta = {
            "series": [s.name for s in usable],
            "data_start": min(s.start for s in usable),
            "data_end": max(s.end for s in usable),
            "fit": asdict(self.report),
        }
        return self

    # -- the hybrid's prior (the ridge baseline) ------------------------------------------------
    @property
    def _uses_prior(self) -> bool:
        return self.config.prior == "ridge"

    def _fit_ridge(self, history: Sequence[Series], spec: FeatureSpec) -> Ridge | None:
        """The ridge baseline fitted on the training span (before the validation span) of each series."""
        if self.config.prior not in ("ridge", "none"):
            raise UserError(f"Unknown LSTM prior {self.config.prior!r}.", "Use 'ridge' or 'none'.")
        if not self._uses_prior and not self.config.blend:
            return None
        train = [
            Series(s.name, s.start, s.step_s, s.values[:cut], s.unit)
            for s, cut in zip(history, common_cut(history, self.config.val_fraction), strict=True)
        ]
        ridge = Ridge()
        ridge.fit(train, horizon_steps=spec.horizon_steps)
        return ridge

    def _prior_for(self, series: Series, origins: IntArray) -> FloatArray:
        """The prior's point forecasts ``[n, H]`` for origins of one series (``values[:o]`` only)."""
        assert self.ridge is not None
        assert self.spec is not None
        filled = fill_short_gaps_causal(series.values)
        m = self.ridge.window_steps(series.step_s)
        window = gather(filled, origins, Segment(-m, 1, m))  # [n, m]
        last = _last_valid(filled, origins)
        times = series.start + origins.astype(np.float64) * series.step_s
        x = self.ridge.features_from_window(window, last, times, series.step_s)
        return self.ridge.point_from_features(x, last, self.spec.horizon_steps)

    def _with_prior(self, inp: Inputs, series: Series, origins: IntArray) -> Inputs:
        return with_prior(inp, self._prior_for(series, origins)) if self._uses_prior else inp

    def _ridge_quantiles(self, point: FloatArray) -> FloatArray:
        """The ridge baseline's quantiles ``[n, H, Q]`` around its point forecasts ``[n, H]``."""
        assert self.ridge is not None
        resid = self.ridge.resid or {}
        h = point.shape[1]
        cols = []
        for q in self.quantiles:
            r = np.asarray(resid.get(q, np.zeros(h)), dtype=np.float64)
            r = np.pad(r, (0, max(0, h - len(r))), mode="edge")[:h]
            cols.append(np.maximum(point + r[None, :], 0.0))
        return np.sort(np.stack(cols, axis=-1), axis=-1)

    def _blend(self, out: FloatArray, point: FloatArray) -> FloatArray:
        """``w * out + (1 - w) * ridge quantiles``, its spread recalibrated (``blend_calibration``).

        The calibration is the last step, as for the LSTM alone: the blend of two calibrated
        forecasts is not calibrated itself. Non-negative and never crossing.
        """
        if self.ridge is None or self.blend_weight >= 1.0:
            return out
        w = self.blend_weight
        mix = w * out + (1 - w) * self._ridge_quantiles(point)[:, : out.shape[1], :]
        mid = self.quantiles.index(0.5)
        med = mix[..., mid : mid + 1]
        mix = med + self.blend_calibration[None, None, :] * (mix - med)
        return np.maximum.accumulate(np.maximum(mix, 0.0), axis=-1)

    def _choose_blend_weight(self, val: Any, series: Sequence[Series]) -> tuple[float, FloatArray]:
        """The LSTM's weight in 0, 0.1, ..., 1 with the lowest validation pinball loss (scaled like wql),
        and the blend's spread factors on the same span (``spread_factors``)."""
        assert self.ridge is not None
        lstm = self._finish(self._raw_predict(val.seq, val.static), val.scale, val.target.shape[1])  # [n, H, Q]
        point = np.concatenate([self._prior_for(s, val.origin[val.series == k]) for k, s in enumerate(series)], axis=0)
        ridge = self._ridge_quantiles(point)
        y = val.target * val.scale[:, None]  # [n, H], NaN = missing
        ok = ~np.isnan(y)
        yv = np.where(ok, y, 0.0)[..., None]
        qs = np.asarray(self.quantiles)[None, None, :]
        best, best_loss = 1.0, np.inf
        for w in np.round(np.linspace(0.0, 1.0, 11), 1):
            e = yv - (w * lstm + (1 - w) * ridge)
            loss = float((np.maximum(qs * e, (qs - 1) * e).sum(-1) * ok).sum())
            if loss < best_loss - 1e-12 or (w == 1.0 and loss <= best_loss):
                best, best_loss = float(w), loss
        if best >= 1.0:
            return best, np.ones(len(self.quantiles))
        return best, spread_factors(best * lstm + (1 - best) * ridge, y, self.quantiles)

    def _prior_many(self, items: Sequence[tuple[WorkloadRef, Series]], idx: IntArray, times: FloatArray) -> FloatArray:
        """``_prior_for`` at one origin index per series, batched: exactly the same numbers."""
        assert self.ridge is not None
        assert self.spec is not None
        gap = 3  # fill_short_gaps_causal's max_gap: a window this much longer fills exactly as the whole series
        m = self.ridge.window_steps(self.spec.step_s)
        rel = np.arange(-(m + gap), 0)
        w = np.empty((len(items), m + gap))
        for k, (_, s) in enumerate(items):
            pos = idx[k] + rel
            ok = (pos >= 0) & (pos < min(int(idx[k]), len(s)))
            w[k] = np.where(ok, s.values[np.clip(pos, 0, max(len(s) - 1, 0))], np.nan) if len(s) else np.nan
        w = glitches_as_missing(w)  # a sample beyond float32 is missing, as in training
        for _ in range(gap):  # carry the last value into the first `gap` steps of a NaN run, as in the series
            w[:, 1:] = np.where(np.isnan(w[:, 1:]) & ~np.isnan(w[:, :-1]), w[:, :-1], w[:, 1:])
        window = w[:, gap:]
        last = np.full(len(items), np.nan)
        seen = ~np.isnan(window)
        has = seen.any(axis=1)
        last[has] = window[has, m - 1 - np.argmax(seen[has, ::-1], axis=1)]
        for k in np.flatnonzero(~has).tolist():  # the whole window missing: the last value before it
            _, s = items[k]
            past = glitches_as_missing(s.values[: min(int(idx[k]), len(s))])
            before = np.flatnonzero(np.isfinite(past))
            last[k] = past[before[-1]] if len(before) else np.nan
        x = self.ridge.features_from_window(window, last, times, self.spec.step_s)
        return self.ridge.point_from_features(x, last, self.spec.horizon_steps)

    def _n_static(self, spec: FeatureSpec) -> int:
        return spec.n_static + (spec.horizon_steps if self._uses_prior else 0)

    def _raw_predict(self, seq: np.ndarray, static: np.ndarray) -> FloatArray:
        """Network output in units of scale, ``[n, horizon, n_quantiles]`` (no calibration)."""
        assert self.net is not None
        out = []
        with torch.inference_mode(), flushed_denormals():
            for i in range(0, len(seq), 8192):
                out.append(self.net(torch.from_numpy(seq[i : i + 8192]), torch.from_numpy(static[i : i + 8192])))
        if not out:
            assert self.spec is not None
            return np.zeros((0, self.spec.horizon_steps, len(self.quantiles)))
        return torch.cat(out).numpy().astype(np.float64)

    def _calibrate(self, seq: np.ndarray, static: np.ndarray, target: FloatArray) -> FloatArray:
        """Spread factor per quantile so validation coverage of each quantile matches its level.

        ``q' = median + s_q * (q - median)``; ``s_q`` is the empirical quantile of
        ``(y - median) / (q - median)`` over observed validation targets, clipped to [0.25, 4].
        """
        return spread_factors(self._raw_predict(seq, static), target, self.quantiles)

    # -- inference ------------------------------------------------------------------------------
    def _check(self, series: Series, horizon_steps: int) -> FeatureSpec:
        if self.net is None or self.spec is None:
            raise UserError("The LSTM has not been trained or loaded.", "Run `scaleahead train` or load a checkpoint.")
        if abs(series.step_s - self.spec.step_s) > 1e-6:
            raise CheckpointError(
                f"The LSTM was trained at {self.spec.step_s:g} s resolution but series {series.name!r} is at "
                f"{series.step_s:g} s.",
                "Train a model at this resolution (scaleahead train) or use the fallback model.",
            )
        if horizon_steps > self.spec.horizon_steps:
            raise DataError(
                f"The LSTM forecasts {self.spec.horizon_steps} steps ({self.spec.horizon_s:g} s); "
                f"{horizon_steps} were asked for.",
                "Ask for a shorter horizon or retrain with a longer horizon_s.",
            )
        return self.spec

    def _finish(self, raw: FloatArray, scale: FloatArray, horizon_steps: int) -> FloatArray:
        """Calibrated, scaled, non-negative, non-crossing quantiles ``[n, horizon, Q]``."""
        mid = self.quantiles.index(0.5)
        med = raw[..., mid : mid + 1]
        cal = med + self.calibration[None, None, :] * (raw - med)
        cal = np.maximum.accumulate(np.maximum(cal, 0.0), axis=-1)  # non-negative, never crossing
        return cal[:, :horizon_steps, :] * scale[:, None, None]

    def predict_origins(self, series: Series, origins: np.ndarray, horizon_steps: int) -> dict[float, FloatArray]:
        spec = self._check(series, horizon_steps)
        origins = np.asarray(origins, dtype=np.int64)
        series = without_glitches(series)  # a sample beyond float32 is missing, as in training
        values = series.values
        if not np.isfinite(values[: int(origins.max()) if len(origins) else 0]).any():
            raise DataError(f"Series {series.name!r} has no observed value before the origins.", "Check the data.")
        result = np.zeros((len(origins), horizon_steps, len(self.quantiles)))
        self.last_fallback_origins = 0
        for i in range(0, len(origins), 4096):
            o = origins[i : i + 4096]
            inp = build_inputs(values, series.start, spec, o)
            point = self._prior_for(series, o) if self.ridge is not None else None
            if self._uses_prior and point is not None:
                inp = with_prior(inp, point)
            out = self._finish(self._raw_predict(inp.seq, inp.static), inp.scale, horizon_steps)
            if point is not None:
                out = self._blend(out, point)
            if inp.zero is not None:
                out[inp.zero] = 0.0  # every value seen is 0: so is the forecast (features.Inputs.zero)
            if not inp.usable.all():
                out[~inp.usable] = self._naive_rows(values, o[~inp.usable], horizon_steps, series.name)
                self.last_fallback_origins += int((~inp.usable).sum())
            result[i : i + 4096] = out
        return {q: result[..., j] for j, q in enumerate(self.quantiles)}

    def _naive_rows(self, values: FloatArray, origins: np.ndarray, horizon_steps: int, name: str) -> FloatArray:
        """Named per-origin fallback ``naive``: every input window empty (a gap longer than a week)."""
        rows = np.zeros((len(origins), horizon_steps, len(self.quantiles)))
        for k, o in enumerate(origins):
            seen = np.flatnonzero(np.isfinite(values[:o]))
            if len(seen) == 0:
                raise DataError(f"Series {name!r} has no observed value before index {o}.", "Check the data.")
            rows[k] = max(float(values[seen[-1]]), 0.0)
        return rows

    def forecast_many(
        self, items: Sequence[tuple[WorkloadRef, Series]], origin: float, horizon_steps: int
    ) -> list[Forecast]:
        """One batched forward pass for all workloads (the per-cycle path of the control loop).

        A series with no observed value in any input window (a gap longer than the windows, or a
        short history that ends in an outage) gets the same named per-origin fallback as in
        ``predict_origins`` (the last observed value before the origin, ``last_fallback_origins``
        counts them); the others stay in the one batch. Only a series with no observed value at
        all before the origin is an error, as in ``forecast``.
        """
        if not items:
            return []
        spec = self._check(items[0][1], horizon_steps)
        rel = offsets(spec)  # [P] steps relative to the origin
        rows = np.empty((len(items), len(rel)))  # [n_series, P]
        times = np.empty(len(items))
        idx = []
        for k, (_, s) in enumerate(items):
            self._check(s, horizon_steps)
            i = s.index_of(origin)
            pos = i + rel
            ok = (pos >= 0) & (pos < min(i, len(s)))
            rows[k] = np.where(ok, s.values[np.clip(pos, 0, max(len(s) - 1, 0))], np.nan)
            times[k] = s.start + i * s.step_s
            idx.append(i)
        # An infinite sample, or one beyond float32 (a glitch such as 1e42), is a missing one, as in
        # training: read, it made every quantile NaN or ~1e40.
        rows = glitches_as_missing(rows)
        inp = inputs_from_windows(rows, times, spec)
        point = self._prior_many(items, np.asarray(idx, dtype=np.int64), times) if self.ridge is not None else None
        if self._uses_prior and point is not None:
            inp = with_prior(inp, point)
        use = np.flatnonzero(inp.usable)
        out = np.zeros((len(items), horizon_steps, len(self.quantiles)))
        if len(use):
            raw = self._raw_predict(inp.seq[use], inp.static[use])
            out[use] = self._finish(raw, inp.scale[use], horizon_steps)
            if point is not None:
                out[use] = self._blend(out[use], point[use])
        if inp.zero is not None:
            out[inp.zero] = 0.0  # every value seen is 0: so is the forecast (features.Inputs.zero)
        self.last_fallback_origins = 0
        for bad in np.flatnonzero(~inp.usable).tolist():
            ref, s = items[bad]
            # only values before the origin: ``values[:i]`` (i may lie past the series' end)
            past = glitches_as_missing(s.values[: min(idx[bad], len(s))])
            out[bad] = self._naive_rows(past, np.array([len(past)]), horizon_steps, str(ref))[0]
            self.last_fallback_origins += 1
        # one read-only batch [workloads, K, horizon]; each forecast reads its row (QuantileRows)
        return batch_forecasts(
            [ref for ref, _ in items],
            [s.start + i * s.step_s for (_, s), i in zip(items, idx, strict=True)],
            [s.step_s for _, s in items],
            out.transpose(0, 2, 1),
            self.quantiles,
            self.name,
        )

    @classmethod
    def untrained(cls, step_s: float, config: LSTMConfig | None = None) -> LSTMForecaster:
        """A randomly initialised network of the configured shape (for speed measurements only)."""
        model = cls(config)
        cfg = model.config
        torch.manual_seed(cfg.seed)
        model.spec = cfg.feature_spec(step_s)
        # unfitted: the last value, at the same cost as a fitted one
        model.ridge = Ridge() if cfg.prior == "ridge" or cfg.blend else None
        model.blend_weight = 0.5 if cfg.blend else 1.0
        model.net = model._network(model.spec).eval()
        return model

    def _network(self, spec: FeatureSpec) -> QuantileLSTM:
        cfg = self.config
        return QuantileLSTM(
            spec.n_seq_features,
            self._n_static(spec),
            spec.horizon_steps,
            len(self.quantiles),
            spec.recent.length,
            cfg.hidden,
            cfg.mlp,
            cfg.dropout,
            cfg.highway,
            self._uses_prior,
        )

    # -- checkpoints ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        if self.net is None or self.spec is None:
            raise UserError("Nothing to save: the LSTM has not been trained.", "Call fit first.")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        spec = self.spec.to_dict()
        clock = bool(spec.get("clock_period_s"))
        if not clock:
            spec.pop("clock_period_s", None)
        ckpt = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION if clock else 3,
            # plain Python numbers: a numpy scalar (a step computed with numpy) would be pickled
            # as one, which weights_only loading refuses
            "spec": _plain(spec),
            "config": _plain(asdict(self.config)),
            "quantiles": [float(q) for q in self.quantiles],
            "state_dict": self.net.state_dict(),
            "calibration": [float(c) for c in self.calibration],
            "ridge": self.ridge.state() if self.ridge is not None else None,
            "blend_weight": float(self.blend_weight),
            "blend_calibration": [float(c) for c in self.blend_calibration],
            "meta": _plain(self.meta),
        }
        # torch does not check the zip's CRCs: a changed byte in a tensor would load and forecast
        # differently. The digest of everything else makes load() notice (older readers ignore it).
        ckpt[DIGEST_KEY] = checkpoint_digest(ckpt)
        torch.save(ckpt, path)
        return path

    @classmethod
    def load(cls, path: str | Path, step_s: float | None = None) -> LSTMForecaster:
        """Load a checkpoint of this or an earlier format version.

        Raises:
            CheckpointError: missing, unreadable or corrupt file, a newer format, or (when
                ``step_s`` is given) a model trained at another resolution.
        """
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"LSTM checkpoint {path} does not exist.", "Train one with `scaleahead train`.")
        try:
            raw = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure means the file is unusable
            raise CheckpointError(
                f"LSTM checkpoint {path} is corrupt or not a checkpoint ({type(exc).__name__}).", RETRAIN
            ) from exc
        ckpt = _upgrade(raw, path)
        missing = [k for k in CHECKPOINT_KEYS if k not in ckpt]
        if missing:
            raise CheckpointError(
                f"LSTM checkpoint {path} lacks {', '.join(repr(k) for k in missing)}: it is incomplete or was not "
                "written by `scaleahead train`.",
                RETRAIN,
            )
        spec = _field(path, ckpt, "spec", lambda v: FeatureSpec(**v))
        if not isinstance(spec.step_s, int | float) or not math.isfinite(spec.step_s) or spec.step_s <= 0:
            raise CheckpointError(
                f"LSTM checkpoint {path} has no valid resolution (spec.step_s is {spec.step_s!r}).", RETRAIN
            )
        if step_s is not None and abs(spec.step_s - step_s) > 1e-6:
            raise CheckpointError(
                f"LSTM checkpoint {path} was trained at {spec.step_s:g} s resolution; the series are at {step_s:g} s.",
                "Train a model at this resolution (scaleahead train).",
            )
        config = _field(path, ckpt, "config", LSTMConfig.from_dict)
        quantiles = _field(path, ckpt, "quantiles", _quantile_levels)
        per_quantile = (len(quantiles),)
        if not isinstance(config.threads, int) or isinstance(config.threads, bool):
            raise CheckpointError(
                f"LSTM checkpoint {path} has no valid thread count (config.threads is {config.threads!r}).", RETRAIN
            )
        try:
            declared = config.feature_spec(spec.step_s)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"LSTM checkpoint {path} has a malformed 'config' ({exc}).", RETRAIN) from exc
        # Formats 1 and 2 (upgraded on load) did not keep every window setting in their config:
        # their spec is the only record, so only checkpoints of format 3 on are checked against it.
        original = raw.get("format_version") if isinstance(raw, dict) else None
        if isinstance(original, int) and original >= 3 and declared != spec:
            changed = [k for k in asdict(spec) if getattr(spec, k) != getattr(declared, k)]
            raise CheckpointError(
                f"LSTM checkpoint {path}: its input windows (spec) differ from its config's in {', '.join(changed)}: "
                "it was edited or damaged.",
                RETRAIN,
            )
        model = cls(config)
        # A training setting, not the reader's: never more threads than this machine has.
        _set_threads(min(config.threads, os.cpu_count() or 1))
        model.quantiles = quantiles
        model.ridge = _field(path, ckpt, "ridge", lambda v: _ridge(v, spec) if v is not None else None)
        if model.ridge is None and (config.prior == "ridge" or config.blend):
            raise CheckpointError(
                f"LSTM checkpoint {path} has no 'ridge', but its config forecasts with one "
                f"(prior {config.prior!r}, blend {config.blend}): it is incomplete or damaged.",
                RETRAIN,
            )
        model.blend_weight = _field(path, ckpt, "blend_weight", _weight)
        model.blend_calibration = _field(path, ckpt, "blend_calibration", lambda v: _factors(v, per_quantile))
        try:
            net = model._network(spec)
            net.load_state_dict(ckpt["state_dict"])
        except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(
                f"LSTM checkpoint {path} does not match the network it declares: {str(exc).splitlines()[0]}",
                RETRAIN,
            ) from exc
        bad = [k for k, t in net.state_dict().items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
        if bad:
            raise CheckpointError(
                f"LSTM checkpoint {path} has NaN or infinite weights in {', '.join(bad[:3])}: it is damaged.", RETRAIN
            )
        model.spec = spec
        model.net = net.eval()
        model.calibration = _field(path, ckpt, "calibration", lambda v: _factors(v, per_quantile))
        model.meta = _field(path, ckpt, "meta", dict) if "meta" in ckpt else {}
        # Last, so that a field that is malformed is named by its own check above; this catches the rest
        # (a changed weight, a plausible number).
        if isinstance(raw, dict) and DIGEST_KEY in raw:
            stored = raw[DIGEST_KEY]
            try:
                actual = checkpoint_digest(raw)
            except (TypeError, ValueError, AttributeError, RuntimeError) as exc:
                actual = f"unreadable ({type(exc).__name__})"
            if stored != actual:
                raise CheckpointError(
                    f"LSTM checkpoint {path} does not match the digest it was saved with: it was changed or "
                    "damaged since.",
                    RETRAIN,
                )
        return model


def _check_trained(net: torch.nn.Module, best_score: float | None) -> None:
    """Refuse (``DataError``) a network whose training diverged: a non-finite best validation loss or
    weight. Saved, it would forecast NaN and its checkpoint would not load."""
    bad = [k for k, t in net.state_dict().items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad or (best_score is not None and not math.isfinite(best_score)):
        raise DataError(
            f"Training the LSTM diverged (best validation loss {best_score!r}"
            f"{', NaN or infinite weights in ' + ', '.join(bad[:3]) if bad else ''}); no model was kept.",
            "Check the demand data for absurd values (a glitch such as 1e42) or lower the learning rate.",
        )


def _fit_stats(saved: dict[str, Any], trainer: Any) -> tuple[float | None, int]:
    """The best validation loss and the number of epochs trained, for a fit whose workers were
    spawned (DDP): the main process's trainer keeps neither (its ``current_epoch`` stays 0 and its
    ``ModelCheckpoint`` has no score). The score is the one the best checkpoint ``saved`` records;
    the epochs are the count rank 0 reported (``EpochCount``), else the best epoch's."""
    score = None
    for key, state in saved.get("callbacks", {}).items():
        if str(key).startswith("ModelCheckpoint") and state.get("best_model_score") is not None:
            score = float(state["best_model_score"])
    from forecaster.lightning_module import EPOCHS_RUN

    ran = trainer.callback_metrics.get(EPOCHS_RUN)
    epochs = int(ran) if ran is not None else int(saved.get("epoch", -1)) + 1
    return score, epochs


RETRAIN = "Retrain with `scaleahead train`."
#: What a checkpoint of the current format holds (``meta`` is optional).
CHECKPOINT_KEYS = (
    "spec",
    "config",
    "quantiles",
    "state_dict",
    "calibration",
    "ridge",
    "blend_weight",
    "blend_calibration",
)
_T = TypeVar("_T")


def _field(path: Path, ckpt: dict[str, Any], key: str, read: Callable[[Any], _T]) -> _T:
    """``read(ckpt[key])``, with a value of the wrong shape as a ``CheckpointError`` naming the key."""
    try:
        return read(ckpt[key])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CheckpointError(f"LSTM checkpoint {path} has a malformed {key!r} ({text}).", RETRAIN) from exc


def _quantile_levels(value: Any) -> tuple[float, ...]:
    levels = tuple(float(q) for q in value)
    if 0.5 not in levels or any(not 0 < q < 1 for q in levels):
        raise ValueError(f"quantile levels {list(levels)} must lie in (0, 1) and include the median 0.5")
    if any(b <= a for a, b in zip(levels, levels[1:], strict=False)):
        raise ValueError(f"quantile levels {list(levels)} must be distinct and increasing")
    return levels


def _weight(value: Any) -> float:
    w = float(value)
    if not 0.0 <= w <= 1.0:  # also NaN
        raise ValueError(f"the blend weight {w} must lie in [0, 1]")
    return w


def _ridge(state: Any, spec: FeatureSpec) -> Ridge:
    """The embedded ridge baseline (``Ridge.state()``), its arrays checked against the features it
    computes and the checkpoint's horizon, and finite: a damaged one would otherwise load and
    fail, or forecast NaN, only when planning."""
    if not isinstance(state, dict):
        raise ValueError(f"a mapping is expected, not {type(state).__name__}")
    probe = Ridge()
    m = probe.window_steps(spec.step_s)
    features = probe.features_from_window(np.zeros((1, m)), np.zeros(1), np.zeros(1), spec.step_s).shape[1]
    h = spec.horizon_steps
    if state.get("coef") is not None:
        _finite_array(state.get("mu"), (features,), "ridge mu")
        if not np.all(_finite_array(state.get("sd"), (features,), "ridge sd") > 0):
            raise ValueError("ridge sd must be > 0 for every feature")
        _finite_array(state.get("coef"), (features + 1, h), "ridge coef")
    resid = state.get("resid")
    if resid is not None:
        if not isinstance(resid, dict) or not resid:
            raise ValueError("ridge resid must map quantile levels to residuals per horizon step")
        for q, r in resid.items():
            if not 0.0 < float(q) < 1.0:
                raise ValueError(f"ridge resid level {q!r} is not in (0, 1)")
            _finite_array(r, (h,), f"ridge resid {q}")
    return Ridge.from_state(state)


def _finite_array(value: Any, shape: tuple[int, ...], what: str) -> FloatArray:
    out = np.asarray(value, dtype=np.float64)
    if out.shape != shape:
        raise ValueError(f"{what} has shape {out.shape}, expected {shape}")
    if not np.isfinite(out).all():
        raise ValueError(f"{what} holds NaN or infinite values")
    return out


def _factors(value: Any, shape: tuple[int, ...]) -> FloatArray:
    """Spread factors, one per quantile: ``spread_factors`` makes them in [0.25, 4] (1: none)."""
    out = _floats(value, shape)
    if not np.all((out >= 0.25 - 1e-9) & (out <= 4.0 + 1e-9)):  # also NaN and inf
        raise ValueError(f"spread factors {out.tolist()} must lie in [0.25, 4]")
    return out


def _floats(value: Any, shape: tuple[int, ...]) -> FloatArray:
    out = np.asarray(value, dtype=np.float64)
    if out.shape != shape:
        raise ValueError(f"expected {shape[0]} numbers, one per quantile, got shape {out.shape}")
    return out


def spread_factors(pred: FloatArray, target: FloatArray, quantiles: Sequence[float]) -> FloatArray:
    """Spread factor per quantile so that the coverage of each quantile on ``target`` matches its level.

    ``q' = median + s_q * (q - median)``; ``s_q`` is the empirical quantile of
    ``(y - median) / (q - median)`` over observed targets, clipped to [0.25, 4]. ``pred`` is
    ``[n, H, Q]``, ``target`` ``[n, H]`` (NaN = missing), in the same units.
    """
    mid = list(quantiles).index(0.5)
    med = pred[..., mid]
    out = np.ones(len(quantiles))
    for j, q in enumerate(quantiles):
        if j == mid:
            continue
        d = pred[..., j] - med
        ok = ~np.isnan(target) & (np.abs(d) > 1e-6)
        if ok.sum() < 50:
            continue
        r = (target[ok] - med[ok]) / d[ok]
        out[j] = np.clip(np.quantile(r, q if q > 0.5 else 1 - q), 0.25, 4.0)
    return out


def _plain(obj: Any) -> Any:
    """JSON-like plain data (what ``weights_only=True`` loading accepts)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


#: Window lengths of format version 1, which did not store them (they were fixed then).
V1_WINDOWS: dict[str, float | int] = {
    "recent_s": 450.0,
    "min_recent_steps": 24,
    "long_s": 21600.0,
    "long_bucket_s": 300.0,
    "seasonal_before_s": 900.0,
    "seasonal_after_s": 900.0,
    "seasonal_bucket_s": 150.0,
    "scale_s": 3600.0,
}


def _upgrade(raw: Any, path: Path) -> dict[str, Any]:
    """Bring a checkpoint of any known version to the current layout."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a scaleahead LSTM checkpoint.", "Give a file written by `train`.")
    try:
        return _upgraded(raw, path)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(
            f"LSTM checkpoint {path} (format version {raw.get('format_version')!r}) lacks or has a malformed "
            f"field ({type(exc).__name__}: {exc}).",
            RETRAIN,
        ) from exc


def _upgraded(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    version = raw.get("format_version")
    if version == 1:
        hp = raw["hyper_parameters"]
        cfg = {k: hp[k] for k in ("hidden", "mlp", "dropout", "lr", "weight_decay", "highway") if k in hp}
        state = {k.removeprefix("net."): v for k, v in raw["state_dict"].items() if k.startswith("net.")}
        spec = {**V1_WINDOWS, "step_s": float(raw["step_s"]), "horizon_s": float(raw["horizon_s"])}
        raw = {
            "format": FORMAT,
            "format_version": 2,
            "spec": spec,
            "config": cfg,
            "quantiles": list(hp["quantiles"]),
            "state_dict": state,
            "calibration": [1.0] * len(hp["quantiles"]),
            "meta": {"upgraded_from": 1},
        }
        version = 2
    if version == 2:  # no hybrid prior existed yet
        raw = {
            **raw,
            "format_version": 3,
            # The spec is the record of the windows: the config says the same, or the model, saved
            # again (as format 3, which is checked), would not load (a horizon other than 900 s).
            "config": {**raw["config"], **_window_settings(raw["spec"]), "prior": "none", "blend": False},
            "ridge": None,
            "blend_weight": 1.0,
            "blend_calibration": [1.0] * len(raw["quantiles"]),
            "meta": {"upgraded_from": 2, **raw.get("meta", {})},
        }
        version = 3
    if version == 3:  # no clock input existed yet: the spec's clock_period_s defaults to 0
        raw = {**raw, "format_version": 4}
        version = 4
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format version {version!r}; this scaleahead reads versions 1 to {FORMAT_VERSION}.",
            "Upgrade scaleahead or retrain the model.",
        )
    return dict(raw)


def _window_settings(spec: Any) -> dict[str, Any]:
    """The config's window settings (``LSTMConfig.feature_spec``) that a spec records (none from a
    spec that is not a mapping: the load names that field as malformed)."""
    if not isinstance(spec, dict):
        return {}
    return {k: spec[k] for k in ("horizon_s", "recent_s", "long_s") if k in spec}


#: The checkpoint key of ``checkpoint_digest`` (written since the digest was added; optional on load).
DIGEST_KEY = "digest"


def checkpoint_digest(ckpt: dict[str, Any]) -> str:
    """SHA-256 (hex) of a checkpoint's content in a canonical form: every key but ``DIGEST_KEY``,
    sorted, with tensors as dtype, shape and bytes, numbers by their ``repr``."""
    h = hashlib.sha256()

    def feed(obj: Any) -> None:
        if isinstance(obj, dict):
            h.update(b"{")
            for k in sorted(obj, key=str):
                feed(str(k))
                feed(obj[k])
            h.update(b"}")
        elif isinstance(obj, list | tuple):
            h.update(b"[")
            for v in obj:
                feed(v)
            h.update(b"]")
        elif isinstance(obj, torch.Tensor):
            t = obj.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}:".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(obj, np.ndarray):
            a = np.ascontiguousarray(obj)
            h.update(f"A{a.dtype.str}{a.shape}:".encode())
            h.update(a.tobytes())
        elif obj is None or isinstance(obj, bool | int | float | str):
            h.update(f"{type(obj).__name__}:{obj!r};".encode())
        else:
            raise TypeError(f"cannot digest a {type(obj).__name__}")

    feed({k: v for k, v in ckpt.items() if k != DIGEST_KEY})
    return h.hexdigest()


def load_or_fallback(
    path: str | Path | None, step_s: float, fallback: str = "seasonal_naive"
) -> tuple[Forecaster, str | None]:
    """The LSTM from ``path``, or the named fallback model (unfitted) and the reason it took over."""
    from forecaster.registry import make_model

    if path is None:
        return make_model(fallback), f"no LSTM checkpoint configured; using fallback {fallback!r}"
    try:
        return LSTMForecaster.load(path, step_s=step_s), None
    except CheckpointError as exc:
        return make_model(fallback), f"{exc.message} Fallback: {fallback!r}."
