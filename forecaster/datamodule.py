"""Training windows for the LSTM: origins sampled from the history, split in time, as tensors.

Why: windowing is the part of training that is easiest to get subtly wrong (peeking, leaking the
validation span into training, zero-filled gaps). It lives here, apart from the network and the
LightningModule. The validation span is the *last* ``val_fraction`` of the span the history
series cover together, after one time cut shared by all (``common_cut``: a per-series cut would
put a shorter, newer series' training windows inside a longer one's validation span); training
windows end (targets included) before it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from forecaster.base import common_cut
from forecaster.features import FeatureSpec, IntArray, build_inputs, targets, with_prior
from scaleahead.errors import DataError
from scaleahead.types import F32_MAX, FloatArray, Series


@dataclass(frozen=True, slots=True)
class Windows:
    """Numpy arrays of one split: inputs, scaled targets (NaN = missing) and weights."""

    seq: np.ndarray  # [n, L, 2]
    static: np.ndarray  # [n, S]
    target: FloatArray  # [n, H] in units of scale
    scale: FloatArray  # [n]
    weight: FloatArray  # [n]
    origin: IntArray  # [n] origin index into its series
    series: IntArray  # [n] index of its series (rows are grouped by series, in order)

    def __len__(self) -> int:
        return int(self.seq.shape[0])

    def dataset(self) -> TensorDataset:
        mask = ~np.isnan(self.target)
        return TensorDataset(
            torch.from_numpy(self.seq),
            torch.from_numpy(self.static),
            torch.from_numpy(np.where(mask, self.target, 0.0).astype(np.float32)),
            torch.from_numpy(mask.astype(np.float32)),
            torch.from_numpy(self.weight.astype(np.float32)),
        )


def _origins(n: int, lo: int, hi: int, k: int, rng: np.random.Generator) -> IntArray:
    if hi <= lo:
        return np.zeros(0, dtype=np.int64)
    if hi - lo <= k:
        return np.arange(lo, hi, dtype=np.int64)
    return np.sort(rng.choice(np.arange(lo, hi, dtype=np.int64), size=k, replace=False))


#: A baseline's point forecasts ``[n, H]`` for origins of a series (``values[:o]`` only).
PriorFn = Callable[[Series, IntArray], FloatArray]


def make_windows(
    series: Sequence[Series],
    spec: FeatureSpec,
    origins_per_series: Sequence[IntArray],
    chunk: int = 4096,
    prior: PriorFn | None = None,
) -> Windows:
    """Inputs and targets for the given origins of each series (chunked to bound memory).

    With ``prior``, its forecast is appended to the static inputs (``features.with_prior``).
    """
    h = spec.horizon_steps
    parts: list[tuple[np.ndarray, ...]] = []
    for k, (s, origins) in enumerate(zip(series, origins_per_series, strict=True)):
        rows: list[tuple[np.ndarray, ...]] = []
        for i in range(0, len(origins), chunk):
            o = origins[i : i + chunk]
            inp = build_inputs(s.values, s.start, spec, o)
            if prior is not None:
                inp = with_prior(inp, prior(s, o))
            y = targets(s.values, o, h) / inp.scale[:, None]
            # A sample beyond float32 (a glitch such as 1e42) is already missing (the series went
            # through ``glitches_as_missing``). A target whose *scaled* value is beyond the network's
            # float32 is missing too: as inf it would make the loss, then every weight, NaN. A window
            # whose scaled inputs overflow float32 is not usable (``inputs_from_windows``).
            y[~(np.abs(y) <= F32_MAX)] = np.nan
            keep = inp.usable & (~np.isnan(y)).any(axis=1)
            rows.append((inp.seq[keep], inp.static[keep], y[keep], inp.scale[keep], o[keep]))
        if not rows:
            continue
        seq, static, y, scale, kept = (np.concatenate([r[j] for r in rows]) for j in range(5))
        if len(scale) == 0:
            continue
        weight = scale / scale.mean()  # windows of a busier time count more, as in wql
        parts.append((seq, static, y, scale, weight, kept.astype(np.int64), np.full(len(kept), k, dtype=np.int64)))
    if not parts:
        return Windows(
            np.zeros((0, spec.recent.length, 2), np.float32),
            np.zeros((0, spec.n_static + (h if prior is not None else 0)), np.float32),
            np.zeros((0, h)),
            np.zeros(0),
            np.zeros(0),
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
        )
    return Windows(*(np.concatenate([p[j] for p in parts]) for j in range(7)))


class WindowDataModule(pl.LightningDataModule):
    """Samples training and validation windows from history series."""

    def __init__(
        self,
        series: Sequence[Series],
        spec: FeatureSpec,
        max_train_windows: int = 40000,
        max_val_windows: int = 6000,
        val_fraction: float = 0.15,
        batch_size: int = 256,
        seed: int = 0,
        prior: PriorFn | None = None,
    ) -> None:
        super().__init__()
        self.prior = prior
        self.series = list(series)
        self.spec = spec
        self.max_train_windows = max_train_windows
        self.max_val_windows = max_val_windows
        self.val_fraction = val_fraction
        self.batch_size = batch_size
        self.seed = seed
        self.train: Windows | None = None
        self.val: Windows | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train is not None:
            return
        rng = np.random.default_rng(self.seed)
        h = self.spec.horizon_steps
        lo = self.spec.recent.length
        total = sum(len(s) for s in self.series)
        train_o, val_o = [], []
        cuts = common_cut(self.series, self.val_fraction)
        for s, val_start in zip(self.series, cuts, strict=True):
            n = len(s)
            share = n / max(total, 1)
            train_o.append(_origins(n, lo, val_start - h + 1, int(self.max_train_windows * share) + 1, rng))
            val_o.append(_origins(n, max(lo, val_start), n - h + 1, int(self.max_val_windows * share) + 1, rng))
        self.train = make_windows(self.series, self.spec, train_o, prior=self.prior)
        self.val = make_windows(self.series, self.spec, val_o, prior=self.prior)
        observed = sum(int(np.isfinite(s.values[c:]).sum()) for s, c in zip(self.series, cuts, strict=True))
        span = sum(max(len(s) - c, 0) for s, c in zip(self.series, cuts, strict=True))
        if len(self.train) >= 16 and len(self.val) < 4 and observed < span / 2:
            # enough to train on, but the validation span is mostly missing: an outage at the end
            raise DataError(
                f"Too little usable data in the validation span to train the LSTM: {len(self.val)} validation "
                f"windows ({len(self.train)} training). The validation span is the last {self.val_fraction:.0%} of "
                f"the history, and it holds {observed} observed value{'' if observed == 1 else 's'}: the data "
                "probably ends in an outage (missing values).",
                "Trim the history to end before the outage, or give data that extends past it.",
            )
        if len(self.train) < 16 or len(self.val) < 4:
            longest = max((len(s) * s.step_s for s in self.series), default=0.0)
            raise DataError(
                f"Too little usable history to train the LSTM: {len(self.train)} training and {len(self.val)} "
                f"validation windows (longest series {longest / 3600:.1f} h).",
                "Give at least a few hours of history with observed values, or plan with a baseline model, "
                "which needs no training (plan --model seasonal_naive; run's default until an LSTM is the champion).",
            )

    def train_dataloader(self) -> DataLoader[tuple[torch.Tensor, ...]]:
        assert self.train is not None
        g = torch.Generator().manual_seed(self.seed)
        return DataLoader(self.train.dataset(), batch_size=self.batch_size, shuffle=True, generator=g)

    def val_dataloader(self) -> DataLoader[tuple[torch.Tensor, ...]]:
        assert self.val is not None
        return DataLoader(self.val.dataset(), batch_size=4096)
