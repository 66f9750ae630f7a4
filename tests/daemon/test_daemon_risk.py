"""The daemon and the risk adaptation's recorded steps (planner.risk, table risk_factors)."""

from __future__ import annotations


class Toggle:
    """Leadership switched by the test."""

    def __init__(self) -> None:
        self.leading = True

    def is_leader(self, now: float) -> bool:
        return self.leading

    def release(self) -> None:
        pass


def test_a_replica_that_leads_again_resumes_the_step_the_other_leader_recorded(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    lease = Toggle()
    daemon, clock, _, store = daemon_factory(n=1, leadership=lease)
    (policy,) = daemon.deps.policies
    ref, base = policy.workload, policy.spec.objective.slo_risk
    daemon.run(lambda: False, max_ticks=3)
    assert daemon.deps.risk.restored and daemon.deps.risk.factor(ref) == 1.0
    lease.leading = False
    daemon.run(lambda: False, max_ticks=3)
    # meanwhile the other replica leads and raises the service three steps
    store.set_risk_factors({ref.key: (3, base * 1.25**3)}, clock.now())
    lease.leading = True
    result = daemon.tick(clock.now())
    assert result.report is not None and result.report.slo_risk[ref] == base * 1.25**3
    assert store.risk_factors() == {ref.key: 3}  # not overwritten with this replica's stale step
