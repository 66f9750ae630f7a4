"""The control loop drives the cluster through the journaled Actuator: plan -> journal -> apply."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from kubeemu import DEPLOYMENTS, deployment, policy
from sqlalchemy import select

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget
from forecaster import make_model
from scaleahead.loop import Deps, run_once
from scaleahead.settings import Settings
from scaleahead.types import Series
from storage import Store
from storage.schema import PlanRow

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


class Scaled:
    """A challenger that forecasts ``factor`` times the champion (to tell their plans apart)."""

    name = "scaled"

    def __init__(self, inner, factor):
        self.inner, self.factor = inner, factor

    def forecast(self, ref, series, origin, steps):
        from scaleahead.types import Forecast

        fc = self.inner.forecast(ref, series, origin, steps)
        return Forecast(ref, fc.origin, fc.step_s, {q: v * self.factor for q, v in fc.quantiles.items()}, "scaled")

    def forecast_many(self, items, origin, steps):  # the loop batches a challenger like the champion
        return [self.forecast(ref, series, origin, steps) for ref, series in items]


def _deps(kube, store, rollout, version=None):
    from actuator.rollouts import RolloutView

    pols = [policy(max_replicas=100)]
    target = KubernetesTarget(kube.api_client(), pols)
    model = make_model("naive")
    model.fit([RisingDemand().read(pols, T0)[pols[0].workload]])
    return Deps(
        RisingDemand(), model, target, store, pols, actuator=Actuator(target, store, pols),
        rollout=RolloutView(*rollout, challenger_version=version), challenger=Scaled(model, 2.0),
    )  # fmt: skip


def test_in_shadow_mode_the_challenger_plans_without_acting(kube, tmp_path):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    store = Store(f"sqlite:///{tmp_path / 'shadow.db'}")
    version = store.register_model("scaled", "naive", status="candidate")
    report = run_once(_deps(kube, store, ("shadow", 0.0, "s"), version), Settings(), T0)
    acted = kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"]
    assert report.shadow_plan is not None
    shadow_to = report.shadow_plan.actions[0].to_replicas
    assert shadow_to > acted  # the challenger forecasts twice the demand: it would scale further
    assert report.plan.actions[0].to_replicas == acted
    shadow_rows = [a for a in store.actions() if a.state == "dry-run"]
    assert [int(a.to_value) for a in shadow_rows] == [shadow_to]
    # The journal says whose plan it was (loop reasons audit: it read as a plain dry run), and its
    # plan names the challenger's version.
    assert [a.source for a in shadow_rows] == ["shadow"]
    assert [a.id for a in store.actions(source="shadow")] == [shadow_rows[0].id]
    assert all(a.source == "loop" for a in store.actions(source="loop"))
    with store.session() as session:
        notes = session.scalars(select(PlanRow.notes).where(PlanRow.source == "shadow")).all()
    assert notes == [{"notes": [f"shadow rollout: the challenger's plan (model version {version}); never applied"]}]


def test_a_shadow_challenger_that_would_change_nothing_journals_nothing(kube, tmp_path):
    # Its plan holds the current count: no row (they were journaled as dry runs, unlike the loop's
    # no-ops).
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    store = Store(f"sqlite:///{tmp_path / 'same.db'}")
    deps = _deps(kube, store, ("shadow", 0.0, "s"))
    planned = run_once(replace(deps, store=None), Settings(), T0, dry_run=True).plan.actions[0].to_replicas
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(planned))
    report = run_once(replace(deps, challenger=deps.forecaster), Settings(), T0)
    assert report.shadow_plan is not None and report.shadow_plan.actions[0].is_noop
    assert store.actions(source="shadow") == []


def test_a_canary_at_full_share_lets_the_challenger_drive_the_workload(kube, tmp_path):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    store = Store(f"sqlite:///{tmp_path / 'canary.db'}")
    champion_only = run_once(_deps(kube, None, ("canary", 0.0, "s")), Settings(), T0, dry_run=True)
    report = run_once(_deps(kube, store, ("canary", 1.0, "s")), Settings(), T0)
    assert report.results[0].outcome == "applied"
    assert report.plan.actions[0].to_replicas > champion_only.plan.actions[0].to_replicas
    # The decision says which arm and model made it, in the plan and the journal (loop reasons
    # audit part 2: a challenger's rows read like the champion's); the champion's say nothing.
    details = report.plan.actions[0].reason.details
    assert (details["arm"], details["model"]) == ("canary challenger", "scaled")
    (row,) = store.actions()
    assert (row.details["arm"], row.details["model"]) == ("canary challenger", "scaled")
    assert "arm" not in champion_only.plan.actions[0].reason.details


def test_run_forever_reconciles_the_journal_before_its_first_cycle(kube, tmp_path):
    from scaleahead.clock import VirtualClock
    from scaleahead.loop import run_forever
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    store = Store(f"sqlite:///{tmp_path / 'loop.db'}")
    left = Plan(T0 - 60, (ScaleTo(WorkloadRef("Deployment", "default", "web"), 2, 7, Reason("t", "t")),))
    _, ids = store.record_plan(left, source="loop")  # journaled, then the process died
    deps = _deps(kube, store, ("canary", 0.0, "s"))
    cycles = []
    run_forever(
        deps, Settings(), VirtualClock(T0), stop=lambda: bool(cycles), on_cycle=lambda r, late: cycles.append(r)
    )
    assert store.actions(state="planned") == []
    row = next(a for a in store.actions() if a.id == ids[0])
    assert row.state == "skipped" and "not applied before the restart" in row.outcome
    assert len(cycles) == 1


def test_a_short_namespace_pod_quota_is_shared_between_its_workloads_by_the_planner(kube, tmp_path):
    from kubeemu import QUOTAS

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2, labels={"app": "web"}))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2, labels={"app": "api"}))
    # 12 pods allowed, 4 used (both deployments' pods): the managed workloads may hold 12 together.
    quota = {"spec": {"hard": {"pods": "12"}}, "status": {"hard": {"pods": "12"}, "used": {"pods": "4"}}}
    kube.cluster.put(QUOTAS, "default", "pods", quota)
    pols = [policy("web", max_replicas=50), policy("api", max_replicas=50)]
    store = Store(f"sqlite:///{tmp_path / 'quota.db'}")
    target = KubernetesTarget(kube.api_client(), pols)
    model = make_model("naive")
    model.fit([RisingDemand().read(pols, T0)[pols[0].workload]])
    deps = Deps(RisingDemand(), model, target, store, pols, actuator=Actuator(target, store, pols))
    report = run_once(deps, Settings(), T0)
    # Each wants more than 10 replicas; the planner shares the 12 pods equally (equal weights and
    # priorities) instead of letting the first write take the 8 free ones.
    assert [r.outcome for r in report.results] == ["applied", "applied"], report.results
    assert [kube.cluster.get(DEPLOYMENTS, "default", n)["spec"]["replicas"] for n in ("web", "api")] == [6, 6]
    rows = store.actions(plan_id=report.plan_id)
    assert all("namespace default pod quota 12 is short of the" in r.reason for r in rows), rows
    assert "got 6 of" in rows[0].reason
    # Without reading quotas (loop.namespace_quotas false) nothing is shared: each is planned alone.
    alone = KubernetesTarget(kube.api_client(), pols, quotas=False)
    assert alone.read_state([p.workload for p in pols]).pod_quotas == {}


def test_the_loop_shares_the_configured_capacity_among_the_services(kube, tmp_path):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2, labels={"app": "web"}))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2, labels={"app": "api"}))
    pols = [policy("web", max_replicas=50), policy("api", max_replicas=50)]
    target = KubernetesTarget(kube.api_client(), pols)
    model = make_model("naive")
    model.fit([RisingDemand().read(pols, T0)[pols[0].workload]])
    deps = Deps(RisingDemand(), model, target, None, pols, actuator=Actuator(target, None, pols))
    settings = Settings.model_validate({"loop": {"capacity": {"*": 9}}})
    report = run_once(deps, settings, T0)
    # 1 + 1 floors, then 7 split 3.5 / 3.5: the half unit goes to the first by name (api).
    assert [kube.cluster.get(DEPLOYMENTS, "default", n)["spec"]["replicas"] for n in ("web", "api")] == [4, 5]
    assert any("cluster capacity 9 is short of the" in n for n in report.plan.notes)


def test_a_rollout_drives_only_the_workloads_of_its_rollout_group(kube, tmp_path):
    from actuator.rollouts import RolloutView

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2, labels={"app": "web"}))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2, labels={"app": "api"}))
    web = policy("web", max_replicas=100)
    api = policy("api", max_replicas=100)
    api = api.model_copy(update={"spec": api.spec.model_copy(update={"rollout_group": "edge"})})
    pols = [web, api]
    target = KubernetesTarget(kube.api_client(), pols)
    model = make_model("naive")
    model.fit([RisingDemand().read(pols, T0)[web.workload]])

    def cycle(view):
        deps = Deps(
            RisingDemand(), model, target, None, pols, actuator=Actuator(target, None, pols),
            rollout=view, challenger=Scaled(model, 2.0),
        )  # fmt: skip
        return {a.workload.name: a.to_replicas for a in run_once(deps, Settings(), T0, dry_run=True).plan.actions}

    champion = cycle(RolloutView("canary", 0.0, "s", "edge"))
    edge = cycle(RolloutView("canary", 1.0, "s", "edge"))  # every workload of group edge: the challenger
    assert edge["api"] > champion["api"], "the group's workload plans with the challenger"
    assert edge["web"] == champion["web"], "a workload of another group is not part of the rollout"
    everyone = cycle(RolloutView("canary", 1.0, "s"))  # no group: every workload
    assert everyone["web"] > champion["web"]


def test_a_short_namespace_cpu_quota_is_shared_in_millicores(kube, tmp_path):
    from kubeemu import QUOTAS

    sizes = {"web": "1", "api": "250m"}  # what one pod of each asks for
    for name, cpu in sizes.items():
        obj = deployment(2, labels={"app": name})
        obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
        kube.cluster.put(DEPLOYMENTS, "default", name, obj)
    # 2 pods of 1 core + 2 of 250m = 2500m used of 6 cores: the managed workloads may hold 6000m.
    quota = {"status": {"hard": {"requests.cpu": "6"}, "used": {"requests.cpu": "2500m"}}}
    kube.cluster.put(QUOTAS, "default", "cpu", quota)
    pols = [policy("web", max_replicas=50), policy("api", max_replicas=50)]
    target = KubernetesTarget(kube.api_client(), pols)
    state = target.read_state([p.workload for p in pols])
    assert state.resource_quotas == {"default": {"requests.cpu": 6000}} and state.pod_quotas == {}
    assert state.pod_shapes[pols[1].workload]["requests.cpu"] == 250
    model = make_model("naive")
    model.fit([RisingDemand().read(pols, T0)[pols[0].workload]])
    deps = Deps(RisingDemand(), model, target, None, pols, actuator=Actuator(target, None, pols))
    report = run_once(deps, Settings(), T0, dry_run=True)
    got = {a.workload.name: a.to_replicas for a in report.plan.actions}
    # Each wants more than 10 replicas; the 6000m are shared evenly in millicores (3 cores each):
    # 3 replicas of web, 12 of api, instead of web taking them first by its larger replicas.
    assert got == {"web": 3, "api": 12}, got
    assert any("namespace default's quota on requests.cpu leaves 6000m" in n for n in report.plan.notes)


def test_a_functions_warm_instances_share_the_namespace_pod_quota_with_a_service(kube, tmp_path):
    from kubeemu import KSVC, QUOTAS

    from actuator.kubernetes import MIN_SCALE

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2, labels={"app": "web"}))
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": {"metadata": {"annotations": {MIN_SCALE: "0"}}}}})
    # 3 pods allowed, web's 2 used: the managed workloads may hold 3 together.
    quota = {"spec": {"hard": {"pods": "3"}}, "status": {"hard": {"pods": "3"}, "used": {"pods": "2"}}}
    kube.cluster.put(QUOTAS, "default", "pods", quota)
    web = policy("web", max_replicas=50)
    fn = policy("fn", kind="KnativeService", warm_max=1)
    demand = fn.spec.demand.model_copy(update={"step_seconds": 60, "unit": "invocations/min"})
    fn = fn.model_copy(update={"spec": fn.spec.model_copy(update={"workload_class": "function", "demand": demand})})

    class Calls(RisingDemand):
        """web rises; fn is called every minute of the last day."""

        def read(self, policies, now):
            out = super().read(policies, now)
            out[fn.workload] = Series("demand", now - 1440 * 60.0, 60.0, np.ones(1440))
            return out

    target = KubernetesTarget(kube.api_client(), [web, fn])
    model = make_model("naive")
    model.fit([RisingDemand().read([web], T0)[web.workload]])
    store = Store(f"sqlite:///{tmp_path / 'warm.db'}")
    deps = Deps(Calls(), model, target, store, [web, fn], actuator=Actuator(target, store, [web, fn]))
    report = run_once(deps, Settings(), T0)
    # web wants more than 10 replicas, fn one warm instance: after web's minReplicas, the 2 pods
    # left are shared one each (equal priorities and weights), instead of web taking all 3 and the
    # warm pool's pod being refused by the quota.
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 2
    ann = kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"]
    assert ann[MIN_SCALE] == "1", report.results
    held = next(a for a in report.plan.actions if a.workload == web.workload)
    assert held.reason.message.startswith("hold default/web at 2: wanted "), held.reason.message
    assert "namespace default pod quota 3 is short of the" in held.reason.message
    assert [r.state for r in store.actions(plan_id=report.plan_id)] == ["applied"]  # the warm pool's
    assert any("pod quota leaves room for 3 pods of its 2 managed workloads" in n for n in report.plan.notes)


def test_a_workload_whose_deployment_cannot_be_read_is_not_planned_and_the_others_are(kube, tmp_path, caplog):
    """GET of web0's Deployment answers 500: web0 is reported under its key at stage ``state`` and
    left out of the plan (no action, no journaled row: nothing planned from an invented current
    count), with a warning naming it and the status; web1 is planned and applied as usual."""
    import logging

    from kubeemu import Fault

    kube.cluster.put(DEPLOYMENTS, "default", "web0", deployment(2, labels={"app": "web0"}))
    kube.cluster.put(DEPLOYMENTS, "default", "web1", deployment(2, labels={"app": "web1"}))
    pols = [policy("web0", max_replicas=50), policy("web1", max_replicas=50)]
    store = Store(f"sqlite:///{tmp_path / 'unread.db'}")
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=2.0)
    model = make_model("naive")
    model.fit([RisingDemand().read(pols, T0)[pols[0].workload]])
    deps = Deps(RisingDemand(), model, target, store, pols, actuator=Actuator(target, store, pols))
    kube.cluster.faults.append(Fault("GET", "/deployments/web0", status=500, times=10_000))
    caplog.set_level(logging.WARNING)
    report = run_once(deps, Settings(), T0)
    why = report.errors.get("Deployment/default/web0", "")
    assert why.startswith("state:") and "500" in why, report.errors
    assert [a.workload.name for a in report.plan.actions] == ["web1"], report.plan.actions
    assert "Deployment/default/web0" not in {ref.key for ref in report.plan.fallbacks}
    assert [(r.action.workload.name, r.outcome) for r in report.results] == [("web1", "applied")]
    assert [r.target for r in store.actions()] == ["Deployment/default/web1"]
    assert kube.cluster.get(DEPLOYMENTS, "default", "web0")["spec"]["replicas"] == 2
    assert kube.cluster.get(DEPLOYMENTS, "default", "web1")["spec"]["replicas"] > 2
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("Deployment/default/web0" in m and "500" in m for m in warned), warned
    # Once the API server answers again, web0 is planned (and scaled) like web1.
    kube.cluster.faults.clear()
    again = run_once(deps, Settings(), T0 + 10)
    assert "Deployment/default/web0" not in again.errors
    assert {a.workload.name for a in again.plan.actions} == {"web0", "web1"}
    assert kube.cluster.get(DEPLOYMENTS, "default", "web0")["spec"]["replicas"] > 2


@pytest.mark.parametrize(("web0_read", "held_as"), [(4, "as last read"), (2, "as scaleahead last wrote it")])
def test_an_unreadable_workloads_pods_stay_counted_against_the_shared_capacity(kube, tmp_path, web0_read, held_as):
    """loop.capacity '*' 9: web0 runs 4 replicas (read in the first cycle, or read at 2 and scaled
    to 4 by it), then its Deployment answers 500. Its 4 pods still run, so web1 may take only the 5
    left, not all 9; the plan's notes say why. (Until 2026-12-07 a web0 scaled 2 -> 4 held the 2
    read before the write, so web1 could take 7; loop reasons audit part 2.) Without a read since
    the start, web0's minReplicas is held instead."""
    from kubeemu import Fault

    kube.cluster.put(DEPLOYMENTS, "default", "web0", deployment(web0_read, labels={"app": "web0"}))
    kube.cluster.put(DEPLOYMENTS, "default", "web1", deployment(2, labels={"app": "web1"}))
    pols = [policy("web0", max_replicas=4, min_replicas=web0_read), policy("web1", max_replicas=50)]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=2.0)
    model = make_model("naive")
    model.fit([RisingDemand().read(pols, T0)[pols[0].workload]])
    settings = Settings.model_validate({"loop": {"capacity": {"*": 9}}})
    deps = Deps(RisingDemand(), model, target, None, pols, actuator=Actuator(target, None, pols))
    first = run_once(deps, settings, T0)
    assert kube.cluster.get(DEPLOYMENTS, "default", "web0")["spec"]["replicas"] == 4, first.results
    assert kube.cluster.get(DEPLOYMENTS, "default", "web1")["spec"]["replicas"] == 5
    kube.cluster.faults.append(Fault("GET", "/deployments/web0", status=500, times=10_000))
    # web1 is cut back to where it was: the capacity's 9 hold web0's 4 and web1's 5.
    report = run_once(deps, settings, T0 + 400)
    assert "Deployment/default/web0" in report.errors
    assert kube.cluster.get(DEPLOYMENTS, "default", "web1")["spec"]["replicas"] == 5, report.results
    note = next(n for n in report.plan.notes if n.startswith("Deployment/default/web0: its state cannot be read"))
    assert f"its 4 replicas ({held_as}) stay counted against loop.capacity['*']" in note, note
    # A new process that never read web0 holds its minReplicas for it.
    fresh = Deps(RisingDemand(), model, target, None, pols, actuator=Actuator(target, None, pols))
    again = run_once(fresh, settings, T0 + 800)
    assert any("its minReplicas: not read since the start" in n for n in again.plan.notes), again.plan.notes
    if web0_read == 4:
        assert kube.cluster.get(DEPLOYMENTS, "default", "web1")["spec"]["replicas"] == 5, again.results
