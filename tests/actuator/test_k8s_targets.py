"""Every target kind through the official client against the emulated API server."""

from __future__ import annotations

from kubeemu import DEPLOYMENTS, HPAS, KSVC, PDBS, PODS, QUOTAS, STATEFULSETS, Fault, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import MIN_SCALE, KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import MovePod, Plan, Reason, ScaleTo, SetWarmPool, WorkloadRef

R = Reason("test", "because the test says so")
NOW = 1_000_000.0
#: The API server's answer when a PodDisruptionBudget refuses an eviction (429).
PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


def scale(kind: str, name: str, frm: int, to: int) -> ScaleTo:
    return ScaleTo(WorkloadRef(kind, "default", name), frm, to, R)


def make(kube, policies, **cfg) -> Actuator:
    target = KubernetesTarget(kube.api_client(), policies, timeout_s=2.0)
    return Actuator(target, None, policies, SafetyConfig(**cfg))


def test_deployment_replicas_are_set_through_the_scale_subresource(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    results = make(kube, [policy()]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 5),)), NOW)
    assert [r.outcome for r in results] == ["applied"], results
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 5
    assert kube.cluster.writes() == [("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale")]


def test_statefulset_replicas_are_set_through_the_scale_subresource(kube):
    kube.cluster.put(STATEFULSETS, "default", "db", deployment(3) | {"kind": "StatefulSet"})
    pol = policy("db", kind="StatefulSet")
    results = make(kube, [pol]).apply_plan(Plan(NOW, (scale("StatefulSet", "db", 3, 4),)), NOW)
    assert results[0].outcome == "applied", results
    assert kube.cluster.get(STATEFULSETS, "default", "db")["spec"]["replicas"] == 4
    assert ("PATCH", "/apis/apps/v1/namespaces/default/statefulsets/db/scale") in kube.cluster.writes()


def test_floor_mode_sets_the_hpa_min_replicas_and_leaves_the_deployment_alone(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(4))
    kube.cluster.put(HPAS, "default", "web-hpa", {"spec": {"minReplicas": 2, "maxReplicas": 10}})
    pol = policy(mode="floor", hpa="web-hpa")
    results = make(kube, [pol]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 6),)), NOW)
    assert results[0].outcome == "applied", results
    assert kube.cluster.get(HPAS, "default", "web-hpa")["spec"]["minReplicas"] == 6
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 4


def test_floor_above_the_hpa_max_is_capped_at_the_hpa_max(kube):
    kube.cluster.put(HPAS, "default", "web-hpa", {"spec": {"minReplicas": 2, "maxReplicas": 8}})
    pol = policy(mode="floor", hpa="web-hpa")
    results = make(kube, [pol]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 12),)), NOW)
    assert results[0].outcome == "applied"
    assert "capped at the HPA's maxReplicas 8" in results[0].detail
    assert kube.cluster.get(HPAS, "default", "web-hpa")["spec"]["minReplicas"] == 8


def test_knative_warm_pool_sets_the_min_scale_annotation(kube):
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": {"metadata": {"annotations": {}}}}})
    pol = policy("fn", kind="KnativeService")
    action = SetWarmPool(WorkloadRef("KnativeService", "default", "fn"), 0, 2, 600.0, R)
    results = make(kube, [pol]).apply_plan(Plan(NOW, (action,)), NOW)
    assert results[0].outcome == "applied", results
    ann = kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"]
    assert ann[MIN_SCALE] == "2"


def test_headroom_creates_a_placeholder_deployment_of_pause_pods_at_low_priority_then_scales_it(kube):
    ref = WorkloadRef("Headroom", "default", "headroom")
    act = make(kube, [])
    assert act.apply_plan(Plan(NOW, (ScaleTo(ref, 0, 3, R),)), NOW)[0].outcome == "applied"
    obj = kube.cluster.get(DEPLOYMENTS, "default", "headroom")
    assert obj["spec"]["replicas"] == 3
    assert obj["spec"]["template"]["spec"]["priorityClassName"] == "scaleahead-headroom"
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"].startswith("registry.k8s.io/pause")
    assert act.apply_plan(Plan(NOW, (ScaleTo(ref, 3, 1, R),)), NOW)[0].outcome == "applied"
    assert kube.cluster.get(DEPLOYMENTS, "default", "headroom")["spec"]["replicas"] == 1


def test_headroom_never_takes_over_a_deployment_that_is_not_a_placeholder(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    res = make(kube, []).apply_plan(Plan(NOW, (ScaleTo(WorkloadRef("Headroom", "default", "web"), 2, 5, R),)), NOW)
    assert res[0].outcome == "skipped"
    assert "not a headroom placeholder" in res[0].detail
    assert kube.cluster.writes() == []


def _pod(node: str, owned: bool) -> dict:
    meta = {"labels": {"app": "web"}}
    if owned:
        meta["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": "web-1", "controller": True, "apiVersion": "apps/v1", "uid": "u"}
        ]
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}


def test_a_bare_pod_move_evicts_it_and_recreates_it_bound_to_the_planned_node(kube):
    kube.cluster.put(PODS, "default", "p1", _pod("n1", owned=False))
    kube.cluster.put(
        PDBS,
        "default",
        "web",
        {"spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}},
    )
    move = MovePod("default", "p1", "n1", "n2", R)
    res = make(kube, []).apply_plan(Plan(NOW, (move,)), NOW)
    assert res[0].outcome == "applied", res
    assert kube.cluster.get(PODS, "default", "p1") is None
    assert kube.cluster.get(PODS, "default", "p1-moved")["spec"]["nodeName"] == "n2"
    assert ("POST", "/api/v1/namespaces/default/pods/p1/eviction") in kube.cluster.writes()


def test_a_pod_move_refused_by_its_pdb_is_skipped_with_the_reason(kube):
    kube.cluster.put(PODS, "default", "p1", _pod("n1", owned=True))
    kube.cluster.put(
        PDBS,
        "default",
        "web",
        {"spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 0}},
    )
    res = make(kube, []).apply_plan(Plan(NOW, (MovePod("default", "p1", "n1", "n2", R),)), NOW)
    assert res[0].outcome == "skipped"
    assert "PodDisruptionBudget" in res[0].detail
    assert kube.cluster.get(PODS, "default", "p1") is not None


def test_an_eviction_answered_429_by_the_api_is_skipped_and_the_rest_of_the_plan_goes_on(kube):
    kube.cluster.put(PODS, "default", "p1", _pod("n1", owned=True))
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.faults.append(Fault("POST", "/pods/p1/eviction", status=429, message=PDB_REFUSAL))
    plan = Plan(NOW, (MovePod("default", "p1", "n1", "n2", R), scale("Deployment", "web", 2, 3)))
    res = make(kube, [policy()]).apply_plan(plan, NOW)
    assert [r.outcome for r in res] == ["skipped", "applied"]
    assert "429" in res[0].detail and "Pod/default/p1" in res[0].detail


def test_a_429_on_an_eviction_that_names_no_disruption_budget_is_throttling_and_fails(kube):
    """API Priority and Fairness answers 429 "Too many requests" to any request, evictions too."""
    kube.cluster.put(PODS, "default", "p1", _pod("n1", owned=True))
    kube.cluster.faults.append(
        Fault("POST", "/pods/p1/eviction", status=429, message="Too many requests, please try again later.")
    )
    (res,) = make(kube, []).apply_plan(Plan(NOW, (MovePod("default", "p1", "n1", "n2", R),)), NOW)
    assert res.outcome == "failed", "retried next cycle, and counted"
    assert "throttling" in res.detail and "PodDisruptionBudget" not in res.detail
    assert kube.cluster.get(PODS, "default", "p1") is not None


def test_a_429_on_a_scale_write_is_the_api_servers_throttling_not_a_disruption_budget(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web", status=429))
    (res,) = make(kube, [policy()]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 3),)), NOW)
    assert res.outcome == "failed", "retried next cycle, and counted"
    assert "throttling" in res.detail and "PodDisruptionBudget" not in res.detail


def test_a_throttling_429_with_retry_after_fails_with_the_wait_it_asked_for(kube):
    """The API server's 429 carries ``Retry-After`` (and ``details.retryAfterSeconds``): the result
    says the wait, and carries it for the daemon's back-off (docs/operations.md)."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web", status=429, retry_after=12))
    (res,) = make(kube, [policy()]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 3),)), NOW)
    assert res.outcome == "failed"
    assert res.retry_after_s == 12.0
    assert "throttling requests (429 on 'patch') and asked to wait 12 s" in res.detail, res.detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 2


def test_a_throttling_429_without_retry_after_carries_no_wait(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web", status=429))
    (res,) = make(kube, [policy()]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 3),)), NOW)
    assert res.outcome == "failed" and res.retry_after_s is None
    assert "asked to wait" not in res.detail


def test_a_scale_up_is_limited_by_the_namespace_pod_quota(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(
        QUOTAS,
        "default",
        "q",
        {"spec": {"hard": {"pods": "10"}}, "status": {"hard": {"pods": "10"}, "used": {"pods": "8"}}},
    )
    res = make(kube, [policy()]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 9),)), NOW)
    assert res[0].outcome == "applied"
    assert "pod quota" in res[0].detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 4


def _pod_quota(used: int, hard: int = 10) -> dict:
    return {"spec": {"hard": {"pods": str(hard)}}, "status": {"hard": {"pods": str(hard)}, "used": {"pods": str(used)}}}


def test_a_knative_scale_to_is_limited_by_the_namespace_pod_quota(kube):
    """A service's ScaleTo on a Knative Service raises its min-scale, which creates pods: like a warm
    pool's increase it is limited to the pods the quota still allows (before 2026-12-05 night it was
    written as planned and the API server's quota admission refused the pods, no outcome saying so)."""
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": {"metadata": {"annotations": {MIN_SCALE: "1"}}}}})
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(8))  # two more pods allowed
    (res,) = make(kube, [policy("fn", "KnativeService")]).apply_plan(
        Plan(NOW, (scale("KnativeService", "fn", 1, 6),)), NOW
    )
    assert res.outcome == "applied" and "pod quota (2 more pods allowed)" in res.detail, res
    ann = kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"]
    assert ann[MIN_SCALE] == "3"
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(10))
    (res,) = make(kube, [policy("fn", "KnativeService")]).apply_plan(
        Plan(NOW, (scale("KnativeService", "fn", 3, 4),)), NOW
    )
    assert res.outcome == "skipped" and "allows no more pods" in res.detail, res
    # Down is never limited.
    (res,) = make(kube, [policy("fn", "KnativeService")]).apply_plan(
        Plan(NOW, (scale("KnativeService", "fn", 3, 2),)), NOW
    )
    assert res.outcome == "applied", res


def test_an_hpa_floor_is_limited_by_the_pods_the_quota_leaves_above_those_the_hpa_runs(kube):
    """A floor above the HPA's current replicas makes it create pods, which the quota admission
    refused without any outcome saying so (before 2026-12-05 evening the floor was written as planned)."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(4))
    hpa = {"spec": {"minReplicas": 2, "maxReplicas": 20}, "status": {"currentReplicas": 4}}
    kube.cluster.put(HPAS, "default", "web-hpa", hpa)
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(9))  # one more pod allowed
    pols = [policy(mode="floor", hpa="web-hpa")]
    (res,) = make(kube, pols).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 8),)), NOW)
    assert res.outcome == "applied", res
    assert "pod quota (1 more pods allowed)" in res.detail, res.detail
    assert kube.cluster.get(HPAS, "default", "web-hpa")["spec"]["minReplicas"] == 5  # 4 running + 1


def test_a_full_quota_still_lets_an_hpa_floor_rise_to_the_pods_it_runs(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(4))
    hpa = {"spec": {"minReplicas": 2, "maxReplicas": 20}, "status": {"currentReplicas": 4}}
    kube.cluster.put(HPAS, "default", "web-hpa", hpa)
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(10))
    pols = [policy(mode="floor", hpa="web-hpa")]
    (res,) = make(kube, pols).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 8),)), NOW)
    assert res.outcome == "applied" and "(0 more pods allowed)" in res.detail, res
    assert kube.cluster.get(HPAS, "default", "web-hpa")["spec"]["minReplicas"] == 4
    # a floor at or below what the HPA runs creates no pod: not limited, the quota not even read
    kube.cluster.put(HPAS, "default", "web-hpa", hpa)
    before = len(kube.cluster.calls())
    (res,) = make(kube, pols).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 4),)), NOW)
    assert res.outcome == "applied" and "quota" not in res.detail, res
    assert not any("resourcequotas" in path for _, path in kube.cluster.calls()[before:])


def test_an_hpa_floor_above_the_pods_the_hpa_runs_counts_the_pods_it_still_has_to_create(kube):
    """currentReplicas 3 under minReplicas 5: two pods are still to come and take the quota's room."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3))
    hpa = {"spec": {"minReplicas": 5, "maxReplicas": 20}, "status": {"currentReplicas": 3}}
    kube.cluster.put(HPAS, "default", "web-hpa", hpa)
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(8))
    (res,) = make(kube, [policy(mode="floor", hpa="web-hpa")]).apply_plan(
        Plan(NOW, (scale("Deployment", "web", 5, 9),)), NOW
    )
    assert res.outcome == "skipped" and "allows no more pods" in res.detail, res
    assert kube.cluster.get(HPAS, "default", "web-hpa")["spec"]["minReplicas"] == 5


def test_an_hpa_floor_without_status_counts_from_its_min_replicas(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(HPAS, "default", "web-hpa", {"spec": {"minReplicas": 2, "maxReplicas": 20}})
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(8))
    (res,) = make(kube, [policy(mode="floor", hpa="web-hpa")]).apply_plan(
        Plan(NOW, (scale("Deployment", "web", 2, 9),)), NOW
    )
    assert res.outcome == "applied" and "(2 more pods allowed)" in res.detail, res
    assert kube.cluster.get(HPAS, "default", "web-hpa")["spec"]["minReplicas"] == 4
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(10))
    (res,) = make(kube, [policy(mode="floor", hpa="web-hpa")]).apply_plan(
        Plan(NOW, (scale("Deployment", "web", 4, 9),)), NOW
    )
    assert res.outcome == "skipped" and "allows no more pods" in res.detail, res


def test_headroom_placeholders_are_limited_by_the_quota_created_or_scaled(kube):
    """Placeholder pods are pods in the namespace, under its quotas (before 2026-12-05 evening the
    replicas were written as planned and the quota admission refused the pods)."""
    ref = WorkloadRef("Headroom", "default", "spare")
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(8))
    (res,) = make(kube, []).apply_plan(Plan(NOW, (ScaleTo(ref, 0, 5, R),)), NOW)
    assert res.outcome == "applied" and "(2 more pods allowed)" in res.detail, res
    assert kube.cluster.get(DEPLOYMENTS, "default", "spare")["spec"]["replicas"] == 2
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(9))
    (res,) = make(kube, []).apply_plan(Plan(NOW, (ScaleTo(ref, 2, 6, R),)), NOW)
    assert res.outcome == "applied" and "(1 more pods allowed)" in res.detail, res
    assert kube.cluster.get(DEPLOYMENTS, "default", "spare")["spec"]["replicas"] == 3


def test_headroom_placeholders_count_their_cpu_requests_in_a_cpu_quota(kube):
    ref = WorkloadRef("Headroom", "default", "spare")
    hard = {"requests.cpu": "2"}
    cpu = {"spec": {"hard": hard}, "status": {"hard": hard, "used": {"requests.cpu": "500m"}}}
    kube.cluster.put(QUOTAS, "default", "q", cpu)
    (res,) = make(kube, []).apply_plan(Plan(NOW, (ScaleTo(ref, 0, 50, R),)), NOW)
    assert res.outcome == "applied" and "ResourceQuota on requests.cpu (3 more pods allowed)" in res.detail, res
    assert kube.cluster.get(DEPLOYMENTS, "default", "spare")["spec"]["replicas"] == 3  # 1.5 cores left / 500m


def test_read_state_reports_replicas_ready_replicas_and_warm_instances(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(4, ready=3))
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": {"metadata": {"annotations": {MIN_SCALE: "2"}}}}})
    target = KubernetesTarget(kube.api_client(), [])
    web, fn, gone = (
        WorkloadRef("Deployment", "default", "web"),
        WorkloadRef("KnativeService", "default", "fn"),
        WorkloadRef("Deployment", "default", "gone"),
    )
    state = target.read_state([web, fn, gone])
    assert (state.workloads[web].replicas, state.workloads[web].ready_replicas) == (4, 3)
    assert state.workloads[fn].warm_instances == 2
    assert gone not in state.workloads


def test_read_state_reports_a_deployment_it_cannot_read_as_unreadable_with_the_status(kube):
    """A 500 on GET of one Deployment: it is not left out silently (the loop would plan it from no
    state), it is named in ``unreadable`` with the status; the other workload is read as usual."""
    kube.cluster.put(DEPLOYMENTS, "default", "web0", deployment(2))
    kube.cluster.put(DEPLOYMENTS, "default", "web1", deployment(3))
    kube.cluster.faults.append(Fault("GET", "/deployments/web0", status=500, times=10))
    web0, web1, gone = (WorkloadRef("Deployment", "default", n) for n in ("web0", "web1", "gone"))
    state = KubernetesTarget(kube.api_client(), [], timeout_s=2.0).read_state([web0, web1, gone])
    assert web0 not in state.workloads
    assert state.workloads[web1].replicas == 3
    assert set(state.unreadable) == {web0, gone}
    assert "Deployment/default/web0" in state.unreadable[web0] and "500" in state.unreadable[web0]
    assert "does not exist (404)" in state.unreadable[gone]


def test_the_plain_target_protocol_applies_one_action_and_fails_on_a_missing_object(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    target = KubernetesTarget(kube.api_client(), [policy()])
    assert target.apply(scale("Deployment", "web", 2, 3)).outcome == "applied"
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 3
    missing = target.apply(scale("Deployment", "nope", 1, 3))
    assert missing.outcome == "failed" and "does not exist (404)" in missing.detail


def test_a_missing_hpa_in_floor_mode_is_named_in_the_failure(kube):
    pol = policy(mode="floor", hpa="web-hpa")
    res = make(kube, [pol]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 6),)), NOW)
    assert res[0].outcome == "failed"
    assert "HorizontalPodAutoscaler/default/web-hpa does not exist (404)" in res[0].detail


def test_rbac_forbidding_a_read_names_the_get_verb_and_the_resource(kube):
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": {"metadata": {"annotations": {}}}}})
    rbac = (  # what the API server says when RBAC refuses
        'services.serving.knative.dev "fn" is forbidden: User "system:serviceaccount:scaleahead-system:scaleahead" '
        'cannot get resource "services" in API group "serving.knative.dev" in the namespace "default"'
    )
    kube.cluster.faults.append(Fault("GET", "/services/fn", status=403, message=rbac))
    action = SetWarmPool(WorkloadRef("KnativeService", "default", "fn"), 0, 2, 600.0, R)
    res = make(kube, [policy("fn", kind="KnativeService")]).apply_plan(Plan(NOW, (action,)), NOW)
    assert res[0].outcome == "failed"
    assert "RBAC forbids 'get' on services.serving.knative.dev in namespace default" in res[0].detail


def test_read_state_reports_what_the_namespace_pod_quotas_leave_the_managed_workloads(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2) | {"status": {"replicas": 1}})
    kube.cluster.put(DEPLOYMENTS, "other", "batch", deployment(4))
    kube.cluster.put(DEPLOYMENTS, "full", "db", deployment(5))
    pods = {"spec": {"hard": {"pods": "20"}}, "status": {"hard": {"pods": "20"}, "used": {"pods": "9"}}}
    counted = {"status": {"hard": {"count/pods": "15", "cpu": "8"}, "used": {"count/pods": "12"}}}
    over = {"status": {"hard": {"pods": "4"}, "used": {"pods": "6"}}}  # lowered below what runs
    cpu_only = {"status": {"hard": {"cpu": "8"}, "used": {"cpu": "2"}}}
    kube.cluster.put(QUOTAS, "default", "pods", pods)
    kube.cluster.put(QUOTAS, "default", "counted", counted)
    kube.cluster.put(QUOTAS, "full", "over", over)
    kube.cluster.put(QUOTAS, "other", "cpu", cpu_only)
    refs = [
        WorkloadRef("Deployment", "default", "web"),
        WorkloadRef("Deployment", "default", "api"),
        WorkloadRef("Deployment", "other", "batch"),
        WorkloadRef("Deployment", "full", "db"),
    ]
    state = KubernetesTarget(kube.api_client(), []).read_state(refs)
    # default: the tighter quota leaves 3 free, plus the 3 + 1 pods web and api have (status.replicas);
    # full: over its limit, 0 free plus db's 5; other: no quota on pods, so no entry.
    assert state.pod_quotas == {"default": 7, "full": 5}
    # Quotas that cannot be read (here: 403) leave the namespace out; the workloads are still read.
    kube.cluster.faults.append(Fault("GET", "/namespaces/default/resourcequotas", status=403, times=5))
    state = KubernetesTarget(kube.api_client(), []).read_state(refs)
    assert state.pod_quotas == {"full": 5} and len(state.workloads) == 4


def test_a_scale_up_is_limited_by_the_cpu_and_memory_the_namespace_quota_leaves(kube):
    web = deployment(2)
    web["spec"]["template"]["spec"]["containers"] = [
        {"name": "app", "image": "x", "resources": {"requests": {"cpu": "400m", "memory": "256Mi"}}},
        {"name": "sidecar", "image": "y", "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}},
    ]  # one pod asks for 500m and 320Mi (the sidecar's request defaults to its limit)
    kube.cluster.put(DEPLOYMENTS, "default", "web", web)
    cpu = {"status": {"hard": {"requests.cpu": "4", "pods": "50"}, "used": {"requests.cpu": "2500m", "pods": "5"}}}
    kube.cluster.put(QUOTAS, "default", "cpu", cpu)  # 1500m left: 3 more pods
    res = make(kube, [policy()]).apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 9),)), NOW)
    assert res[0].outcome == "applied"
    assert "limited by the namespace's ResourceQuota on requests.cpu (3 more pods allowed)" in res[0].detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 5
    # A memory quota in a second ResourceQuota binds tighter: 400Mi left is 1 pod of 320Mi, while
    # the CPU's 1000m left would take 2 pods of 500m.
    mem = {"status": {"hard": {"memory": "2Gi"}, "used": {"memory": "1648Mi"}}}
    kube.cluster.put(QUOTAS, "default", "mem", mem)
    cpu["status"]["used"]["requests.cpu"] = "3"
    kube.cluster.put(QUOTAS, "default", "cpu", cpu)
    res = make(kube, [policy()]).apply_plan(Plan(NOW, (scale("Deployment", "web", 5, 9),)), NOW)
    assert "ResourceQuota on requests.memory (1 more pods allowed)" in res[0].detail, res[
        0
    ].detail  # "memory" is the requests
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 6
    kube.cluster.put(QUOTAS, "default", "mem", {"status": {"hard": {"memory": "2Gi"}, "used": {"memory": "0"}}})
    # Nothing left of the CPU: the scale-up is skipped, and says which quota.
    cpu["status"]["used"]["requests.cpu"] = "4"
    kube.cluster.put(QUOTAS, "default", "cpu", cpu)
    res = make(kube, [policy()]).apply_plan(Plan(NOW, (scale("Deployment", "web", 6, 9),)), NOW)
    assert res[0].outcome == "skipped"
    assert "ResourceQuota on requests.cpu allows no more pods" in res[0].detail


def test_pod_shape_sums_containers_and_takes_at_least_the_largest_init_container():
    from actuator.kubernetes import pod_shape

    template = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"cpu": "1"}}},
                {"resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}],
        }
    }
    assert pod_shape(template) == {
        "requests.cpu": 2000,  # the init container's 2 cores outweigh 250m + 500m
        "requests.memory": 1152,
        "limits.cpu": 1500,
        "limits.memory": 1024,
    }


def test_pod_shape_counts_native_sidecars_overhead_and_pod_level_resources_as_quotas_do():
    """The quota evaluator counts a pod as kube-scheduler does (``resourcehelper.PodRequests`` and
    ``PodLimits``): a native sidecar (Istio's, with ``restartPolicy: Always``) runs beside the
    containers, a RuntimeClass's overhead is added to requests and limits, and a pod-level request
    is a floor. Before, a mesh sidecar and a Kata overhead were left out, so the planner saw room in
    a quota the API server then refused the pods for."""
    from actuator.kubernetes import pod_shape

    sidecar = {
        "name": "istio-proxy",
        "restartPolicy": "Always",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
    }
    template = {
        "spec": {
            "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1"}}}],
            "initContainers": [sidecar, {"name": "migrate", "resources": {"requests": {"cpu": "1", "memory": "1M"}}}],
            "overhead": {"cpu": "250m", "memory": "160Mi"},
        }
    }
    assert pod_shape(template) == {
        "requests.cpu": 1350,  # the migration (1 core) beside the sidecar started before it, + overhead
        "requests.memory": 384 + 160,  # 256Mi + 128Mi beside each other, + overhead
        "limits.cpu": 3250,  # 1 + 2 cores, + overhead
        "limits.memory": 1024 + 160,  # only the sidecar sets a memory limit, + overhead
    }
    # a pod-level request is at least what the pod asks; 1M (bytes) rounds up to a whole MiB
    pod_level = {
        "spec": {"containers": [{"resources": {"requests": {"memory": "1M"}}}], "resources": {"requests": {"cpu": "3"}}}
    }
    assert pod_shape(pod_level)["requests.cpu"] == 3000
    assert pod_shape(pod_level)["requests.memory"] == 1


def test_the_pod_size_read_by_read_state_spares_the_scale_up_a_read_of_the_template(kube):
    web = deployment(2)
    web["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    kube.cluster.put(DEPLOYMENTS, "default", "web", web)
    kube.cluster.put(QUOTAS, "default", "cpu", {"status": {"hard": {"cpu": "2"}, "used": {"cpu": "1"}}})
    actuator = make(kube, [policy()])
    actuator.target.read_state([WorkloadRef("Deployment", "default", "web")])
    before = len(kube.cluster.calls())
    res = actuator.apply_plan(Plan(NOW, (scale("Deployment", "web", 2, 9),)), NOW)
    assert "ResourceQuota on requests.cpu (2 more pods allowed)" in res[0].detail
    gets = [p for m, p in kube.cluster.calls()[before:] if m == "GET" and p.endswith("/deployments/web")]
    assert gets == [], "the template was not read again"


def test_knative_warm_instances_count_in_the_namespace_quotas_with_their_queue_proxy(kube):
    template = {
        "metadata": {"annotations": {MIN_SCALE: "2"}},
        "spec": {"containers": [{"image": "fn", "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}}}]},
    }
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": template}})
    sidecar = "queue.sidecar.serving.knative.dev/"
    ann = {MIN_SCALE: "1", f"{sidecar}cpu-resource-request": "50m", f"{sidecar}memory-resource-limit": "64Mi"}
    sized = {"metadata": {"annotations": ann}, "spec": {"containers": [{"image": "g"}]}}
    kube.cluster.put(KSVC, "default", "fn2", {"spec": {"template": sized}})
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3))
    used = {"pods": "8", "requests.cpu": "1"}
    kube.cluster.put(QUOTAS, "default", "q", {"status": {"hard": {"pods": "10", "requests.cpu": "2"}, "used": used}})
    fn, fn2, web = (
        WorkloadRef("KnativeService", "default", "fn"),
        WorkloadRef("KnativeService", "default", "fn2"),
        WorkloadRef("Deployment", "default", "web"),
    )
    state = KubernetesTarget(kube.api_client(), []).read_state([fn, fn2, web])
    # The container's 200m plus Knative's default 25m for its queue-proxy; fn2's sidecar from its
    # annotations (a memory request defaults to the limit, as for any container).
    assert state.pod_shapes[fn] == {"requests.cpu": 225, "requests.memory": 128, "limits.cpu": 0, "limits.memory": 0}
    assert state.pod_shapes[fn2] == {"requests.cpu": 50, "requests.memory": 64, "limits.cpu": 0, "limits.memory": 64}
    # 2 pods left, plus web's 3 and the 2 + 1 warm instances the functions hold now.
    assert state.pod_quotas == {"default": 8}
    # 1000m left, plus the 2 x 225m and 1 x 50m the warm instances ask for (web asks for none).
    assert state.resource_quotas == {"default": {"requests.cpu": 1500}}


def test_a_warm_pool_increase_is_limited_by_the_namespace_quota(kube):
    template = {"spec": {"containers": [{"image": "fn", "resources": {"requests": {"cpu": "475m"}}}]}}
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": template}})
    quota = {"status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "3"}}}  # 2 pods of 500m
    kube.cluster.put(QUOTAS, "default", "q", quota)
    pol = policy("fn", kind="KnativeService")
    warm = pol.spec.warm_pool.model_copy(update={"enabled": True, "max_instances": 5})
    pol = pol.model_copy(update={"spec": pol.spec.model_copy(update={"warm_pool": warm})})
    action = SetWarmPool(WorkloadRef("KnativeService", "default", "fn"), 0, 5, 600.0, R)
    res = make(kube, [pol]).apply_plan(Plan(NOW, (action,)), NOW)
    assert res[0].outcome == "applied", res
    assert "limited by the namespace's ResourceQuota on requests.cpu (2 more pods allowed)" in res[0].detail
    ann = kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"]
    assert ann[MIN_SCALE] == "2"
    kube.cluster.put(QUOTAS, "default", "q", {"status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "4"}}})
    res = make(kube, [pol]).apply_plan(Plan(NOW, (SetWarmPool(action.workload, 2, 3, 600.0, R),)), NOW)
    assert res[0].outcome == "skipped" and "ResourceQuota on requests.cpu allows no more pods" in res[0].detail


def test_a_bare_pod_is_copied_before_it_is_evicted_so_a_failure_never_loses_it(kube, tmp_path):
    from storage import Store

    kube.cluster.put(PODS, "default", "p1", _pod("n1", owned=False))
    move = MovePod("default", "p1", "n1", "n2", R)
    # the copy cannot be made: nothing is evicted, the move is retried
    kube.cluster.faults.append(Fault("POST", "/namespaces/default/pods", status=500))
    res = make(kube, []).apply_plan(Plan(NOW, (move,)), NOW)
    assert res[0].outcome == "failed"
    assert kube.cluster.get(PODS, "default", "p1") is not None
    assert not [w for w in kube.cluster.writes() if w[1].endswith("/eviction")]
    # the eviction is refused after the copy was made: the copy goes again, the pod stays
    kube.cluster.faults.append(Fault("POST", "/eviction", status=429, message=PDB_REFUSAL))
    res = make(kube, []).apply_plan(Plan(NOW + 10, (move,)), NOW + 10)
    assert res[0].outcome == "skipped" and "eviction refused (429)" in res[0].detail
    assert kube.cluster.get(PODS, "default", "p1") is not None
    assert kube.cluster.get(PODS, "default", "p1-moved") is None
    # and then it goes through
    assert make(kube, []).apply_plan(Plan(NOW + 20, (move,)), NOW + 20)[0].outcome == "applied"
    assert kube.cluster.get(PODS, "default", "p1") is None
    assert kube.cluster.get(PODS, "default", "p1-moved")["spec"]["nodeName"] == "n2"
    # a planned move whose pod is gone when the journal is reconciled after a restart was applied
    store = Store(f"sqlite:///{tmp_path / 'j.db'}")
    (aid,) = store.record_plan(Plan(NOW, (move,)), source="loop", state="planned")[1]
    target = KubernetesTarget(kube.api_client(), [], timeout_s=2.0)
    done = {i: (state, why) for i, state, why in Actuator(target, store, []).reconcile(NOW + 30)}
    # (until 2026-12-07 it said "evicted before the restart", also of a pod someone else deleted)
    assert done[aid] == (
        "applied",
        "reconciled after restart: the pod is gone; scaleahead's eviction before the restart or someone else's "
        "(pod moves record no write-ahead intent)",
    )
    store.close()


def test_reconcile_says_where_a_moved_pod_is_and_does_not_claim_the_eviction(kube, tmp_path):
    # Journaled moves, then the process died before any eviction; someone else moved one pod and
    # left one. Until 2026-12-07 these read "shows the change (spec.nodeName=0)" and "not applied
    # (spec.nodeName=1)": the field is a flag, not a node (loop reasons audit).
    from storage import Store

    kube.cluster.put(PODS, "default", "moved", _pod("n2", owned=False))
    kube.cluster.put(PODS, "default", "elsewhere", _pod("n3", owned=False))
    kube.cluster.put(PODS, "default", "same", _pod("n1", owned=False))
    moves = tuple(MovePod("default", p, "n1", "n2", R) for p in ("moved", "elsewhere", "same"))
    store = Store(f"sqlite:///{tmp_path / 'm.db'}")
    ids = store.record_plan(Plan(NOW, moves), source="loop", state="planned")[1]
    target = KubernetesTarget(kube.api_client(), [], timeout_s=2.0)
    done = {i: (state, why) for i, state, why in Actuator(target, store, []).reconcile(NOW + 30)}
    tail = "scaleahead's eviction before the restart or someone else's (pod moves record no write-ahead intent)"
    assert done[ids[0]] == (
        "applied",
        f"reconciled after restart: pod default/moved is no longer on n1 (on n2, the planned node); {tail}",
    )
    assert done[ids[1]] == (
        "applied",
        f"reconciled after restart: pod default/elsewhere is no longer on n1 (on another node than planned); {tail}",
    )
    assert done[ids[2]] == (
        "skipped",
        "reconciled after restart: not applied before the restart (pod default/same is still on n1); "
        "the next plan decides again",
    )
    assert not [w for w in kube.cluster.writes() if w[1].endswith("/eviction")]
    store.close()


def test_a_drains_refused_move_says_the_node_is_not_freed_and_names_the_moves_made(kube):
    # Two moves drain n1; the second eviction is refused (429). The first's reason ("frees n1 ...")
    # stands in the journal, so the refused one says n1 keeps a pod (loop reasons audit part 2).
    for name in ("a", "b"):
        kube.cluster.put(PODS, "default", name, _pod("n1", owned=False))
    why = Reason("rebalance.drain", "move ... frees n1", {"step": "drain"})
    moves = (MovePod("default", "a", "n1", "n2", why), MovePod("default", "b", "n1", "n2", why))
    kube.cluster.faults.append(Fault("POST", "/pods/b/eviction", status=429, message=PDB_REFUSAL))
    res = make(kube, []).apply_plan(Plan(NOW, moves), NOW)
    assert [r.outcome for r in res] == ["applied", "skipped"]
    assert res[1].detail.endswith(
        "; so n1 is not freed by this plan, though 1 other move of its drain was made (default/a)"
    ), res[1].detail
    # A move of no drain, or a drain with nothing made before it, is left as it was.
    kube.cluster.put(PODS, "default", "c", _pod("n3", owned=False))
    kube.cluster.faults.append(Fault("POST", "/pods/c/eviction", status=429, message=PDB_REFUSAL))
    (alone,) = make(kube, []).apply_plan(Plan(NOW + 10, (MovePod("default", "c", "n3", "n2", why),)), NOW + 10)
    assert alone.outcome == "skipped" and "not freed" not in alone.detail
    # A drain step's moves of pods from another node ("so that freeing n6 adds no interfering
    # pair") are not n6's pods, and n7 is not being drained: one of them refused says nothing of
    # either (until 2026-12-07: "so n7 is not freed by this plan, though 1 other move ... (default/e)").
    for name, node in (("d", "n6"), ("e", "n7"), ("f", "n7")):
        kube.cluster.put(PODS, "default", name, _pod(node, owned=False))
    drain, other = _why("n6"), _why("n6", "separate")
    kube.cluster.faults.append(Fault("POST", "/pods/f/eviction", status=429, message=PDB_REFUSAL))
    three = (
        MovePod("default", "d", "n6", "n2", drain),
        MovePod("default", "e", "n7", "n2", other),
        MovePod("default", "f", "n7", "n2", other),
    )
    res = make(kube, []).apply_plan(Plan(NOW + 20, three), NOW + 20)
    assert [r.outcome for r in res] == ["applied", "applied", "skipped"] and "not freed" not in res[2].detail, res


def _why(node: str, kind: str = "drain") -> Reason:
    """A drain step's reason as the planner journals it: a move of ``node``'s own pod (``drain``) or
    of another node's pod made so that freeing ``node`` adds no interfering pair (``separate``)."""
    text = f"move ... frees {node}" if kind == "drain" else f"move ... so that freeing {node} adds no pair"
    return Reason("rebalance.drain", text, {"step": "drain", "frees_node": node, "move_kind": kind})


def _drain(node: str, *pods: str) -> tuple[MovePod, ...]:
    """Moves of ``pods`` (namespace default) that drain ``node`` to n2."""
    return tuple(MovePod("default", pod, node, "n2", _why(node)) for pod in pods)


def _applied(kube, moves: tuple[MovePod, ...], *outcomes: str) -> list:
    """The results of applying ``moves`` now, checked to have ``outcomes``."""
    res = make(kube, []).apply_plan(Plan(NOW, moves), NOW)
    assert [r.outcome for r in res] == list(outcomes), res
    return res


def test_a_drain_its_pdb_cannot_absorb_whole_is_not_started(kube):
    """a and b drain n1; their PodDisruptionBudget allows 1 disruption. Evicting a first (applied)
    and then b (429) disrupted a for nothing; the drain is now checked whole before its first
    eviction, and neither pod is evicted."""
    for name in ("a", "b"):
        kube.cluster.put(PODS, "default", name, _pod("n1", owned=False))
    budget = {"spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}}
    kube.cluster.put(PDBS, "default", "web", budget)
    why = Reason("rebalance.drain", "move ... frees n1", {"step": "drain"})
    moves = (MovePod("default", "a", "n1", "n2", why), MovePod("default", "b", "n1", "n2", why))
    res = _applied(kube, moves, "skipped", "skipped")
    assert (
        res[0].detail
        == res[1].detail
        == (
            "the drain of n1 (2 moves) is not started: PodDisruptionBudget default/web allows 1 disruption now and "
            "covers 2 of its pods (default/a, default/b); evicting only some would not free n1, so none of its pods "
            "is evicted this plan"
        )
    ), res[0].detail
    assert not any(path.endswith("/eviction") for _, path in kube.cluster.writes())
    assert kube.cluster.get(PODS, "default", "a") is not None
    # Allowing 2, the drain goes ahead; a pod no longer on n1 is not counted against the budget.
    kube.cluster.put(PDBS, "default", "web", budget | {"status": {"disruptionsAllowed": 2}})
    res = make(kube, []).apply_plan(Plan(NOW + 10, moves), NOW + 10)
    assert [r.outcome for r in res] == ["applied", "applied"], res
    kube.cluster.put(PODS, "default", "c", _pod("n3", owned=False))
    kube.cluster.put(PODS, "default", "d", _pod("n4", owned=False))
    kube.cluster.put(PDBS, "default", "web", budget)
    gone = (MovePod("default", "c", "n3", "n2", why), MovePod("default", "d", "n3", "n2", why))  # d is on n4
    res = make(kube, []).apply_plan(Plan(NOW + 20, gone), NOW + 20)
    assert [r.outcome for r in res] == ["applied", "skipped"], res
    assert "no longer on n3" in res[1].detail


def test_a_pdb_with_an_empty_selector_covers_every_pod_of_its_namespace(kube):
    """policy/v1: an empty selector selects every pod of the namespace (the Eviction API counts it);
    until 2026-12-07 a pod move's read took it for none, so a drain under it allowing 1 went half."""
    for name in ("a", "b"):
        kube.cluster.put(PODS, "default", name, _pod("n1", owned=False))
    kube.cluster.put(PDBS, "default", "all", {"spec": {"selector": {}}, "status": {"disruptionsAllowed": 1}})
    moves = _drain("n1", "a", "b")
    res = _applied(kube, moves, "skipped", "skipped")
    assert "PodDisruptionBudget default/all allows 1 disruption now and covers 2 of its pods" in res[0].detail
    # Without a selector it selects no pod: a lone move goes ahead.
    kube.cluster.put(PDBS, "default", "all", {"spec": {}, "status": {"disruptionsAllowed": 0}})
    (one,) = make(kube, []).apply_plan(Plan(NOW + 10, moves[:1]), NOW + 10)
    assert one.outcome == "applied", one


def test_a_pod_two_pdbs_cover_is_not_evicted_and_its_drain_not_started(kube):
    """The Eviction API refuses a pod more than one budget covers (500, "more than one
    PodDisruptionBudget"): the move says so before calling, and the drain it belongs to is not
    started, as a's eviction would be for nothing."""
    kube.cluster.put(PODS, "default", "a", _pod("n1", owned=False))
    kube.cluster.put(
        PODS, "default", "b", _pod("n1", owned=False) | {"metadata": {"labels": {"app": "web", "tier": "db"}}}
    )
    for name, labels in (("web", {"app": "web"}), ("db", {"tier": "db"})):
        kube.cluster.put(
            PDBS, "default", name, {"spec": {"selector": {"matchLabels": labels}}, "status": {"disruptionsAllowed": 5}}
        )
    moves = _drain("n1", "a", "b")
    res = _applied(kube, moves, "skipped", "skipped")
    assert res[0].detail.endswith(
        "pod default/b (db, web) is covered by more than one PodDisruptionBudget, which the Eviction API refuses; "
        "evicting only some would not free n1, so none of its pods is evicted this plan"
    ), res[0].detail
    assert not any(path.endswith("/eviction") for _, path in kube.cluster.writes())
    (alone,) = make(kube, []).apply_plan(Plan(NOW + 10, (MovePod("default", "b", "n1", "n2", R),)), NOW + 10)
    assert alone.outcome == "skipped" and alone.detail == (
        "pod default/b is covered by 2 PodDisruptionBudgets (db, web): the Eviction API refuses to evict a pod "
        "more than one budget covers"
    ), alone.detail


def test_an_unexpected_error_reading_a_drain_leaves_it_to_each_moves_own_checks() -> None:
    """A read before the drain's first eviction raising something unforeseen must not stop the plan
    (each action's own surprise is its failure, and the plan goes on)."""
    from actuator.base import PDB_FACT, LiveObject

    class Target:
        def read_state(self, refs):
            raise NotImplementedError

        def live(self, action, quota_room=True):
            if action.pod == "b":
                raise KeyError("status")
            return LiveObject(action.target, "spec.nodeName", 1, "1", {"on_from_node": 1, PDB_FACT + "web": 5})

        def write(self, action, value, live):
            return LiveObject(action.target, "spec.nodeName", 0, "2", {})

    moves = _drain("n1", "a", "b")
    res = Actuator(Target(), None, [], SafetyConfig()).apply_plan(Plan(NOW, moves), NOW)  # type: ignore[arg-type]
    assert [r.outcome for r in res] == ["applied", "failed"], res
    assert "unexpected KeyError" in res[1].detail


def test_the_emulators_eviction_answers_as_the_api_server_does(kube):
    """The emulator refuses what the API server refuses: a budget allowing none (429), a pod two
    budgets cover (500); it takes one disruption off a budget per eviction, and a budget without a
    selector covers no pod (the second review: no budget ever covered a pod, as its selector was
    read as a plain dict)."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(kube.api_client())

    def evict(name: str) -> int:
        try:
            core.create_namespaced_pod_eviction(name, "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name)))
        except k8s.ApiException as exc:
            return int(exc.status)
        return 201

    for name, labels in (("a", {"app": "web"}), ("b", {"app": "web", "tier": "db"}), ("c", {"app": "web"})):
        kube.cluster.put(PODS, "default", name, _pod("n1", owned=False) | {"metadata": {"labels": labels}})
    web = {"spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}}
    kube.cluster.put(PDBS, "default", "web", web)
    kube.cluster.put(PDBS, "default", "db", {"spec": {"selector": {"matchLabels": {"tier": "db"}}}, "status": {}})
    kube.cluster.put(PDBS, "default", "none", {"spec": {}, "status": {"disruptionsAllowed": 0}})
    assert evict("b") == 500  # two budgets
    assert evict("a") == 201  # web allows 1: now 0 ("none" selects no pod)
    assert kube.cluster.get(PDBS, "default", "web")["status"]["disruptionsAllowed"] == 0
    assert evict("c") == 429
    assert kube.cluster.get(PODS, "default", "c") is not None and kube.cluster.get(PODS, "default", "a") is None


def test_a_drain_with_a_pod_deleted_since_the_plan_is_still_checked_whole(kube):
    """a was deleted since the plan (404): nothing to evict there, but b and c are still counted
    against their budget, which allows 1, and the drain is not started (the second review: the 404
    ended the check, b was evicted and c refused; a's outcome advised "create it, or fix the
    policy's spec.target")."""
    for name in ("b", "c"):
        kube.cluster.put(PODS, "default", name, _pod("n1", owned=False))
    budget = {"spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}}
    kube.cluster.put(PDBS, "default", "web", budget)
    moves = _drain("n1", "a", "b", "c")
    res = _applied(kube, moves, "skipped", "skipped", "skipped")
    assert res[0].detail.startswith("the drain of n1 (3 moves) is not started: PodDisruptionBudget default/web")
    assert not any(path.endswith("/eviction") for _, path in kube.cluster.writes())
    (gone,) = make(kube, []).apply_plan(Plan(NOW + 10, moves[:1]), NOW + 10)
    assert gone.outcome == "skipped" and gone.detail == "pod default/a is no longer on n1 (deleted since the plan)"


def test_the_moves_made_for_a_refused_drain_are_not_made_either(kube):
    """e (on n3) moves only so that freeing n1 adds no interfering pair (frees_node n1): when n1's
    drain is refused, e stays too (the final review: it was evicted for a state that never came)."""
    for name, node in (("a", "n1"), ("b", "n1"), ("e", "n3")):
        kube.cluster.put(PODS, "default", name, _pod(node, owned=False))
    budget = {"spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}}
    kube.cluster.put(PDBS, "default", "web", budget)
    kube.cluster.put(PDBS, "default", "other", {"spec": {"selector": {"matchLabels": {"x": "y"}}}, "status": {}})
    moves = (*_drain("n1", "a", "b"), MovePod("default", "e", "n3", "n1", _why("n1", "separate")))
    res = _applied(kube, moves, "skipped", "skipped", "skipped")
    assert res[2].detail.startswith("the drain of n1 this move is made for (3 moves) is not started: ")
    assert "covers 3 of its pods (default/a, default/b, default/e)" in res[2].detail, res[2].detail
    assert res[2].detail.endswith("so none of its pods, nor this one, is evicted this plan"), res[2].detail
    assert not any(path.endswith("/eviction") for _, path in kube.cluster.writes())


def test_the_moves_made_for_a_drain_its_own_move_could_not_make_are_not_made(kube):
    """a drains n1; the check before it passes, but its eviction is refused (429): e, made for that
    drain, is not made either (the last review: it was evicted, for a state that never came)."""
    kube.cluster.put(PODS, "default", "a", _pod("n1", owned=False))
    kube.cluster.put(PODS, "default", "e", _pod("n3", owned=False))
    kube.cluster.faults.append(Fault("POST", "/pods/a/eviction", status=429, message=PDB_REFUSAL))
    moves = (*_drain("n1", "a"), MovePod("default", "e", "n3", "n1", _why("n1", "separate")))
    res = _applied(kube, moves, "skipped", "skipped")
    assert res[1].detail.startswith(
        "this move is made for the drain of n1, which this plan does not complete: its move of default/a was not "
        "made (Pod/default/a: eviction refused (429)"
    ), res[1].detail
    assert res[1].detail.endswith("; so n1 is not freed and this pod stays"), res[1].detail
    assert kube.cluster.get(PODS, "default", "e") is not None


def test_a_move_where_policy_v1_budgets_are_not_served_says_so(kube):
    """A 404 listing the namespace's PodDisruptionBudgets is not the pod's: the move is skipped
    naming the missing API (the final review: it read "deleted since the plan")."""
    kube.cluster.put(PODS, "default", "a", _pod("n1", owned=False))
    kube.cluster.faults.append(Fault("GET", "/poddisruptionbudgets", status=404, at_end=True))
    (res,) = make(kube, []).apply_plan(Plan(NOW, (MovePod("default", "a", "n1", "n2", R),)), NOW)
    assert res.outcome == "skipped" and "does not serve policy/v1 PodDisruptionBudgets (404" in res.detail, res
    assert kube.cluster.get(PODS, "default", "a") is not None


def _knative_fleet(kube, running: int, min_scale: int = 2, **extra: dict) -> WorkloadRef:
    """Knative Service default/fn at ``min-scale``, its autoscaler running ``running`` pods, plus
    ``extra`` pods of it (name -> metadata/status changes) and one pod of another service."""
    template = {"metadata": {"annotations": {MIN_SCALE: str(min_scale)}}}
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": template}})

    def pod(service: str, **change: dict) -> dict:
        meta = {"labels": {"serving.knative.dev/service": service}} | change.get("metadata", {})
        return {"metadata": meta, "status": {"phase": "Running"} | change.get("status", {})}

    for i in range(running):
        kube.cluster.put(PODS, "default", f"fn-{i}", pod("fn"))
    for name, change in extra.items():
        kube.cluster.put(PODS, "default", name, pod("fn", **change))
    kube.cluster.put(PODS, "default", "other-0", pod("other"))
    return WorkloadRef("KnativeService", "default", "fn")


def test_a_knative_min_scale_up_to_the_pods_its_autoscaler_runs_creates_none_and_is_not_limited(kube):
    """min-scale 2, its autoscaler runs 8 pods, the pod quota is full (10/10, those 8 counted):
    raising min-scale to 5 creates no pod, by ScaleTo or by SetWarmPool (until 2026-12-05 skipped,
    "pod quota allows no more pods", counted above min-scale)."""
    ref = _knative_fleet(kube, running=8)
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(used=10))
    pol = policy("fn", kind="KnativeService")
    (res,) = make(kube, [pol]).apply_plan(Plan(NOW, (ScaleTo(ref, 2, 5, R),)), NOW)
    assert res.outcome == "applied" and "limited" not in res.detail, res
    assert kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"][MIN_SCALE] == "5"
    warm = pol.spec.warm_pool.model_copy(update={"enabled": True, "max_instances": 10})
    pol = pol.model_copy(update={"spec": pol.spec.model_copy(update={"warm_pool": warm})})
    (res,) = make(kube, [pol]).apply_plan(Plan(NOW, (SetWarmPool(ref, 5, 8, 600.0, R),)), NOW)
    assert res.outcome == "applied" and "limited" not in res.detail, res
    assert kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"][MIN_SCALE] == "8"
    list_calls = [p for m, p in kube.cluster.calls() if m == "GET" and p == "/api/v1/namespaces/default/pods"]
    assert len(list_calls) == 2, "one pod list per quota-checked write"


def test_a_knative_min_scale_above_the_running_pods_is_limited_to_them_plus_the_quota_room(kube):
    """8 pods run, 1 more fits the quota (9/10 used): 2 -> 12 is limited to 9; a terminating pod,
    a Succeeded and a Failed one are not pods it runs (nor is another service's)."""
    gone = {"metadata": {"deletionTimestamp": "2026-12-05T00:00:00Z", "finalizers": ["x"]}}
    ref = _knative_fleet(
        kube, running=8, old=gone, done={"status": {"phase": "Succeeded"}}, crashed={"status": {"phase": "Failed"}}
    )
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(used=9))
    (res,) = make(kube, [policy("fn", kind="KnativeService")]).apply_plan(Plan(NOW, (ScaleTo(ref, 2, 12, R),)), NOW)
    assert res.outcome == "applied" and "limited by the namespace's pod quota (1 more pods allowed)" in res.detail, res
    assert kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"][MIN_SCALE] == "9"


def test_a_knative_pod_list_that_fails_counts_min_scale_as_its_pods_with_one_warning(kube, caplog):
    """No 'list pods' (403): the room is counted above min-scale as before, one warning naming the
    grant, not one a cycle."""
    ref = _knative_fleet(kube, running=8)
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(used=10))
    kube.cluster.faults.append(Fault("GET", "/namespaces/default/pods", status=403, times=2))
    act = make(kube, [policy("fn", kind="KnativeService")])
    for _ in range(2):
        (res,) = act.apply_plan(Plan(NOW, (ScaleTo(ref, 2, 5, R),)), NOW)
        assert res.outcome == "skipped" and "pod quota allows no more pods" in res.detail, res
    warned = [r for r in caplog.records if "cannot list pods in default (403)" in r.getMessage()]
    assert len(warned) == 1 and "grant 'list pods'" in warned[0].getMessage()
    (res,) = act.apply_plan(Plan(NOW, (ScaleTo(ref, 2, 5, R),)), NOW)  # listed again: 8 run
    assert res.outcome == "applied", res


def test_read_state_counts_the_pods_a_knative_service_runs_in_the_namespace_pool(kube):
    """The pool adds back the pods the quota's ``used`` counts for the service: the 8 its autoscaler
    runs, not its min-scale 2 (else a warm pool of 5 would be cut to 2 though it creates no pod),
    from one pod list for the namespace, shared with the Deployment's readiness times."""
    template = {
        "metadata": {"annotations": {MIN_SCALE: "2"}},
        "spec": {"containers": [{"image": "fn", "resources": {"requests": {"cpu": "100m"}}}]},
    }
    ref = _knative_fleet(kube, running=8, old={"metadata": {"deletionTimestamp": "2026-12-05T00:00:00Z"}})
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": template}})
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(1))
    hard = {"pods": "10", "requests.cpu": "2"}
    kube.cluster.put(QUOTAS, "default", "q", {"status": {"hard": hard, "used": {"pods": "10", "requests.cpu": "2"}}})
    web = WorkloadRef("Deployment", "default", "web")
    state = KubernetesTarget(kube.api_client(), []).read_state([ref, web])
    assert state.workloads[ref].warm_instances == 2
    assert state.pod_quotas == {"default": 8 + 1}
    assert state.pods_running == {ref: 8}  # the planner takes off what fn's claim does not want of them
    # 8 pods x (100m + the queue-proxy's 25m); web asks for none
    assert state.resource_quotas == {"default": {"requests.cpu": 8 * 125}}
    lists = [p for m, p in kube.cluster.calls() if m == "GET" and p == "/api/v1/namespaces/default/pods"]
    assert len(lists) == 1
    # without a quota, a namespace of Knative Services only is not listed
    kube.cluster.objects[QUOTAS, "default", "q"].delete()
    before = len(kube.cluster.calls())
    KubernetesTarget(kube.api_client(), []).read_state([ref])
    assert not [p for m, p in kube.cluster.calls()[before:] if p.endswith("/pods")]


def test_read_state_falls_back_to_min_scale_when_the_pods_cannot_be_listed(kube):
    ref = _knative_fleet(kube, running=8)
    kube.cluster.put(QUOTAS, "default", "q", _pod_quota(used=10))
    kube.cluster.faults.append(Fault("GET", "/namespaces/default/pods", status=500))
    state = KubernetesTarget(kube.api_client(), [], timeout_s=2.0).read_state([ref])
    assert state.pod_quotas == {"default": 2}
