"""ResourceQuota scopes: which pods a quota counts, and what that means for scale-ups and sharing."""

from __future__ import annotations

import pytest
from kubeemu import DEPLOYMENTS, KSVC, QUOTAS, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import MIN_SCALE, KubernetesTarget
from actuator.quota_scopes import quota_applies
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

NOW = 1_000_000.0
SIZED = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]}
BARE = {"containers": [{"name": "app"}]}
INIT_SIZED = {"containers": [{}], "initContainers": [{"resources": {"limits": {"cpu": "1"}}}]}
JOB = {**SIZED, "activeDeadlineSeconds": 600}
HIGH = {**SIZED, "priorityClassName": "high"}
SHARED = {
    **SIZED,
    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "x", "namespaceSelector": {}}}
    ]}},
}  # fmt: skip


def sized(resources: dict) -> dict:
    return {"containers": [{"name": "c", "resources": resources}]}


def quota(scopes=(), **selector) -> dict:
    spec: dict = {"hard": {"pods": "0"}}
    if scopes:
        spec["scopes"] = list(scopes)
    if selector:
        spec["scopeSelector"] = {"matchExpressions": [selector]}
    return {"spec": spec}


@pytest.mark.parametrize(
    ("q", "pod", "applies"),
    [
        (quota(), BARE, True),
        (quota(["BestEffort"]), BARE, True),
        (quota(["BestEffort"]), SIZED, False),
        (quota(["NotBestEffort"]), SIZED, True),
        (quota(["BestEffort"]), INIT_SIZED, False),
        # Zero requests are no requests (Kubernetes' QoS rule): still best-effort.
        (quota(["BestEffort"]), sized({"requests": {"cpu": "0", "memory": "0Mi"}}), True),
        (quota(["BestEffort"]), sized({"limits": {"cpu": "0.0"}}), True),
        (quota(["NotBestEffort"]), sized({"requests": {"cpu": "0m"}}), False),
        # Pod-level resources decide the QoS class where set: such a pod is not best-effort.
        (quota(["BestEffort"]), {**BARE, "resources": {"limits": {"memory": "1Gi"}}}, False),
        (quota(["NotBestEffort"]), {**BARE, "resources": {"requests": {"cpu": "500m"}}}, True),
        (quota(["BestEffort"]), {**BARE, "resources": {"requests": {"cpu": "0"}}}, True),
        (quota(["Terminating"]), SIZED, False),
        (quota(["Terminating"]), JOB, True),
        (quota(["NotTerminating"]), SIZED, True),
        (quota(["NotTerminating", "BestEffort"]), SIZED, False),  # every scope must match
        (quota(scopeName="PriorityClass", operator="In", values=["high"]), HIGH, True),
        (quota(scopeName="PriorityClass", operator="In", values=["high"]), SIZED, False),
        (quota(scopeName="PriorityClass", operator="NotIn", values=["high"]), SIZED, True),
        (quota(scopeName="PriorityClass", operator="Exists"), HIGH, True),
        (quota(scopeName="PriorityClass", operator="DoesNotExist"), HIGH, False),
        (quota(scopeName="Terminating", operator="Exists"), JOB, True),
        (quota(scopeName="CrossNamespacePodAffinity", operator="Exists"), SHARED, True),
        (quota(scopeName="CrossNamespacePodAffinity", operator="Exists"), SIZED, False),
        (quota(scopeName="VolumeAttributesClass", operator="In", values=["gold"]), SIZED, False),
    ],
)  # fmt: skip
def test_a_quota_applies_to_the_pods_its_scopes_select(q, pod, applies):
    assert quota_applies(q, {"spec": pod}) is applies


def sized_deployment(replicas: int) -> dict:
    obj = deployment(replicas)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    return obj


def put_quotas(kube) -> None:
    # The Kubernetes documentation's pattern: no best-effort pods at all; plus a quota for batch
    # jobs (Terminating) and one for the "high" PriorityClass. None applies to web's pods.
    for name, scopes in (("no-best-effort", ["BestEffort"]), ("jobs", ["Terminating"])):
        status = {"hard": {"pods": "0"}, "used": {"pods": "0"}}
        kube.cluster.put(QUOTAS, "default", name, {"spec": {"hard": {"pods": "0"}, "scopes": scopes}, "status": status})
    high = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}
    status = {"hard": {"pods": "1"}, "used": {"pods": "1"}}
    kube.cluster.put(
        QUOTAS, "default", "high", {"spec": {"hard": {"pods": "1"}, "scopeSelector": high}, "status": status}
    )


def test_a_quota_whose_scopes_do_not_select_the_workloads_pods_neither_limits_nor_shares_them(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", sized_deployment(2))
    put_quotas(kube)
    web = WorkloadRef("Deployment", "default", "web")
    target = KubernetesTarget(kube.api_client(), [policy()])
    # Before scopes were read, these quotas left 0 pods: every scale-up was skipped.
    assert target.read_state([web]).pod_quotas == {}
    act = Actuator(target, None, [policy()], SafetyConfig())
    res = act.apply_plan(Plan(NOW, (ScaleTo(web, 2, 6, Reason("t", "t")),)), NOW)
    assert res[0].outcome == "applied" and "quota" not in res[0].detail, res
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 6
    # An unscoped quota still counts, and so does a scoped one that selects the pods.
    kube.cluster.put(QUOTAS, "default", "all", {"status": {"hard": {"pods": "10"}, "used": {"pods": "8"}}})
    # 2 left plus web's status.replicas (2: the emulated API server runs no pods).
    assert target.read_state([web]).pod_quotas == {"default": 2 + 2}
    res = act.apply_plan(Plan(NOW, (ScaleTo(web, 6, 9, Reason("t", "t")),)), NOW)
    assert "limited by the namespace's pod quota (2 more pods allowed)" in res[0].detail, res
    high = sized_deployment(1)
    high["spec"]["template"]["spec"]["priorityClassName"] = "high"
    kube.cluster.put(DEPLOYMENTS, "default", "api", high)
    api = WorkloadRef("Deployment", "default", "api")
    res = act.apply_plan(Plan(NOW, (ScaleTo(api, 1, 3, Reason("t", "t")),)), NOW)
    assert res[0].outcome == "skipped" and "pod quota allows no more pods" in res[0].detail, res
    # Two pools: the namespace's (the unscoped quota: 2 left plus web's 2 and api's 1 pods) and the
    # "high" quota's, which counts api's pods only (0 left plus api's 1); web is not in it.
    state = KubernetesTarget(kube.api_client(), []).read_state([web, api])
    assert state.pod_quotas == {"default": 2 + 3, "default/high": 0 + 1}
    assert state.quota_members == {"default/high": frozenset({api})}
    # Planned with both pools: api is held at its 1 pod by its quota, web is not held back by it.
    from planner.fairness import Claim, allocate_pools

    claims = [Claim(web, "t", 0, 1.0, 4, 1), Claim(api, "t", 0, 1.0, 3, 1)]
    grants, notes = allocate_pools(claims, {}, state.pod_quotas, {}, members=state.quota_members)
    assert [g.granted for g in grants] == [4, 1]
    assert notes == [
        "quota default/high on pods leaves room for 1 pods of the 1 managed workloads its scopes select, short of "
        "the 3 replicas they want: 1 of them get less"
    ]
    # A scoped quota that selects every managed workload of the namespace is the namespace's pool.
    state = KubernetesTarget(kube.api_client(), []).read_state([api])
    assert state.pod_quotas == {"default": 1} and state.quota_members == {}


def test_knative_pods_are_not_best_effort_because_of_their_queue_proxy(kube):
    template = {"metadata": {"annotations": {MIN_SCALE: "1"}}, "spec": {"containers": [{"image": "fn"}]}}
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": template}})
    put_quotas(kube)
    fn = WorkloadRef("KnativeService", "default", "fn")
    # The function's own container asks for nothing, but Knative's queue-proxy requests 25m CPU.
    assert KubernetesTarget(kube.api_client(), []).read_state([fn]).pod_quotas == {}
