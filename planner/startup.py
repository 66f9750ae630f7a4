"""The start-up delay to plan with, learned from observed readiness times.

The replica rule (``planner.replicas``) plans ``startupSeconds`` ahead: a replica asked for now
serves from ``now + startup``. A configured delay that is too short scales up too late (SLO
violations while the new pods start), one that is too long scales up too early (cost). The
cluster shows the real delay every time a pod it was asked for becomes Ready, so the planner can
plan with what it observed instead of what someone guessed.

The rule (docs/planner.md, "Learned start-up delay"):

1. Drop samples that are not a start-up: NaN or infinite, negative, or above ``maxSeconds`` (a pod
   whose Ready condition changed long after it was created flapped or restarted; its time is not
   a start-up). They are counted and named in the sentence.
2. Keep the ``window`` most recent valid samples (samples come oldest first).
3. With at least ``minSamples`` of them, the learned delay is their ``quantile`` (method
   ``higher``: an observed readiness time, never an interpolation below one), rounded up to a
   whole second, clipped to ``[0, maxSeconds]``.
4. The learned delay replaces the configured one, except that it never goes below the configured
   one unless ``allowShorter`` is set: the configured value may be a deliberate safety margin,
   and only the operator can waive it. Longer is always taken: planning too late is the failure
   this guards against.

Pure: no clock, no I/O. One estimate is plain Python on the samples (about 10 us for 50); the
control loop caches estimates per policy while the samples do not change (``StartupBook``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scaleahead.policy import PolicySpec, StartupLearning


@dataclass(frozen=True, slots=True)
class StartupEstimate:
    """The start-up delay to plan with and why.

    Attributes:
        seconds: the delay to plan with (s): learned, or the configured one.
        configured_seconds: the policy's ``startupSeconds``.
        learned: True when ``seconds`` comes from the samples (it then differs from, or confirms,
            the configured value); False when too few samples exist, learning is off, or the
            learned value was below the configured one and ``allowShorter`` is off.
        observed_seconds: the quantile of the samples (NaN when too few).
        used: valid samples in the window the quantile was taken over.
        dropped: samples dropped as not a start-up (NaN, negative, above ``maxSeconds``).
        sentence: one line for an operator, e.g. "start-up 74 s learned: p90 of the last 20
            readiness times (configured 60 s)".
    """

    seconds: float
    configured_seconds: float
    learned: bool
    observed_seconds: float
    used: int
    dropped: int
    sentence: str


def _q(quantile: float) -> str:
    return f"p{quantile * 100:g}"


def estimate_startup(
    samples: Sequence[float],
    configured_seconds: float,
    learning: StartupLearning | None = None,
) -> StartupEstimate:
    """The start-up delay to plan with, from readiness times (s, oldest first).

    Args:
        samples: observed readiness times: seconds from a replica being asked for (its pod
            created) to that pod becoming Ready, oldest first.
        configured_seconds: the policy's ``startupSeconds``.
        learning: the policy's ``startupLearning`` block (default: its defaults).
    """
    cfg = learning if learning is not None else StartupLearning()
    configured = float(configured_seconds)
    cap = cfg.max_seconds
    valid = [x for x in samples if 0.0 <= x <= cap]  # NaN compares False, inf exceeds cap
    dropped = len(samples) - len(valid)
    recent = valid[-cfg.window :]
    n = len(recent)
    dropped_note = f"; {dropped} sample{'s' if dropped != 1 else ''} dropped (NaN, negative or above {cap:g} s)"
    dropped_note = dropped_note if dropped else ""
    if not cfg.enabled:
        text = f"start-up {configured:.0f} s configured (learning off)"
        return StartupEstimate(configured, configured, False, math.nan, n, dropped, text)
    if n < cfg.min_samples:
        text = (
            f"start-up {configured:.0f} s configured: {n} readiness time{'s' if n != 1 else ''} observed, "
            f"{cfg.min_samples} needed to learn it{dropped_note}"
        )
        return StartupEstimate(configured, configured, False, math.nan, n, dropped, text)
    ordered = sorted(recent)
    observed = ordered[min(n - 1, math.ceil(cfg.quantile * (n - 1) - 1e-12))]
    value = min(cap, max(0.0, float(math.ceil(observed - 1e-9))))
    basis = f"{_q(cfg.quantile)} of the last {n} readiness times"
    if value < configured and not cfg.allow_shorter:
        text = (
            f"start-up {configured:.0f} s configured: {basis} is {value:.0f} s, shorter, "
            f"and allowShorter is off{dropped_note}"
        )
        return StartupEstimate(configured, configured, False, observed, n, dropped, text)
    text = f"start-up {value:.0f} s learned: {basis} (configured {configured:.0f} s){dropped_note}"
    return StartupEstimate(value, configured, True, observed, n, dropped, text)


def estimate_for(spec: PolicySpec, samples: Sequence[float]) -> StartupEstimate:
    """``estimate_startup`` with the policy's configured delay and learning block."""
    return estimate_startup(samples, spec.startup_seconds, spec.startup_learning)
