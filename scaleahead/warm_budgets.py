"""Warm-memory budgets: the cold-start cost each function group plans with (loop and benchmark alike).

``planner.warm_budget.WarmCostBudget`` re-chooses ``coldStartCostMbMinutes`` so that warm pools
spend ``warmPool.keepAliveBudgetRatio`` x what a fixed keep-alive would (docs/serverless.md,
"Warm-memory budget"). Nothing is kept that a restart would lose: once per budget period
(``RECALIBRATE_STEPS`` steps, an hour at 1-minute steps) and group, ``rebuild`` replays the budget
on the last day of the group's invocations strictly before the period's start (after a
``WARMUP_STEPS`` warm-up of the forecaster), whenever in the period the first cycle runs, so a
process started mid-period plans with the cost one running since before it does; its final cost is
the one planned with until the next period.
Between periods the result is cached, so a cycle costs nothing; a rebuild costs about one
invocation forecast per replayed step (``scaleahead bench speed``, ``warm_budget_rebuild_ms``: about
2 s for 1,000 functions, once an hour). ``scaleahead bench serverless`` calls the same ``rebuild``
at the same period boundaries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from forecaster.invocations import InvocationForecaster
from planner.warm_budget import (
    RECALIBRATE_STEPS,
    BudgetStatus,
    WarmCostBudget,
    budget_key,
    budget_period,
    reference_steps,
    with_cold_start_cost,
)
from scaleahead.observed import aligned_counts
from scaleahead.policy import Policy, WorkloadClass
from scaleahead.types import Series, WorkloadRef

log = logging.getLogger("scaleahead.warm_budgets")

#: Steps the invocation forecaster observes before the budget starts recording (two hours at 1-minute
#: steps, as ``bench serverless --calibrate``'s warm-up); the budget is replayed over the rest of the day.
WARMUP_STEPS = 120
#: History a budget is rebuilt from: one day, the invocation forecaster's window (``scaleahead.loop``).
WINDOW_S = 86400.0


def rebuild(
    counts: np.ndarray,
    memory_mb: Sequence[float],
    step_s: float,
    key: tuple[float, float, float, float],
    calibration: np.ndarray | None = None,
    fit_calibration: bool = True,
) -> BudgetStatus:
    """The budget's cost for the coming period from ``counts`` ``[functions, steps]`` (oldest first) before it.

    The invocation forecaster observes the first ``WARMUP_STEPS`` steps, then runs online over the
    rest (each step's probability made before the step is seen) while the budget records what the
    rule kept warm at the cost it had then, re-choosing it every ``RECALIBRATE_STEPS``. So the cost
    planned with is the one that kept the day's idle warm memory at the ratio. The replay uses the
    recurrence calibration fitted on the whole day (what the live forecaster plans with after it),
    not one fitted on the warm-up alone; with ``fit_calibration=False`` the given ``calibration``
    (None: the hazard alone) instead, e.g. the one the control loop's ``CalibrationBook`` already
    fitted on the same day. Too few steps for a choice: the policy's own cost.
    """
    _, ratio, reference_s, initial = key
    budget = WarmCostBudget(memory_mb, initial, ratio, reference_steps(reference_s, step_s), step_s=step_s)
    steps = counts.shape[1]
    warmup = min(WARMUP_STEPS, steps)
    if fit_calibration:
        calibration = InvocationForecaster(counts.shape[0], step_s=step_s, horizon=1).fit(counts).calibration
    model = InvocationForecaster(
        counts.shape[0], step_s=step_s, horizon=1, calibrate=calibration is not None, calibration=calibration
    )
    model.fit(counts[:, :warmup])
    for t in range(warmup, steps):
        budget.record(model.predict(1)[:, 0], counts[:, t])
        model.observe(counts[:, t])
    return budget.status()


@dataclass(frozen=True, slots=True)
class _Entry:
    period: int
    originals: tuple[Policy, ...]
    effective: tuple[Policy, ...]
    status: BudgetStatus


class WarmBudgetBook:
    """Per budget group, the cost planned with this period (rebuilt once per period, see the module docstring)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[float, float, float, float], _Entry] = {}
        #: The last ``apply``'s failed groups: why each one's rebuild failed, by the group's note head.
        self.errors: dict[str, str] = {}

    def apply(
        self,
        policies: Sequence[Policy],
        history: Mapping[WorkloadRef, Series],
        now: float,
        calibrations: Mapping[tuple[float, tuple[WorkloadRef, ...]], np.ndarray | None] | None = None,
    ) -> tuple[list[Policy], tuple[str, ...]]:
        """The policies to plan with (budgeted functions with their group's cost) and one note per group.

        ``calibrations``: recurrence calibrations already fitted on the day before this period's
        start, by (step, functions); a budget group with exactly those functions replays with it
        instead of fitting its own (the control loop passes ``CalibrationBook.current``).
        """
        groups: dict[tuple[float, float, float, float], list[tuple[int, Policy, Series]]] = {}
        for i, policy in enumerate(policies):
            if policy.spec.workload_class != WorkloadClass.FUNCTION:
                continue
            past = history.get(policy.workload)
            if past is None:
                continue
            past = past.known_by(now)  # the steps ended by now
            key = budget_key(policy, past.step_s)
            if key is not None and len(past) and np.isfinite(past.values).any():
                groups.setdefault(key, []).append((i, policy, past))
        out = list(policies)
        notes: list[str] = []
        self.errors = {}
        cache: dict[tuple[float, float, float, float], _Entry] = {}
        for key, members in groups.items():
            step = key[0]
            period = budget_period(now, step)
            originals = tuple(p for _, p, _ in members)
            hit = self._cache.get(key)
            if (
                hit is not None
                and hit.period == period
                and len(hit.originals) == len(originals)
                # equal, not only the same objects: the daemon re-reads its policies every 30 s
                and all(a is b or a == b for a, b in zip(hit.originals, originals, strict=True))
            ):
                entry = hit
            else:
                # The day before the period's start, not before now: the same whenever the process started.
                start = period * RECALIBRATE_STEPS * step
                memory = [p.spec.warm_pool.memory_mb_per_instance for p in originals]
                group = (step, tuple(p.workload for p in originals))
                try:
                    counts = aligned_counts([past for _, _, past in members], start, step, WINDOW_S)
                    if calibrations is not None and group in calibrations:
                        status = rebuild(counts, memory, step, key, calibrations[group], fit_calibration=False)
                    else:
                        status = rebuild(counts, memory, step, key)
                except Exception as exc:  # noqa: BLE001 - this group keeps its policies' costs, the others go on
                    head = f"warm-memory budget of {len(members)} functions (step {step:g} s)"
                    log.warning("%s: rebuild failed, the policies' own costs this cycle: %s", head, exc)
                    self.errors[head] = str(exc)
                    notes.append(f"{head}: rebuild failed ({exc}); the policies' own costs until it succeeds")
                    continue  # not cached: the next cycle tries again
                effective = tuple(
                    p
                    if status.cost == p.spec.warm_pool.cold_start_cost_mb_minutes
                    else with_cold_start_cost(p, status.cost)
                    for p in originals
                )
                entry = _Entry(period, originals, effective, status)
            cache[key] = entry
            for (i, _, _), policy in zip(members, entry.effective, strict=True):
                out[i] = policy
            notes.append(f"warm-memory budget of {len(members)} functions (step {step:g} s): {entry.status.sentence()}")
        self._cache = cache
        return out, tuple(notes)
