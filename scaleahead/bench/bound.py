"""A bound for the replay's targets: what a policy that knew the coming demand *rate* could do.

The service replay counts a violation whenever demand in a step exceeds what the ready replicas
serve, and demand in a 10-second step is noisy: even a perfect forecast of the underlying rate
leaves the step-to-step noise. This module asks how far better forecasts could go at all. The
``rate_oracle`` knows, at every step, the centered moving average of the demand over
``window_s`` (five minutes by default: future data, so it is not a policy) and the distribution of
demand around that average at each level (measured on the test period itself). It provisions
each step at that distribution's ``1 - p`` quantile and pays for replicas as the oracle does
(each added exactly one start-up delay before it is needed). Sweeping ``p`` draws its trade-off
curve. A causal forecaster knows less than this, so where even this curve does not reach a target
box, no forecaster will; where it does, the gap to it is what better forecasts could win.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from scaleahead.bench.peers import oracle_replicas
from scaleahead.bench.replay import ReplaySetup, _run_rule, compute_metrics

#: Probabilities of running short at which the rate oracle's curve is drawn.
DEFAULT_PS: tuple[float, ...] = (0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.002, 0.001)
#: Demand-level bins for the noise distribution (equal counts).
LEVEL_BINS = 20


def _follow(schedule: np.ndarray, text: str) -> Callable[[int, float, int, int], tuple[int, str]]:
    def decide(i: int, now: float, ready: int, allocated: int) -> tuple[int, str]:
        return int(schedule[i]), text

    return decide


def rate_oracle_curve(
    setup: ReplaySetup, ps: Sequence[float] = DEFAULT_PS, window_s: float = 300.0
) -> list[dict[str, Any]]:
    """The rate oracle's metrics (EVALUATION.md section 4) at each probability in ``ps``."""
    d = setup.demand
    ok = np.isfinite(d)
    w = max(1, int(round(window_s / setup.step_s)) | 1)  # odd, so the window is centered
    kernel = np.ones(w)
    total = np.convolve(np.where(ok, d, 0.0), kernel, "same")
    count = np.convolve(ok.astype(np.float64), kernel, "same")
    rate = total / np.maximum(count, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(ok & (rate > 0), d / rate, np.nan)
    edges = np.quantile(rate[ok], np.linspace(0.0, 1.0, LEVEL_BINS + 1)) if ok.any() else np.zeros(LEVEL_BINS + 1)
    level_bin = np.clip(np.searchsorted(edges, rate) - 1, 0, LEVEL_BINS - 1)
    points = []
    for p in ps:
        mult = np.ones(LEVEL_BINS)
        for b in range(LEVEL_BINS):
            r = ratio[(level_bin == b) & np.isfinite(ratio)]
            if r.size:
                mult[b] = float(np.quantile(r, 1.0 - p))
        level = rate * mult[level_bin]
        plan_ahead = oracle_replicas(level, setup.capacity, setup.startup_steps)
        text = f"rate oracle: the p{(1 - p) * 100:g} of demand around its coming {window_s:g} s average"
        run = _run_rule(setup, "rate_oracle", _follow(plan_ahead, text))
        metrics = compute_metrics(d, run.desired, run.allocated, run.ready, setup.capacity, setup.step_s)
        points.append({"p": p, "window_s": window_s, **metrics})
    return points
