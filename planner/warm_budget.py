"""Warm-memory budget: re-choose ``coldStartCostMbMinutes`` online so warm pools spend what a keep-alive would.

``warmPool.coldStartCostMbMinutes`` trades cold starts for idle warm memory (planner/warm.py). One
constant cost spends different memory on different days: the default, chosen on four night hours of
azure-functions-1m's history to spend what a 10-minute keep-alive spends, spent 4.6 % more than it on
the test day (docs/benchmarks.md). A budget is what operators state ("no more warm memory than the
platform's 10-minute keep-alive"), so with ``warmPool.keepAliveBudgetRatio`` set (1.0 by default) the
cost is re-chosen every ``RECALIBRATE_STEPS`` steps, for all functions of the budget group at once:

- the *reference* is a fixed keep-alive of ``warmPool.referenceKeepAliveSeconds`` (minute ``m`` warm
  when the last call was 1 to ``reference`` steps before it), run on the same invocations;
- the *target* for the next period is the ratio plus what the budget has left over: ``ratio +
  (ratio x reference waste so far - own waste so far) / reference waste of the last period``, clipped
  to ``[ratio / 2, 1.5 ratio]``, so overspending in one period is paid back in the next (the waste
  of the whole run stays near the ratio, not only that of the last window; the run is counted from
  the first choice on, after ``MIN_STEPS`` steps in which the reference learns when each function
  was last called);
- the cost is the largest (bisection in log space, rounded down to two significant digits) whose
  break-even rule, replayed on the probabilities that were forecast for the last ``WINDOW_STEPS``
  steps, wastes at most ``target`` x the reference's waste on those steps. The rule is the
  planner's at the group's step (``planner.warm.break_even_probabilities``).

Everything is causal (``record`` adds one finished step; the cost only uses recorded steps) and pure
(no I/O, no clock). The control loop rebuilds a budget from the last day of history each hour
(``scaleahead/warm_budgets.py``) and ``scaleahead bench serverless`` does the same at the same hour
boundaries, so both run this code.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.warm import break_even_probabilities
from scaleahead.policy import Policy

#: Steps between two choices of the cost (60: hourly at 1-minute steps).
RECALIBRATE_STEPS = 60
#: Recorded steps the cost is chosen on (240: the last four hours at 1-minute steps).
WINDOW_STEPS = 240
#: Fewest recorded steps before the first choice (before it the policy's own cost applies).
MIN_STEPS = 60
_LOG10_RANGE = (0.0, 7.0)  # costs from 1 to 10^7 MB-minutes


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """What the budget decided last, for reasons and logs."""

    cost: float
    initial_cost: float
    ratio: float
    target: float
    spent_ratio: float  # own waste / reference waste over every recorded step (nan before any)
    steps: int
    calibrations: int
    reference_steps: int

    def sentence(self) -> str:
        if self.calibrations == 0:
            return (
                f"cold start worth {self.initial_cost:,.0f} MB-min (the policy's; the budget re-chooses it after "
                f"{MIN_STEPS} steps)"
            )
        spent = "nothing spent yet" if not math.isfinite(self.spent_ratio) else f"{self.spent_ratio:.2f}x spent so far"
        return (
            f"cold start worth {self.cost:,.0f} MB-min, re-chosen to keep warm memory at {self.ratio:g}x a "
            f"{self.reference_steps}-step keep-alive's ({spent} over {self.steps} steps; target {self.target:.2f}x "
            f"for the next {RECALIBRATE_STEPS})"
        )


class WarmCostBudget:
    """Online choice of the cold-start cost for a group of functions (see the module docstring).

    Args:
        memory_mb: memory of one warm instance of each function of the group.
        initial_cost: the policy's ``coldStartCostMbMinutes``, used until the first choice.
        ratio: ``keepAliveBudgetRatio``: warm waste allowed, relative to the reference keep-alive's.
        reference_steps: the reference keep-alive in steps.
        step_s: the functions' step (``demand.stepSeconds``): one instance idles ``memory_mb x
            step_s / 60`` MB-minutes in a step, so the break-even replayed is the planner's at that
            step (``planner.warm.break_even_probability``; until 2026-12-07 it was ``m / (m + cost)``
            whatever the step, another rule than the planner's at steps other than 60 s).
    """

    def __init__(
        self,
        memory_mb: Sequence[float] | npt.NDArray[np.float64],
        initial_cost: float,
        ratio: float = 1.0,
        reference_steps: int = 10,
        window_steps: int = WINDOW_STEPS,
        every_steps: int = RECALIBRATE_STEPS,
        min_steps: int = MIN_STEPS,
        step_s: float = 60.0,
    ) -> None:
        if ratio <= 0 or reference_steps < 1 or initial_cost <= 0 or window_steps < 1 or every_steps < 1:
            raise ValueError("ratio > 0, initial_cost > 0 and reference, window and recalibration steps >= 1 required")
        if not (math.isfinite(step_s) and step_s > 0):
            raise ValueError(f"step_s must be a positive, finite number of seconds, not {step_s}")
        self.memory = np.asarray(memory_mb, dtype=np.float64)
        if self.memory.ndim != 1 or not np.all(np.isfinite(self.memory)) or np.any(self.memory <= 0):
            raise ValueError("memory_mb must be one positive, finite value per function")
        self.initial_cost = float(initial_cost)
        self.cost = float(initial_cost)
        self.ratio = float(ratio)
        self.reference_steps = reference_steps
        self.every = every_steps
        self.min_steps = min_steps
        self.step_s = float(step_s)
        n = self.memory.size
        self._prob: deque[npt.NDArray[np.float64]] = deque(maxlen=window_steps)
        self._idle: deque[npt.NDArray[np.bool_]] = deque(maxlen=window_steps)
        self._ref_waste: deque[float] = deque(maxlen=window_steps)
        self._last = np.full(n, -1, dtype=np.int64)  # step of each function's last call (reference)
        self._t = 0
        self._since = 0
        self._used = 0.0
        self._ref = 0.0
        self._period_ref = 0.0
        self._target = self.ratio
        self.calibrations = 0

    def warm(self, prob: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        """The break-even rule at the current cost (what the planner does for one instance)."""
        p = np.nan_to_num(np.asarray(prob, dtype=np.float64), nan=0.0)
        out: npt.NDArray[np.bool_] = p >= self.threshold(self.cost)
        return out

    def threshold(self, cost: float) -> npt.NDArray[np.float64]:
        """Each function's break-even probability at ``cost``, at the group's step (the planner's rule)."""
        return break_even_probabilities(self.memory, cost, self.step_s)

    def record(
        self,
        prob: npt.NDArray[np.float64],
        counts: npt.NDArray[np.float64] | npt.NDArray[np.int64],
        warm: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """Add one finished step: the probability forecast for it (NaN = none), its calls and what was warm.

        ``warm`` None means the group followed the rule at the current cost (``warm(prob)``).
        """
        p = np.nan_to_num(np.asarray(prob, dtype=np.float64), nan=0.0)
        c = np.nan_to_num(np.asarray(counts, dtype=np.float64), nan=0.0)
        if p.shape != self.memory.shape or c.shape != self.memory.shape:
            raise ValueError(f"one value per function expected ({self.memory.size}), got {p.shape} and {c.shape}")
        w = self.warm(p) if warm is None else np.asarray(warm, dtype=bool)
        idle = c <= 0
        gap = self._t - self._last
        ref_warm = (self._last >= 0) & (gap >= 1) & (gap <= self.reference_steps)
        ref_waste = float(self.memory[ref_warm & idle].sum())
        if self.calibrations:  # the budget is kept from the first choice on (before it the reference warms up)
            self._used += float(self.memory[w & idle].sum())
            self._ref += ref_waste
            self._period_ref += ref_waste
        self._prob.append(p)
        self._idle.append(idle)
        self._ref_waste.append(ref_waste)
        self._last = np.where(~idle, self._t, self._last)
        self._t += 1
        self._since += 1
        if self._since >= self.every and self._t >= self.min_steps:
            self._recalibrate()

    def _recalibrate(self) -> None:
        owed = self.ratio * self._ref - self._used
        target = self.ratio + owed / self._period_ref if self._period_ref > 0 else self.ratio
        self._target = min(1.5 * self.ratio, max(0.5 * self.ratio, target))
        self._since = 0
        self._period_ref = 0.0
        ref = float(sum(self._ref_waste))
        if ref <= 0:  # nothing the reference would have wasted: no scale to budget against, keep the cost
            return
        prob = np.stack(self._prob)  # [steps, functions]
        idle_mem = np.stack(self._idle) * self.memory[None, :]
        allowed = self._target * ref

        def waste(log_cost: float) -> float:
            cost = 10.0**log_cost
            return float(idle_mem[prob >= self.threshold(cost)].sum())

        lo, hi = _LOG10_RANGE
        if waste(lo) > allowed:
            self.cost = 10.0**lo
        else:
            for _ in range(40):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if waste(mid) <= allowed else (lo, mid)
            raw = 10.0**lo
            digits = 10.0 ** (math.floor(math.log10(raw)) - 1)
            self.cost = math.floor(raw / digits) * digits
        self.calibrations += 1

    def status(self) -> BudgetStatus:
        return BudgetStatus(
            cost=self.cost,
            initial_cost=self.initial_cost,
            ratio=self.ratio,
            target=self._target,
            spent_ratio=self._used / self._ref if self._ref > 0 else math.nan,
            steps=self._t,
            calibrations=self.calibrations,
            reference_steps=self.reference_steps,
        )


def with_cold_start_cost(policy: Policy, cost: float) -> Policy:
    """A copy of ``policy`` whose ``warmPool.coldStartCostMbMinutes`` is ``cost`` (the rest unchanged)."""
    spec = policy.spec
    pool = spec.warm_pool.model_copy(update={"cold_start_cost_mb_minutes": float(cost)})
    return policy.model_copy(update={"spec": spec.model_copy(update={"warm_pool": pool})})


def budget_key(policy: Policy, step_s: float) -> tuple[float, float, float, float] | None:
    """Functions with equal keys share a budget: (step, ratio, reference keep-alive, initial cost); None: no budget."""
    pool = policy.spec.warm_pool
    if not pool.enabled or pool.keep_alive_budget_ratio is None or pool.cold_start_cost_mb_minutes is None:
        return None
    return (step_s, pool.keep_alive_budget_ratio, pool.reference_keep_alive_seconds, pool.cold_start_cost_mb_minutes)


def budget_period(now: float, step_s: float) -> int:
    """The budget period ``now`` falls in: the cost is re-chosen when this changes (every ``RECALIBRATE_STEPS``)."""
    return math.floor(now / (RECALIBRATE_STEPS * step_s))


def reference_steps(reference_keep_alive_s: float, step_s: float) -> int:
    """The reference keep-alive in whole steps (at least one)."""
    return max(1, int(round(reference_keep_alive_s / step_s)))
