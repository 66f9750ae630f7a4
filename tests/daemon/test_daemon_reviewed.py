"""Daemon behaviour fixed after a review on 2026-12-04: fallback scale-downs, a new leader's
policies, the stabilization window on reload, gauges of removed policies, a fallback's status."""

from __future__ import annotations

from scaleahead.daemon import PolicyStatus
from scaleahead.types import ScaleTo
from tests.daemon.conftest import DaemonFactory, make_policies


def _slow_start(policy):  # type: ignore[no-untyped-def]
    # a start-up past the 900 s horizon: every decision is the reactive fallback ("forecast too short")
    return policy.model_copy(update={"spec": policy.spec.model_copy(update={"startup_seconds": 1200.0})})


def test_a_workload_on_its_fallback_still_scales_down(daemon_factory: DaemonFactory) -> None:
    daemon, clock, target, _ = daemon_factory(n=1)
    daemon.set_policies([_slow_start(daemon.deps.policies[0])])
    codes = set()
    for _ in range(3 * 360):  # 3 hours of 10 s ticks
        report = daemon.tick(clock.now()).report
        assert report is not None
        codes.add(report.plan.actions[0].reason.code)
        clock.sleep(10.0)
    assert codes == {"fallback_reactive"}
    downs = [a for a in target.applied if isinstance(a, ScaleTo) and a.to_replicas < a.from_replicas]
    assert downs, "a held count was remembered as a decision and renewed the hold every cycle"


def test_reloaded_policies_set_the_stabilization_memory_and_removed_ones_leave_no_gauges(
    daemon_factory: DaemonFactory,
) -> None:
    daemon, clock, _, _ = daemon_factory(n=2)
    for _ in range(3):
        daemon.tick(clock.now())
        clock.sleep(10.0)
    web0, web1 = daemon.deps.policies
    assert b'workload="Deployment/shop/web1"' in daemon.metrics.render()
    longer = web0.model_copy(update={"spec": web0.spec.model_copy(update={"scale_down_stabilization_seconds": 600.0})})
    daemon.set_policies([longer])
    assert daemon.target.window_s == 600.0
    assert b'workload="Deployment/shop/web1"' not in daemon.metrics.render()
    assert b'workload="Deployment/shop/web0"' in daemon.metrics.render()


class _Flip:
    """Standby for the first ``n`` ticks, then the leader."""

    def __init__(self, n: int) -> None:
        self.n = n

    def is_leader(self, now: float) -> bool:
        self.n -= 1
        return self.n < 0

    def release(self) -> None:
        return None


def test_a_standby_that_becomes_the_leader_reads_the_policies_before_it_acts(daemon_factory: DaemonFactory) -> None:
    current = {"policies": make_policies(2)}
    daemon, clock, target, _ = daemon_factory(
        n=2, leadership=_Flip(3), policy_source=lambda: current["policies"], policy_reload_s=30.0
    )
    for _ in range(3):
        assert daemon.tick(clock.now()).role == "standby"
        clock.sleep(10.0)
    current["policies"] = make_policies(1)  # web1's policy was deleted while this replica stood by
    report = daemon.tick(clock.now()).report
    assert report is not None
    assert [a.workload.name for a in report.plan.actions] == ["web0"]
    assert all(a.workload.name == "web0" for a in target.applied)


def test_a_fallback_status_clears_the_forecast_peak() -> None:
    status = PolicyStatus(
        "web0", "shop", "Deployment/shop/web0", 4, 4, None, "reactive", "fallback", "fallback_reactive", 0.0, "m"
    )
    assert status.to_status()["forecastPeak"] is None  # a merge patch removes the last forecast's peak


def test_a_champion_that_could_not_be_loaded_is_tried_again_later(daemon_factory: DaemonFactory) -> None:
    from scaleahead.daemon import UNLOADABLE_RETRY_S
    from scaleahead.errors import DataError

    daemon, clock, _, store = daemon_factory(n=2, reference_error=100.0)
    champion = store.register_model("seasonal_naive-a", "seasonal_naive", status="champion")
    real, calls = daemon._load_version, []

    def first_fails(s, model_id):  # type: ignore[no-untyped-def]
        calls.append(model_id)
        if len(calls) == 1:  # e.g. a 60 s checkpoint checked before any history, at 10 s
            raise DataError("trained at 60 s resolution; the series are at 10 s")
        return real(s, model_id)

    daemon._load_version = first_fails  # type: ignore[method-assign]
    daemon.run(lambda: False, max_ticks=20)
    assert daemon.deps.model_version_id is None and calls == [champion]
    clock.sleep(UNLOADABLE_RETRY_S)
    daemon.run(lambda: False, max_ticks=8)
    assert daemon.deps.model_version_id == champion


class _OneFails:
    """A per-workload source (like PrometheusHistory): the first policy's read fails, named in ``errors``."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.errors: dict = {}  # type: ignore[type-arg]
        self.asked: list[set[str]] = []

    def read(self, policies, now):  # type: ignore[no-untyped-def]
        self.asked.append({p.workload.key for p in policies})
        got = dict(self.inner.read(policies, now))
        bad = policies[0].workload if policies else None
        self.errors = {bad: "query failed: HTTP 422"} if bad is not None and bad.key.endswith("/web0") else {}
        got.pop(bad, None) if self.errors else None
        return got


def test_a_workloads_failed_history_read_reaches_the_report_and_backs_off_once(daemon_factory: DaemonFactory) -> None:
    daemon, clock, _, _ = daemon_factory(n=2)
    source = _OneFails(daemon.history.inner)
    daemon.history.inner = source
    first = daemon.tick(clock.now())
    failing = daemon.deps.policies[0].workload.key
    assert first.report is not None and first.report.errors[failing] == "history: query failed: HTTP 422"
    assert failing in daemon.backoff.failures
    failures = daemon.backoff.failures[failing]
    clock.advance_to(clock.now() + 5.0)
    second = daemon.tick(clock.now())  # backing off (10 s): not read, and not reported again
    assert failing not in source.asked[-1]
    assert second.report is not None and failing not in second.report.errors
    assert daemon.backoff.failures[failing] == failures


def test_the_training_window_is_released_after_a_retraining(daemon_factory: DaemonFactory) -> None:
    class Releasing:
        def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
            self.inner, self.released = inner, 0

        def read(self, policies, now):  # type: ignore[no-untyped-def]
            return self.inner.read(policies, now)

        def release(self) -> None:
            self.released += 1

    daemon, clock, _, _ = daemon_factory(n=1)
    training = Releasing(daemon.training_history)
    daemon.training_history = training
    assert daemon._retrain(clock.now(), "test") is not None
    assert training.released == 1


def test_a_removed_workloads_live_error_does_not_come_back(daemon_factory: DaemonFactory) -> None:
    daemon, clock, _, _ = daemon_factory(n=2)
    for _ in range(180):  # 30 minutes: forecasts mature and are scored
        daemon.tick(clock.now())
        clock.sleep(10.0)
    web0, web1 = daemon.deps.policies
    assert web1.workload in daemon.live.error
    daemon.set_policies([web0])
    for _ in range(180):
        daemon.tick(clock.now())
        clock.sleep(10.0)
    # Before: its error came back, frozen, in its gauge and in the overall median (and drift).
    assert all(r.key != web1.workload.key for r in daemon.live.error)
    assert b'workload="Deployment/shop/web1"' not in daemon.metrics.render()
