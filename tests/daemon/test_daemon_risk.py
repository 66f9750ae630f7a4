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


def test_pruning_removes_old_steps_of_workloads_without_a_policy(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, _, store = daemon_factory(n=1)
    (policy,) = daemon.deps.policies
    day = 86400.0
    now = clock.now()
    retention = daemon.settings.jobs.plan_retention_days * day
    old = now - retention - day
    store.set_risk_factors(
        {
            policy.workload.key: (2, 125.0, "a"),  # its policy is there: kept however old (written when it moves)
            "Deployment/shop/gone": (3, 156.25, "b"),  # no policy, older than the retention: deleted
            "Deployment/shop/theirs": (1, 100.0, "c"),  # another shard's: kept
        },
        old,
    )
    store.set_risk_factors({"Deployment/shop/recent": (1, 100.0, "d")}, now - day)  # within the retention
    daemon.deps.risk.owns = lambda key: key != "Deployment/shop/theirs"
    out = daemon.prune(now)
    assert out["risk_factors"] == 1
    assert store.risk_factors() == {policy.workload.key: 2, "Deployment/shop/theirs": 1, "Deployment/shop/recent": 1}


def test_a_shard_removes_only_its_own_workloads_recorded_steps(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`run --shard i/N`: a step of a workload without a policy goes only if the workload is this shard's."""
    import json
    import subprocess
    import sys

    from scaleahead.policy import parse_policies
    from scaleahead.sharding import shard_of
    from storage import Store
    from tests.daemon.test_run_cli import ENV, EXAMPLE

    shard = shard_of(parse_policies(EXAMPLE.read_text())[0].workload.key, 2)
    names = [f"Deployment/shop/gone{i}" for i in range(20)]
    ours = next(n for n in names if shard_of(n, 2) == shard)
    theirs = next(n for n in names if shard_of(n, 2) != shard)
    db = f"sqlite:///{tmp_path / 'shard.db'}"
    store = Store(db)
    store.set_risk_factors({ours: (2, 125.0, "a"), theirs: (3, 156.25, "b")}, 0.0)
    store.close()
    out = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s",
         "--target", "memory", "--db", db, "--once", "--virtual", "--shard", f"{shard}/2"],
        capture_output=True, text=True, timeout=300, env=ENV,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"risk adaptation: {ours} has no policy: its recorded step 2 is removed" in json.loads(out.stdout)["notes"]
    assert Store(db).risk_factors() == {theirs: 3}
