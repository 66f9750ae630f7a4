"""What one cycle's report exports as metrics (``scaleahead.observability.Metrics.observe_cycle``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forecaster.baselines import Naive
from scaleahead.bench.speed import policies_for
from scaleahead.loop import Deps, run_once
from scaleahead.observability import Metrics
from scaleahead.policy import Policy
from scaleahead.settings import Settings
from scaleahead.traces import load_series
from scaleahead.tracesource import InMemoryTarget, TraceHistory
from scaleahead.types import Series, WorkloadRef

NASA = load_series("nasa-10s")
NOW = NASA.start + 3 * 86400.0  # three days into the trace


class _Flaky:
    """A history source over a real trace that can go down (Prometheus unreachable)."""

    def __init__(self, series: Series) -> None:
        self.inner = TraceHistory(default=series)
        self.down = False

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        if self.down:
            raise ConnectionError("prometheus unreachable")
        return self.inner.read(policies, now)


def _samples(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for m in metrics.registry.collect()
        for s in m.samples
        if s.name == name
    }


def test_a_workload_without_a_forecast_this_cycle_exports_none_not_the_last_one() -> None:
    """Its history read failed (a fallback): the forecast series go, like the forecast peak, instead
    of freezing at the last cycle's values (found in review: scaleahead_forecast stayed)."""
    (pol,) = policies_for(1, 10.0)
    history = _Flaky(NASA)
    deps = Deps(history, Naive(), InMemoryTarget(), None, [pol])
    metrics = Metrics()
    report = run_once(deps, Settings(), NOW, True)
    metrics.observe_cycle(report, 0.0, {})
    assert len(_samples(metrics, "scaleahead_forecast")) == 6  # 2 quantiles x 3 leads
    assert len(_samples(metrics, "scaleahead_forecast_peak")) == 1
    history.down = True
    report = run_once(deps, Settings(), NOW + 10.0, True)
    assert not report.forecasts and pol.workload in report.plan.fallbacks
    metrics.observe_cycle(report, 0.0, {})
    assert _samples(metrics, "scaleahead_forecast") == {}
    assert _samples(metrics, "scaleahead_forecast_peak") == {}
    history.down = False  # back: exported again
    metrics.observe_cycle(run_once(deps, Settings(), NOW + 20.0, True), 0.0, {})
    assert len(_samples(metrics, "scaleahead_forecast")) == 6


def test_a_service_no_longer_planned_with_an_adapted_slo_risk_exports_none() -> None:
    """Its policy turned the risk adaptation off: the last adapted weight must not stay exported."""
    (pol,) = policies_for(1, 10.0)
    deps = Deps(TraceHistory(default=NASA), Naive(), InMemoryTarget(), None, [pol])
    metrics = Metrics()
    report = run_once(deps, Settings(), NOW, True)
    assert pol.workload in report.slo_risk
    metrics.observe_cycle(report, 0.0, {})
    assert len(_samples(metrics, "scaleahead_slo_risk")) == 1
    objective = pol.spec.objective
    off = objective.model_copy(
        update={"risk_adaptation": objective.risk_adaptation.model_copy(update={"enabled": False})}
    )
    deps.policies = [pol.model_copy(update={"spec": pol.spec.model_copy(update={"objective": off})})]
    report = run_once(deps, Settings(), NOW + 10.0, True)
    assert report.slo_risk == {}
    metrics.observe_cycle(report, 0.0, {})
    assert _samples(metrics, "scaleahead_slo_risk") == {}


def test_no_op_actions_are_not_counted_as_skipped() -> None:
    """A no-op (nothing to change) makes no API call and is not journaled: it is no action taken or
    skipped (found in review: every workload counted as skipped every cycle)."""
    pols = policies_for(5, 10.0)
    target = InMemoryTarget(default_replicas=1)
    flat = Series(NASA.name, NASA.start, NASA.step_s, NASA.values * 0.0 + 1.0)  # one replica's worth
    deps = Deps(TraceHistory(default=flat), Naive(), target, None, pols)
    metrics = Metrics()
    for k in range(3):
        report = run_once(deps, Settings(), NOW + 10.0 * k, False)
        assert report.results and all(r.action.is_noop for r in report.results)
        metrics.observe_cycle(report, 0.0, {})
    assert target.applied == []
    counted = _samples(metrics, "scaleahead_actions_total")
    assert counted and set(counted.values()) == {0.0}
    # a change is counted, by its result
    target.replicas = {p.workload: 4 for p in pols}  # scaled up by hand: the plan scales them back
    report = run_once(deps, Settings(), NOW + 30.0, False)
    metrics.observe_cycle(report, 0.0, {})
    changed = sum(1 for r in report.results if not r.action.is_noop)
    assert changed and sum(_samples(metrics, "scaleahead_actions_total").values()) == changed
