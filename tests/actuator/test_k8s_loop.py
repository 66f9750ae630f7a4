"""The control loop drives the cluster through the journaled Actuator: plan -> journal -> apply."""

from __future__ import annotations

import numpy as np
from kubeemu import DEPLOYMENTS, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget
from forecaster import make_model
from scaleahead.loop import Deps, run_once
from scaleahead.settings import Settings
from scaleahead.types import Series
from storage import Store

T0 = 1_700_000_000.0


class RisingDemand:
    """Demand history that rises steadily: 10 s steps, strictly before ``now``."""

    def read(self, policies, now):
        n = 360
        values = np.linspace(10.0, 100.0, n)
        return {p.workload: Series("demand", now - n * 10.0, 10.0, values) for p in policies}


def test_one_cycle_scales_up_through_the_actuator_and_journals_applied(kube, tmp_path):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    pols = [policy(max_replicas=50)]
    store = Store(f"sqlite:///{tmp_path / 'loop.db'}")
    target = KubernetesTarget(kube.api_client(), pols)
    model = make_model("naive")
    model.fit([RisingDemand().read(pols, T0)[pols[0].workload]])
    deps = Deps(RisingDemand(), model, target, store, pols, actuator=Actuator(target, store, pols))
    report = run_once(deps, Settings(), T0)
    assert [r.outcome for r in report.results] == ["applied"], report.results
    replicas = kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"]
    assert replicas > 2
    rows = store.actions(plan_id=report.plan_id)
    assert [(r.state, r.to_value) for r in rows] == [("applied", str(replicas))]
    # The next cycle at the same demand is a no-op for the cluster: no write call.
    writes = len(kube.cluster.writes())
    again = run_once(deps, Settings(), T0 + 10)
    assert all(r.outcome != "applied" for r in again.results)
    assert len(kube.cluster.writes()) == writes
