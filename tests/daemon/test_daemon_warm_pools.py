"""The daemon with functions' warm pools (found in review): a failed SetWarmPool write backs off like
a failed ScaleTo, function policies get a status (their warm instances), and an outage of the
history source keeps the warm pools instead of cooling them all and re-warming them after."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from forecaster.baselines import Naive
from scaleahead.clock import VirtualClock
from scaleahead.daemon import WARM_POOL_MODEL, Daemon, PolicyStatus
from scaleahead.loop import Deps
from scaleahead.policy import Policy, parse_policies
from scaleahead.settings import Settings
from scaleahead.tracesource import InMemoryTarget
from scaleahead.types import Series, SetWarmPool, WorkloadRef
from storage import Store
from tests.serverless.conftest import FUNCTION_POLICY, FixedHistory


def _function(name: str = "f0") -> Policy:
    return parse_policies(FUNCTION_POLICY.format(name=name, warm="memoryMbPerInstance: 128"))[0]


class _Flaky(FixedHistory):
    """A history source that can be down (a timeout, as when Prometheus does not answer)."""

    down = False

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        if self.down:
            raise TimeoutError("Prometheus timed out")
        return super().read(policies, now)


class _Sink:
    def __init__(self) -> None:
        self.seen: list[PolicyStatus] = []

    def publish(self, statuses: Sequence[PolicyStatus]) -> None:
        self.seen.extend(statuses)


def _daemon(tmp_path: Path, policies: list[Policy], values: np.ndarray, **kw: object) -> tuple[Daemon, VirtualClock]:
    history = _Flaky({p.workload: Series(p.workload.name, 0.0, 60.0, values) for p in policies})
    target = InMemoryTarget()
    clock = VirtualClock(1500 * 60.0)
    store = Store(f"sqlite:///{tmp_path}/x.db")
    return Daemon(Deps(history, Naive(), target, store, policies), Settings(), clock, **kw), clock  # type: ignore[arg-type]


def test_a_failed_warm_pool_write_backs_off(tmp_path: Path) -> None:
    pol = _function()
    values = np.zeros(3000)
    values[::3] = 2.0  # called every 3 minutes: the warm pool changes often
    daemon, clock = _daemon(tmp_path, [pol], values)
    target = daemon.deps.target
    assert isinstance(target, InMemoryTarget)
    target.fail = {pol.workload.key}  # the Knative Service answers 500 (or 403)
    held = 0
    for _ in range(60):  # 10 minutes of 10-s cycles
        held += pol.workload.key in daemon.tick(clock.now()).skipped
        clock.sleep(10.0)
    assert daemon.backoff.failures.get(pol.workload.key, 0) >= 2
    assert held > 0, "a failed SetWarmPool was retried every cycle, never backed off"


def test_a_function_policy_gets_a_status_with_its_warm_instances(tmp_path: Path) -> None:
    pol = _function()
    values = np.full(3000, 4.0)  # called every minute: kept warm
    sink = _Sink()
    daemon, clock = _daemon(tmp_path, [pol], values, status_sink=sink)
    daemon.tick(clock.now())
    assert len(sink.seen) == 1
    st = sink.seen[0]
    assert (st.name, st.namespace, st.workload) == ("f0", "fn", pol.workload.key)
    assert st.desired_warm_instances == 1 and st.current_warm_instances == 0
    assert st.model == WARM_POOL_MODEL and st.fallback_mode == "none"
    doc = st.to_status()
    assert doc["desiredWarmInstances"] == 1 and doc["currentWarmInstances"] == 0
    assert doc["desiredReplicas"] is None and doc["currentReplicas"] is None  # a merge patch removes them
    assert doc["lastReasonCode"] == "warm_forecast" and "chance of an invocation" in doc["lastReason"]


def test_a_history_outage_keeps_every_warm_pool(tmp_path: Path) -> None:
    pols = [_function(f"f{i}") for i in range(3)]
    daemon, clock = _daemon(tmp_path, pols, np.full(3000, 4.0))
    target = daemon.deps.target
    history = daemon.history.inner
    assert isinstance(target, InMemoryTarget) and isinstance(history, _Flaky)
    warm: list[list[int]] = []
    for i in range(4):
        history.down = i == 2  # one cycle without Prometheus
        daemon.tick(clock.now())
        warm.append([target.warm.get(p.workload, 0) for p in pols])
        clock.sleep(10.0)
    assert warm == [[1, 1, 1]] * 4
    writes = [a for a in target.applied if isinstance(a, SetWarmPool)]
    assert len(writes) == 3, "only the first pre-warm: no cool and re-warm (a Knative Revision each)"


def test_a_function_in_fallback_shows_in_the_fallback_gauge_the_alert_reads(tmp_path: Path) -> None:
    """docs/serverless.md promises a function's fallback in `scaleahead_fallback_active` (and so
    alert ScaleaheadWorkloadInFallback); found in review: only services' actions set the gauge."""
    pol = _function()
    daemon, clock = _daemon(tmp_path, [pol], np.full(3000, 4.0))
    history = daemon.history.inner
    assert isinstance(history, _Flaky)

    def active() -> dict[str, float]:
        out = {}
        for line in daemon.metrics.render().decode().splitlines():
            if line.startswith("scaleahead_fallback_active{") and pol.workload.key in line:
                mode = line.split('mode="', 1)[1].split('"', 1)[0]
                out[mode] = float(line.rsplit(" ", 1)[1])
        return out

    daemon.tick(clock.now())
    assert active() and not any(active().values())  # a forecast: in no fallback
    clock.sleep(10.0)
    history.down = True
    report = daemon.tick(clock.now()).report
    assert report is not None and pol.workload in report.plan.fallbacks
    assert active()[report.plan.fallbacks[pol.workload]] == 1.0
