"""Risk adaptation: sloRisk raised while a service runs short more often than a reactive HPA would.

The objective's ``sloRisk`` (``planner.replicas``) prices a second short of capacity in
replica-seconds. One value does not suit every service, nor one service every week: on the
replay traces nasa-10s is best near 80, while alibaba-cpu-10s's test days need about 1,000 to run
short half as often as the HPA (docs/benchmarks.md). So, per service, an HPA is simulated on the
same observed demand (``planner.reactive.Hpa`` with its documented defaults and a 70 % target;
its replicas ready one start-up delay after they are added, as in the replay) and both are scored
on the same samples:

- *short*: a sample whose demand exceeds what the ready replicas serve (``capacityPerReplica``
  each, at 100 %);
- *spend*: allocated replicas x the sample's duration.

Once per ``periodSeconds`` (on the hour by default), over the last ``windowSeconds``:

1. spend > ``costRatio`` x the HPA's: the factor goes one step down (never below 1), whatever
   the violations: the adaptation never buys more than the HPA would spend;
2. else short > ``violationRatio`` x the HPA's short samples: one step up (at most ``maxFactor``);
3. else short <= a quarter of that: one step down;
4. else it stays.

The service plans with ``sloRisk x stepFactor ** k``. A constant sloRisk is the efficient choice
while the forecast's spread is right (it equalizes the marginal risk bought per replica-second
everywhere); this only moves it when the outcome says the forecast's tail is too thin (more short
samples than the target) or the price too high (more spend than the HPA), one step per period.

The counts are those observed at the start of each cycle (ready and allocated replicas, before
the cycle acts), charged to the samples from that cycle to the next. Only samples that ended
before ``now`` are scored, so no decision uses a later one. A cycle that comes more than twice the
control interval (at least twice the HPA's 60 s metric window) after the previous one, or before it,
follows a gap (a standby, a back-off, failed cycles, a clock jump): what the cluster had in it is
unknown, so the samples after the previous cycle's interval are not scored, and the simulated HPA
starts again from the replicas the cluster has now. A missing sample at the end of the demand
is looked at again at the next cycles (for as long as a gap), so a point that arrives late is
scored.

The state is kept in memory: after a restart a service starts again from its own sloRisk (factor 1)
and a fresh simulated HPA, unless the caller ``restore``s the recorded steps (the control loop
records them in storage, each with the ``fingerprint`` of what it was learned under, so a policy
edited in between does not resume it).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from planner.reactive import Hpa, HpaConfig
from scaleahead.policy import Policy, RiskAdaptation, WorkloadClass
from scaleahead.types import ClusterState, FloatArray, Series, WorkloadRef

#: A window must hold at least this share of a period of scored samples before a decision.
MIN_SHARE = 0.5


class ReferenceHpa:
    """An HPA on the observed demand, with the replay's replica model (``actuator.simulated``).

    A replica added at ``t`` is ready at ``t + startup_s`` and costs from ``t``; removal is
    immediate, newest (pending) first. Driven once per cycle by ``step``.

    ``startup_s`` may change between cycles (the learned delay, ``RiskAdapter.cycle``): replicas
    added after it fell can be ready before older ones, so ``_ready_at`` (kept in the order the
    replicas were added, which removal follows) is then not sorted and ``ready`` counts instead of
    bisecting.
    """

    def __init__(
        self, capacity: float, startup_s: float, utilization: float, ready: int, allocated: int, now: float
    ) -> None:
        self.hpa = Hpa(capacity, HpaConfig(target_utilization=utilization), explain=False)  # counts only
        self.startup_s = float(startup_s)
        ready = max(0, int(ready))
        pending = max(0, int(allocated) - ready)
        self._ready_at = [now - self.startup_s] * ready + [now + self.startup_s] * pending
        self._sorted = True  # _ready_at ascending (while the start-up delay has not fallen)

    @property
    def allocated(self) -> int:
        return len(self._ready_at)

    def ready(self, now: float) -> int:
        t = now + 1e-9
        if self._sorted:
            return bisect.bisect_right(self._ready_at, t)
        return sum(1 for r in self._ready_at if r <= t)

    def step(self, now: float, window_demand: FloatArray, earlier_window: FloatArray | None = None) -> int:
        """The HPA's decision at ``now`` on the demand of its metric window before ``now``; applied at once.

        ``earlier_window``: the window known at the previous cycle, which the syncs due between
        the two cycles ran on (``Hpa.decide``): with it a cycle holding several 15-s syncs (a
        1- or 5-minute grid) keeps the HPA's scale-down stabilization, as the replay's HPA peer
        does since 2026-12-07."""
        have = len(self._ready_at)
        want, _ = self.hpa.decide(now, window_demand, self.ready(now), have, earlier_window=earlier_window)
        at = self._ready_at
        if want > have:
            if at and now + self.startup_s < at[-1]:
                self._sorted = False
            at.extend([now + self.startup_s] * (want - have))
        elif want < have:
            del at[want:]
            if not self._sorted:
                self._sorted = all(a <= b for a, b in zip(at, at[1:], strict=False))
        return want


@dataclass(slots=True)
class Tally:
    """Short samples and spend of the service and of the simulated HPA over some samples."""

    short: int = 0
    ref_short: int = 0
    spend: float = 0.0
    ref_spend: float = 0.0
    samples: int = 0

    def add(self, other: Tally) -> None:
        self.short += other.short
        self.ref_short += other.ref_short
        self.spend += other.spend
        self.ref_spend += other.ref_spend
        self.samples += other.samples


def decide_step(cfg: RiskAdaptation, tally: Tally) -> tuple[int, str]:
    """The rule of the module docstring: -1, 0 or +1 step, and why (in words)."""
    if tally.spend > cfg.cost_ratio * tally.ref_spend:
        return -1, f"it spent more than {cfg.cost_ratio:g} x the HPA's replica-seconds"
    target = cfg.violation_ratio * tally.ref_short
    if tally.short > target:
        return +1, f"it ran short more often than {cfg.violation_ratio:g} x the HPA"
    if tally.short <= target / 4:
        return -1, f"it ran short at most a quarter of {cfg.violation_ratio:g} x as often as the HPA"
    return 0, "within the targets"


class RiskAdapter:
    """One service's adaptation state: the simulated HPA, the tallies per period and the step ``k``."""

    def __init__(
        self,
        cfg: RiskAdaptation,
        capacity: float,
        startup_s: float,
        step_s: float,
        ready: int,
        allocated: int,
        now: float,
    ) -> None:
        self.cfg = cfg
        self.capacity = float(capacity)
        self.step_s = float(step_s)
        self.reference = ReferenceHpa(capacity, startup_s, cfg.reference_utilization, ready, allocated, now)
        self.k = 0
        self.k_max = int(math.floor(math.log(cfg.max_factor) / math.log(cfg.step_factor) + 1e-9))
        self._metric_samples = max(1, int(round(self.reference.hpa.config.metric_window_s / self.step_s)))
        # (time, ready, allocated, HPA ready, HPA allocated) observed at the start of each cycle
        self._obs: deque[tuple[float, int, int, int, int]] = deque()
        self._next_t: float | None = None  # time of the next sample to score
        self._periods: dict[int, Tally] = {}
        self._decided = self._period(now)
        self._window = max(1, int(round(cfg.window_seconds / cfg.period_seconds)))
        self.last: Tally | None = None  # the window of the last decision
        #: The simulated HPA's metric window at the previous cycle (the syncs between two cycles
        #: ran on it); None before the first cycle and after a gap.
        self._prev_window: FloatArray | None = None

    @property
    def factor(self) -> float:
        return float(self.cfg.step_factor**self.k)

    def _period(self, t: float) -> int:
        return int(math.floor(t / self.cfg.period_seconds + 1e-9))

    def max_gap(self, interval_s: float) -> float:
        """The longest time between two cycles whose samples are still charged to the first one's counts."""
        return 2.0 * max(float(interval_s), self.reference.hpa.config.metric_window_s, self.step_s)

    def cycle(
        self,
        now: float,
        past: Series,
        ready: int,
        allocated: int,
        interval_s: float | None = None,
        startup_s: float | None = None,
    ) -> tuple[int, str] | None:
        """One control cycle at ``now`` with the demand observed before it; ``(old k, why)`` when ``k`` changed.

        ``interval_s``: the control interval (default: the demand's step). A cycle more than
        ``max_gap`` after the previous one (a standby, a back-off, failed cycles, a clock jump), or
        before it (the clock stepped back), is a gap: the counts in it are unknown, so its samples
        (from one interval after the previous cycle) are not scored, and the simulated HPA starts
        again from the replicas the cluster has now.

        ``startup_s``: the start-up delay planned with this cycle (learned from the cluster's
        readiness times, ``planner.startup``); the simulated HPA's replicas added from now on are
        ready that long after (default: as before).
        """
        if startup_s is not None:
            self.reference.startup_s = float(startup_s)
        interval = self.step_s if interval_s is None else float(interval_s)
        last = self._obs[-1][0] if self._obs else None
        gap = last is not None and (now - last > self.max_gap(interval) or now < last)
        self._score(past, None if last is None or not gap else last + interval, self.max_gap(interval))
        if gap:
            self._obs.clear()
            if len(past):
                end = past.start + len(past) * past.step_s
                self._next_t = end if self._next_t is None else max(self._next_t, end)
            ref = self.reference
            self.reference = ReferenceHpa(
                self.capacity, ref.startup_s, self.cfg.reference_utilization, ready, allocated, now
            )
        self._obs.append((now, int(ready), int(allocated), self.reference.ready(now), self.reference.allocated))
        window = past.values[-self._metric_samples :].copy()
        # the window the previous cycle saw, as it saw it (a sample that arrived late is not in it)
        earlier = self._prev_window if last is not None and not gap else None
        self.reference.step(now, window, earlier)
        self._prev_window = window
        return self._decide(now)

    def _score(self, past: Series, stop: float | None = None, wait_s: float = 0.0) -> None:
        """Score the samples not scored yet, each with the counts of the last cycle at or before it;
        none at or after ``stop`` (the end of what the last cycle's counts cover, before a gap).

        Missing samples (NaN) at the end are looked at again next cycle, for up to ``wait_s``: a
        point that arrives a cycle late (a recording rule's lag, filled in by the history cache's
        overlap) is scored then. Missing samples before a finite one are not waited for.
        """
        n = len(past)
        if n == 0:
            return
        step = past.step_s
        if self._next_t is None or not self._obs:
            # nothing observed yet: samples before the first cycle are not ours to score
            self._next_t = past.start + n * step
            return
        j0 = max(0, int(math.ceil((self._next_t - past.start) / step - 1e-9)))
        j1 = n if stop is None else min(n, max(0, int(math.ceil((stop - past.start) / step - 1e-9))))
        obs = self._obs
        o = 0
        cap = self.capacity
        values = past.values
        scored_to = self._next_t  # the end of the last finite sample looked at
        for j in range(j0, j1):
            t = past.start + j * step
            while o + 1 < len(obs) and obs[o + 1][0] <= t + 1e-9:
                o += 1
            if obs[o][0] > t + 1e-9:
                continue  # before the first observation
            d = float(values[j])
            if not math.isfinite(d):
                continue
            scored_to = t + step
            _, r, a, rr, ra = obs[o]
            tally = self._periods.get(self._period(t))
            if tally is None:
                tally = self._periods[self._period(t)] = Tally()
            tally.short += d > cap * r + 1e-9 * cap
            tally.ref_short += d > cap * rr + 1e-9 * cap
            tally.spend += a * step
            tally.ref_spend += ra * step
            tally.samples += 1
        end = past.start + j1 * step
        # never back (no sample is scored twice), nor waiting longer than wait_s for a missing one
        self._next_t = max(self._next_t, min(end, max(scored_to, end - wait_s)))
        while len(obs) > 1 and obs[1][0] <= self._next_t + 1e-9:
            obs.popleft()

    def _decide(self, now: float) -> tuple[int, str] | None:
        p = self._period(now)
        if p <= self._decided:
            return None
        self._decided = p
        lo = p - self._window
        for q in [q for q in self._periods if q < lo]:
            del self._periods[q]
        tally = Tally()
        for q, t in self._periods.items():
            if q < p:
                tally.add(t)
        if tally.samples * self.step_s < MIN_SHARE * self.cfg.period_seconds:
            return None
        self.last = tally
        move, why = decide_step(self.cfg, tally)
        old = self.k
        self.k = min(self.k_max, max(0, self.k + move))
        return (old, why) if self.k != old else None


def with_slo_risk(policy: Policy, slo_risk: float) -> Policy:
    """A copy of ``policy`` whose ``objective.sloRisk`` is ``slo_risk`` (the rest unchanged); when
    that differs from the policy's, the objective remembers the policy's own, for the reasons."""
    spec = policy.spec
    objective = spec.objective.model_copy(update={"slo_risk": float(slo_risk)})
    if float(slo_risk) != spec.objective.slo_risk:
        own = spec.objective._slo_risk_policy
        objective._slo_risk_policy = spec.objective.slo_risk if own is None else own
    return policy.model_copy(update={"spec": spec.model_copy(update={"objective": objective})})


def adapts(policy: Policy) -> bool:
    """Whether ``policy``'s sloRisk is adapted: an enabled service planned at the objective's level."""
    spec = policy.spec
    return (
        spec.objective.risk_adaptation.enabled
        and spec.workload_class == WorkloadClass.SERVICE
        and spec.forecast_quantile is None
        and spec.objective.slo_risk > 0
    )


def _every(key: str) -> bool:
    return True


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.3g}"


class StoredStep(NamedTuple):
    """A recorded step: ``k``, the sloRisk it planned with, and the ``fingerprint`` of what it was
    learned under (None: recorded before fingerprints were)."""

    k: int
    slo_risk: float
    fingerprint: str | None = None


def fingerprint(policy: Policy, step_s: float) -> str:
    """What a step is learned under: the policy's riskAdaptation block, capacityPerReplica and
    sloRisk, and the demand's step; a recorded step with another one is not resumed."""
    spec = policy.spec
    doc = {
        "riskAdaptation": spec.objective.risk_adaptation.model_dump(mode="json"),
        "capacityPerReplica": float(spec.capacity_per_replica),
        "sloRisk": float(spec.objective.slo_risk),
        "stepSeconds": float(step_s),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


class RiskBook:
    """The adapters of all services, kept across cycles (the loop's and the replay's).

    ``owns``: whether a workload key is this book's to manage (a shard's, ``scaleahead.sharding``;
    default: every key): a recorded step whose workload has no policy is removed only if it is.
    """

    def __init__(self, owns: Callable[[str], bool] | None = None) -> None:
        self.owns: Callable[[str], bool] = owns if owns is not None else _every
        # per service: (what its step is learned under, its fingerprint, the adapter)
        self._adapters: dict[WorkloadRef, tuple[tuple[RiskAdaptation, float, float, float], str, RiskAdapter]] = {}
        self._adapted: dict[WorkloadRef, tuple[Policy, int, Policy]] = {}
        self._restored: dict[str, StoredStep] = {}
        #: Whether ``restore`` was called (the loop restores from storage once, and again after a ``reset``).
        self.restored = False
        #: ``{workload key: (k, sloRisk planned with, fingerprint)}`` for the steps changed and not yet
        #: recorded by the caller (kept until it clears them after a successful write); k 0 removes one.
        self.unsaved: dict[str, tuple[int, float, str | None]] = {}

    def reset(self) -> None:
        """Forget every service's state (a replica that starts to lead again: another leader may have
        moved the steps since); the caller ``restore``s from its record before the next ``apply``."""
        self._adapters.clear()
        self._adapted.clear()
        self._restored = {}
        self.restored = False
        self.unsaved.clear()

    def restore(self, steps: Mapping[str, tuple[int, float, str | None]]) -> None:
        """Resume from recorded steps ``{workload key: (k, sloRisk, fingerprint)}``: a service starts
        at its ``k`` instead of 0 if the fingerprint matches its policy's (``fingerprint``; one
        recorded without a fingerprint, if its sloRisk is the policy's x stepFactor^k), else from 0
        and the record goes; a record of a workload without a policy goes too. Each is a plan note."""
        self._restored = {key: StoredStep(*step) for key, step in steps.items() if int(step[0]) > 0}
        self.restored = True

    def factor(self, ref: WorkloadRef) -> float:
        """The current multiple of the policy's sloRisk for ``ref`` (1 when not adapted)."""
        entry = self._adapters.get(ref)
        return entry[2].factor if entry else 1.0

    def adapter(self, ref: WorkloadRef) -> RiskAdapter | None:
        """The adaptation state of ``ref`` (None when not adapted)."""
        entry = self._adapters.get(ref)
        return entry[2] if entry else None

    def apply(
        self,
        policies: Sequence[Policy],
        history: Mapping[WorkloadRef, Series],
        state: ClusterState,
        now: float,
        interval_s: float | None = None,
    ) -> tuple[list[Policy], tuple[str, ...]]:
        """The policies to plan with (adapted ones with their sloRisk) and a note per change of factor.

        ``interval_s``: the control interval (default: each demand's step); a longer time between
        two cycles is a gap, whose samples are not scored (``RiskAdapter.cycle``).
        """
        out = list(policies)
        notes: list[str] = []
        seen: set[WorkloadRef] = set()
        if self._restored:  # a recorded step of a workload that has no policy (any more) goes
            keys = {p.workload.key for p in policies}
            for orphan in [o for o in self._restored if o not in keys and self.owns(o)]:
                gone = self._restored.pop(orphan)
                self.unsaved[orphan] = (0, gone.slo_risk, None)
                notes.append(f"risk adaptation: {orphan} has no policy: its recorded step {gone.k} is removed")
        for i, policy in enumerate(policies):
            if not adapts(policy):
                # Adaptation turned off (or a fixed forecastQuantile, or sloRisk 0): the service plans
                # with its own weight and its stored step goes, so a restart does not bring it back.
                ref = policy.workload
                entry = self._adapters.pop(ref, None)
                self._adapted.pop(ref, None)
                restored = self._restored.pop(ref.key, None)
                if restored is not None or (entry is not None and entry[2].k):
                    self.unsaved[ref.key] = (0, policy.spec.objective.slo_risk, None)
                continue
            ref = policy.workload
            seen.add(ref)  # kept through a cycle without history or state (a Prometheus outage)
            ws = state.workloads.get(ref)
            past = history.get(ref)
            if ws is None or past is None:  # nothing to score this cycle: the weight stays as it was
                held = self._adapters.get(ref)
                if held is not None and held[2].k:
                    out[i] = self._policy(ref, policy, held[2])
                continue
            past = past.known_by(now)  # the steps ended by now (no-peeking audit: before() kept a step in progress)
            spec = policy.spec
            cfg = spec.objective.risk_adaptation
            base = spec.objective.slo_risk
            key = (cfg, float(spec.capacity_per_replica), float(past.step_s), float(base))
            entry = self._adapters.get(ref)
            if entry is None or entry[0] != key:
                cap, startup = spec.capacity_per_replica, spec.startup_seconds
                adapter = RiskAdapter(cfg, cap, startup, past.step_s, ws.ready_replicas, ws.replicas, now)
                fp = fingerprint(policy, past.step_s)
                if entry is not None and entry[2].k:  # the policy changed: it starts again from its own weight
                    self.unsaved[ref.key] = (0, base, fp)
                stored = self._restored.pop(ref.key, None)
                if stored is not None:
                    notes.append(self._resume(ref, policy, adapter, stored, fp))
                entry = self._adapters[ref] = (key, fp, adapter)
            adapter = entry[2]
            changed = adapter.cycle(now, past, ws.ready_replicas, ws.replicas, interval_s, spec.startup_seconds)
            if changed is not None:
                notes.append(self._note(ref, policy, adapter, changed))
                self.unsaved[ref.key] = (adapter.k, base * adapter.factor, entry[1])
            if adapter.k:
                out[i] = self._policy(ref, policy, adapter)
        for ref in [r for r in self._adapters if r not in seen]:  # its policy is gone: so is its step
            _, _, adapter = self._adapters.pop(ref)
            self._adapted.pop(ref, None)
            if adapter.k:
                self.unsaved[ref.key] = (0, 0.0, None)  # k 0: the record goes
                notes.append(f"risk adaptation: {ref} has no policy any more: its step {adapter.k} is removed")
        return out, tuple(notes)

    def _resume(self, ref: WorkloadRef, policy: Policy, adapter: RiskAdapter, stored: StoredStep, fp: str) -> str:
        """Start ``adapter`` at a recorded step if it was learned under this policy; the plan note."""
        base = policy.spec.objective.slo_risk
        k = int(stored.k)
        if stored.fingerprint is None:  # recorded before fingerprints: only its weight can be checked
            same = k <= adapter.k_max and math.isclose(stored.slo_risk, base * adapter.cfg.step_factor**k, rel_tol=1e-6)
            how = " (recorded without a fingerprint: only its weight was checked)"
        else:
            same = stored.fingerprint == fp and k <= adapter.k_max
            how = ""
        if not same:
            self.unsaved[ref.key] = (0, base, fp)
            return (
                f"risk adaptation: {ref} recorded step {k} (sloRisk {_fmt(stored.slo_risk)}) discarded: it was "
                "learned under another sloRisk, capacityPerReplica, demand step or riskAdaptation block; it "
                f"starts again from its own sloRisk {_fmt(base)}"
            )
        adapter.k = k
        if stored.fingerprint is None:
            self.unsaved[ref.key] = (k, base * adapter.factor, fp)  # recorded again, with its fingerprint
        return (
            f"risk adaptation: {ref} resumed at step {k} from storage: sloRisk {_fmt(base * adapter.factor)} "
            f"(x{adapter.factor:.3g} its own {_fmt(base)}){how}"
        )

    def _policy(self, ref: WorkloadRef, policy: Policy, adapter: RiskAdapter) -> Policy:
        """The adapted policy: the same object while neither the policy nor ``k`` change (plans cache by identity)."""
        hit = self._adapted.get(ref)
        if hit is not None and hit[0] is policy and hit[1] == adapter.k:
            return hit[2]
        adapted = with_slo_risk(policy, policy.spec.objective.slo_risk * adapter.factor)
        self._adapted[ref] = (policy, adapter.k, adapted)
        return adapted

    @staticmethod
    def _note(ref: WorkloadRef, policy: Policy, adapter: RiskAdapter, changed: tuple[int, str]) -> str:
        old_k, why = changed
        cfg = adapter.cfg
        base = policy.spec.objective.slo_risk
        t = adapter.last or Tally()
        hours = t.samples * adapter.step_s / 3600
        cost = t.spend / t.ref_spend if t.ref_spend > 0 else math.inf
        return (
            f"risk adaptation: {ref} sloRisk {_fmt(base * cfg.step_factor**old_k)} -> {_fmt(base * adapter.factor)} "
            f"(x{adapter.factor:.3g} its own {_fmt(base)}): over the last {hours:.3g} h it ran short on {t.short} of "
            f"{t.samples} samples and an HPA at {cfg.reference_utilization:.0%} on the same demand on {t.ref_short} "
            f"(target: at most {cfg.violation_ratio:g} x), at {cost:.3g} x its replica-seconds (limit "
            f"{cfg.cost_ratio:g} x): {why}"
        )
