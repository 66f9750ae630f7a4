"""A rollout run as a closed loop inside one replay: ``scaleahead bench replay --rollout canary|ab|shadow``.

Why it exists: ``bench rollout`` scores two pre-computed continuous runs, so it cannot show what a
rollout does to a running system (its docstring says so). Here ONE simulation steps every workload
(one trace each) together, and the rollout's live state decides, at every step, which forecaster
drives each workload's planner:

1. A rollout is started in a ``RolloutBook`` on a real database (a temporary SQLite file unless
   ``db_url`` is given), so its state goes through storage as in the daemon.
2. At each step the rollout is read back from storage; ``RolloutBook.arm`` gives each workload's
   arm (stable hash below the challenger's share); the arm's forecast for that workload feeds one
   ``planner.plan`` call over all workloads, applied to one ``SimulatedService`` through
   ``actuator.base.apply_plan``. A workload whose arm changes switches forecaster from that step
   on, with the replicas the other forecaster left it (the switching transient is simulated).
3. Every ``window_s`` the outcomes measured so far in the window (violations, cost per unit of
   demand, forecast error), per arm, go to ``RolloutBook.evaluate``: a canary advances, promotes or
   rolls back (``decide_canary``) and the next steps run at the new share; A/B and shadow record
   differences with confidence intervals. Each evaluation is a timeline entry (step, share,
   decision, why).
4. Shadow: the challenger plans on a twin ``SimulatedService`` that nothing else sees (planning
   without acting); the champion acts everywhere.

Forecasts of both arms are computed in batches for every origin beforehand: a forecast at origin
``t`` uses only demand before ``t`` whichever arm is later chosen, so this is the same as
forecasting live, only faster. Decisions at a window's end use only demand up to that step; the
forecast error counts only forecasts whose target lies before the decision.

The traces must share one resolution; each is split 75/25 as in EVALUATION.md, and their test
periods are re-based onto one virtual clock (the first trace's test start) so that one planner
call covers all workloads. The run is cut to the shortest test period (or ``max_steps``).
Two reference runs, every workload on the champion and every workload on the challenger, use the
same loop, so the rollout's outcome can be read against both.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from actuator.base import apply_plan
from actuator.rollouts import Arm, CanaryParams, Mode, Outcome, RolloutBook
from actuator.simulated import SimulatedService
from forecaster.base import horizon_steps_for
from scaleahead.bench.replay import (
    ReplaySetup,
    _last_observed,
    compute_metrics,
    fit_model,
    prepare,
    replay_policy_object,
)
from scaleahead.clock import VirtualClock
from scaleahead.errors import UserError
from scaleahead.observed import RollingTrends, windowed_means
from scaleahead.policy import Policy, to_dns_label
from scaleahead.types import ClusterState, Forecast, ScaleTo, Series, WorkloadRef, WorkloadState
from storage import Store

MODES: tuple[str, ...] = ("canary", "ab", "shadow")
GROUP = "bench-replay"
DAY_S = 86400.0


@dataclass
class _Workload:
    """One trace as one workload of the simulated cluster."""

    key: str  # the trace name: the rollout's hash key
    ref: WorkloadRef
    setup: ReplaySetup
    policy: Policy
    forecasts: dict[str, dict[float, np.ndarray]]  # arm -> quantile -> [n_steps, horizon]
    last_obs: np.ndarray
    seen: np.ndarray  # demand averaged over the policy's observedWindowSeconds
    trends: RollingTrends  # lines fitted over the policy's rampFloor.windowSeconds


@dataclass
class _Run:
    """Per workload and step: what the planner wanted, what was allocated and ready, which arm drove it."""

    desired: dict[str, np.ndarray]
    allocated: dict[str, np.ndarray]
    ready: dict[str, np.ndarray]
    arm: dict[str, np.ndarray]  # 1 = challenger
    timeline: list[dict[str, Any]] = field(default_factory=list)


def _slug(name: str, i: int) -> str:
    return f"w{i}-{to_dns_label(name, 40, 'trace')}"  # a Kubernetes name, whatever the trace's


def prepare_workloads(
    traces: Sequence[tuple[str, Series]],
    champion: str,
    challenger: str,
    startup_s: float = 60.0,
    max_steps: int | None = None,
    horizon_s: float = 900.0,
    capacity: Mapping[str, float] | None = None,
) -> tuple[list[_Workload], int, float]:
    """Split, re-base onto one clock, fit both forecasters per workload, forecast every origin.

    ``capacity``: demand one ready replica serves, per trace name (default EVALUATION.md's p99 of
    the test period / 40). Returns the workloads, the number of steps and the common start time.
    """
    if len(traces) < 2:
        raise UserError(
            f"A rollout needs at least two workloads; got {len(traces)} trace(s).",
            "Give --trace several times (one workload per trace).",
        )
    names = [n for n, _ in traces]
    if len(set(names)) != len(names):
        raise UserError(f"A trace is given twice in {names}.", "Give each --trace once.")
    steps = {s.step_s for _, s in traces}
    if len(steps) > 1:
        raise UserError(
            f"The traces have different resolutions ({', '.join(f'{n}: {s.step_s:g} s' for n, s in traces)}); "
            "one simulation steps them together.",
            "Use traces of one resolution (e.g. several nab-* traces, all 5 min).",
        )
    if max_steps is not None and max_steps < 2:
        raise UserError(
            f"--steps {max_steps} is too few to run a rollout.", "Use --steps 200 or more, or leave it out."
        )
    cap = dict(capacity or {})
    setups = [prepare(s, cap.get(n), startup_s, name=n) for n, s in traces]
    t0 = setups[0].t0
    rebased: list[ReplaySetup] = []
    for (name, s), st in zip(traces, setups, strict=True):
        shifted = Series(s.name, s.start + (t0 - st.t0), s.step_s, s.values, s.unit)
        rebased.append(prepare(shifted, cap.get(name), startup_s, name=name))
    n = min(st.demand.size for st in rebased)
    if max_steps is not None:
        n = min(n, max_steps)
    workloads: list[_Workload] = []
    for i, ((name, _), st) in enumerate(zip(traces, rebased, strict=True)):
        policy = replay_policy_object(st, _slug(name, i))
        horizon = horizon_steps_for(st.step_s, horizon_s)
        origins = np.arange(st.i0, st.i0 + n, dtype=np.int64)
        fcs: dict[str, dict[float, np.ndarray]] = {}
        for arm, model_name in (("champion", champion), ("challenger", challenger)):
            model, _ = fit_model(model_name, st)
            fcs[arm] = model.predict_origins(st.series, origins, horizon)
        workloads.append(
            _Workload(
                name,
                policy.workload,
                st,
                policy,
                fcs,
                _last_observed(st.series.values),
                windowed_means(st.series.values, st.step_s, policy.spec.observed_window_seconds),
                RollingTrends(st.series, policy.spec.ramp_floor.window_seconds),
            )
        )
    return workloads, n, t0


def _state(w: _Workload, ws: WorkloadState, gi: int) -> WorkloadState:
    """The simulated state plus the last observed demand strictly before step ``gi``."""
    j = int(w.last_obs[gi])
    if j < 0:
        return ws
    s = w.setup.series
    return WorkloadState(
        w.ref,
        ws.replicas,
        ws.ready_replicas,
        float(w.seen[j]),
        s.start + (j + 1) * s.step_s,
        ws.warm_instances,
        ws.recent_desired,
        ws.startup_samples,
        w.trends.at(j),
    )


def _outcome(w: _Workload, run: _Run, arm: str, a: int, b: int) -> Outcome:
    """``w``'s measured outcome over test steps ``[a, b)`` (decided at the start of step ``b``)."""
    st = w.setup
    m = compute_metrics(
        st.demand[a:b],
        run.desired[w.key][a:b],
        run.allocated[w.key][a:b],
        run.ready[w.key][a:b],
        st.capacity,
        st.step_s,
    )
    util = m["utilization"]
    return Outcome(w.key, m["violation_fraction"], 1.0 / util if util > 0 else math.inf, _forecast_error(w, arm, a, b))


def _forecast_error(w: _Workload, arm: str, a: int, b: int) -> float:
    """MAE of ``arm``'s median at the planner's lead (start-up + 1 step) / seasonal-naive's, on the
    origins of ``[a, b)`` whose target lies before ``b`` (known at decision time)."""
    st = w.setup
    lead = min(st.startup_steps, w.forecasts[arm][0.5].shape[1] - 1)
    day = int(round(DAY_S / st.step_s))
    origins = np.arange(a, max(a, b - lead))
    if origins.size == 0:
        return float("nan")
    targets = origins + lead
    actual = st.demand[targets]
    median = w.forecasts[arm][0.5][origins, lead]
    gi = st.i0 + targets - day
    seasonal = np.where(gi >= 0, st.series.values[np.clip(gi, 0, None)], np.nan)
    ok = np.isfinite(actual) & np.isfinite(median) & np.isfinite(seasonal)
    if not ok.any():
        return float("nan")
    ref = float(np.mean(np.abs(actual[ok] - seasonal[ok])))
    return float(np.mean(np.abs(actual[ok] - median[ok]))) / ref if ref > 0 else float("nan")


def _simulate(
    workloads: Sequence[_Workload],
    n: int,
    t0: float,
    arm_at: Callable[[int, _Workload], str],
    models: dict[str, str],
    on_step_end: Callable[[int, _Run], None] | None = None,
    shadow_run: _Run | None = None,
) -> _Run:
    """Step every workload together: one plan per step over all of them, one simulated cluster."""
    first = workloads[0].setup
    step = first.step_s
    clock = VirtualClock(t0)
    target = SimulatedService(clock, first.startup_s, {w.ref: w.setup.initial_ready for w in workloads})
    twin = SimulatedService(clock, first.startup_s, {w.ref: w.setup.initial_ready for w in workloads})
    refs = [w.ref for w in workloads]
    policies = [w.policy for w in workloads]

    def empty() -> dict[str, np.ndarray]:
        return {w.key: np.zeros(n, dtype=np.int64) for w in workloads}

    run = _Run(empty(), empty(), empty(), empty())
    if shadow_run is not None:
        shadow_run.desired, shadow_run.allocated, shadow_run.ready, shadow_run.arm = empty(), empty(), empty(), empty()
    from planner import plan as make_plan

    for k in range(n):
        now = t0 + k * step
        clock.advance_to(now)
        live = {w.key: arm_at(k, w) for w in workloads}
        shadow = dict.fromkeys(live, "challenger")
        passes: list[tuple[SimulatedService, _Run, dict[str, str]]] = [(target, run, live)]
        if shadow_run is not None:
            passes.append((twin, shadow_run, shadow))
        for tgt, r, arms in passes:
            states = tgt.read_state(refs).workloads
            forecasts: dict[WorkloadRef, Forecast] = {}
            cluster: dict[WorkloadRef, WorkloadState] = {}
            for w in workloads:
                arm = arms[w.key]
                qs = w.forecasts[arm]
                forecasts[w.ref] = Forecast(w.ref, now, step, {q: qs[q][k] for q in qs}, models[arm])
                cluster[w.ref] = _state(w, states[w.ref], w.setup.i0 + k)
            plan = make_plan(forecasts, ClusterState(workloads=cluster), policies, now, interval_s=step)
            apply_plan(plan, tgt)
            wanted = {a.workload: a.to_replicas for a in plan.actions if isinstance(a, ScaleTo)}
            for w in workloads:
                r.desired[w.key][k] = wanted.get(w.ref, tgt.replicas(w.ref))
                r.allocated[w.key][k] = tgt.replicas(w.ref)
                r.ready[w.key][k] = tgt.ready(w.ref, now)
                r.arm[w.key][k] = int(arms[w.key] == "challenger")
        if on_step_end is not None:
            on_step_end(k, run)
    return run


def _words(diffs: Sequence[dict[str, Any]]) -> str:
    """Challenger minus champion per metric with its 95 % interval, as one line."""
    return (
        "; ".join(
            f"{d['metric']} {d['difference']:+.4g} [{d['low']:+.4g}, {d['high']:+.4g}]"
            + (" significant" if d["significant"] else "")
            for d in diffs
        )
        or "no metric had values in both arms"
    )


def _metrics(workloads: Sequence[_Workload], run: _Run, n: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for w in workloads:
        st = w.setup
        m = compute_metrics(
            st.demand[:n], run.desired[w.key], run.allocated[w.key], run.ready[w.key], st.capacity, st.step_s
        )
        m["challenger_steps"] = int(run.arm[w.key].sum())
        out[w.key] = m
    return out


def _mean(per: dict[str, dict[str, float]]) -> dict[str, float]:
    keys = ("violation_fraction", "unserved_fraction", "utilization")
    agg = {k: float(np.mean([m[k] for m in per.values()])) for k in keys}
    agg["replica_seconds"] = float(sum(m["replica_seconds"] for m in per.values()))
    agg["scale_events"] = int(sum(m["scale_events"] for m in per.values()))
    agg["challenger_steps"] = int(sum(m["challenger_steps"] for m in per.values()))
    return agg


def run_rollout_replay(
    traces: Sequence[tuple[str, Series]],
    mode: str,
    champion: str,
    challenger: str,
    params: CanaryParams | None = None,
    split: float = 0.5,
    startup_s: float = 60.0,
    max_steps: int | None = None,
    db_url: str | None = None,
    compare: bool = True,
    progress: Callable[[str, int], None] | None = None,
    capacity: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Run a rollout closed-loop on the simulated cluster; returns the JSON document (with the timeline)."""
    if mode not in MODES:
        raise UserError(f"--rollout {mode!r} is not a rollout mode.", f"Use one of {', '.join(MODES)}.")
    if champion == challenger:
        raise UserError(f"The champion and the challenger are both {champion!r}.", "Pick two different models.")
    params = params or CanaryParams()
    started = time.perf_counter()
    workloads, n, t0 = prepare_workloads(traces, champion, challenger, startup_s, max_steps, capacity=capacity)
    step = workloads[0].setup.step_s
    window = max(2, int(round(params.window_s / step)))
    if window >= n:
        raise UserError(
            f"The rollout window ({params.window_s:g} s = {window} steps) is not shorter than the run ({n} steps).",
            "Give a shorter --rollout-window or more --steps.",
        )
    tmp = tempfile.TemporaryDirectory(prefix="scaleahead-rollout-") if db_url is None else None
    url = db_url or f"sqlite:///{Path(tmp.name if tmp else '.') / 'rollout.db'}"
    store = Store(url)
    try:
        book = RolloutBook(store)
        rollout_mode: Mode = mode  # type: ignore[assignment]  # checked against MODES above
        rid = book.start(GROUP, rollout_mode, champion, challenger, t0, canary=params, split=split)
        timeline: list[dict[str, Any]] = []
        last_eval = 0
        current = {"rollout": book.get(GROUP, rid)}

        def arm_at(k: int, w: _Workload) -> str:
            return book.arm(current["rollout"], w.key)

        shadow_run = _Run({}, {}, {}, {}) if mode == "shadow" else None

        def on_step_end(k: int, run: _Run) -> None:
            nonlocal last_eval
            if progress is not None:
                progress("rollout", 1)
            end = k + 1
            if end - last_eval < window:
                current["rollout"] = book.get(GROUP, rid)  # the next step's arms come from storage
                return
            rollout = book.get(GROUP, rid)
            decided_at = t0 + end * step
            entry: dict[str, Any] = {"step": end, "time": decided_at, "share": rollout.share}
            if rollout.state != "running":
                last_eval = end
                current["rollout"] = rollout
                return
            outcomes: dict[Arm, list[Outcome]] = {"champion": [], "challenger": []}
            for w in workloads:
                if mode == "shadow":
                    assert shadow_run is not None
                    outcomes["champion"].append(_outcome(w, run, "champion", last_eval, end))
                    outcomes["challenger"].append(_outcome(w, shadow_run, "challenger", last_eval, end))
                else:
                    arm: Arm = "challenger" if run.arm[w.key][end - 1] else "champion"
                    outcomes[arm].append(_outcome(w, run, arm, last_eval, end))
            before = {w.key: book.arm(rollout, w.key) for w in workloads}
            result = book.evaluate(rollout, outcomes, decided_at)
            after_row = book.get(GROUP, rid)
            after = {w.key: book.arm(after_row, w.key) for w in workloads}
            entry.update(
                window=[last_eval, end],
                champion_workloads=len(outcomes["champion"]),
                challenger_workloads=len(outcomes["challenger"]),
                state=after_row.state,
                new_share=after_row.share,
                switched=sorted(k for k in after if after[k] != before[k]),
            )
            if mode == "canary":
                entry.update(decision=result["decision"], why=result["reason"])
                entry["summary"] = {k: v for k, v in result.items() if k.startswith(("champion_", "challenger_"))}
            else:
                diffs = result["differences"]
                entry["decision"] = "report"
                entry["why"] = _words(diffs)
                entry["differences"] = diffs
            timeline.append(entry)
            last_eval = end
            current["rollout"] = after_row

        models = {"champion": champion, "challenger": challenger}
        run = _simulate(workloads, n, t0, arm_at, models, on_step_end, shadow_run)
        final = book.get(GROUP, rid)
        if mode != "canary" and final.state == "running":
            # A/B and shadow: one more report over the whole run (the fixed split never changed).
            whole: dict[Arm, list[Outcome]] = {"champion": [], "challenger": []}
            for w in workloads:
                if shadow_run is not None:
                    whole["champion"].append(_outcome(w, run, "champion", 0, n))
                    whole["challenger"].append(_outcome(w, shadow_run, "challenger", 0, n))
                else:
                    arm: Arm = "challenger" if run.arm[w.key][n - 1] else "champion"
                    whole[arm].append(_outcome(w, run, arm, 0, n))
            report = book.evaluate(final, whole, t0 + n * step)["differences"]
            timeline.append(
                {
                    "step": n,
                    "time": t0 + n * step,
                    "share": final.share,
                    "new_share": final.share,
                    "window": [0, n],
                    "champion_workloads": len(whole["champion"]),
                    "challenger_workloads": len(whole["challenger"]),
                    "state": final.state,
                    "switched": [],
                    "decision": "final report",
                    "why": _words(report),
                    "differences": report,
                }
            )
            final = book.get(GROUP, rid)
        per = _metrics(workloads, run, n)
        policies: dict[str, dict[str, float]] = {"rollout": _mean(per)}
        references: dict[str, dict[str, dict[str, float]]] = {}
        if shadow_run is not None:
            references["shadow_challenger"] = _metrics(workloads, shadow_run, n)
            policies["shadow_challenger"] = _mean(references["shadow_challenger"])
        if compare:
            for arm in ("champion", "challenger"):

                def fixed(k: int, w: _Workload, a: str = arm) -> str:
                    return a

                ref_run = _simulate(workloads, n, t0, fixed, models)
                references[f"all_{arm}"] = _metrics(workloads, ref_run, n)
                policies[f"all_{arm}"] = _mean(references[f"all_{arm}"])
                if progress is not None:
                    progress(f"all_{arm}", n)
        first = workloads[0].setup
        return {
            "trace": ",".join(w.key for w in workloads),
            "resolution_s": step,
            "split": {
                w.key: {
                    "history_start": w.setup.split.start,
                    "test_start": w.setup.split.test_start,
                    "end": w.setup.split.end,
                }
                for w in workloads
            },
            "capacity_per_replica": {w.key: w.setup.capacity for w in workloads},
            "startup_s": first.startup_s,
            "steps": n,
            "policies": policies,
            "workloads": {
                w.key: {"rollout": per[w.key], **{k: v[w.key] for k, v in references.items()}} for w in workloads
            },
            "rollout": {
                "id": rid,
                "mode": mode,
                "champion": champion,
                "challenger": challenger,
                "state": final.state,
                "final_share": final.share,
                "window_steps": window,
                "timeline": timeline,
                "stored_history": final.results.get("history", []),
            },
            "params": {
                "rollout": mode,
                "champion": champion,
                "challenger": challenger,
                "canary": asdict(params),
                "split": split,
                "max_steps": max_steps,
                "rebased_to": t0,
            },
            "timing_s": {"total": round(time.perf_counter() - started, 3)},
        }
    finally:
        store.close()
        if tmp is not None:
            tmp.cleanup()
