"""Rebalancing in a cluster: nodes, pods and PDBs read through the official client (the emulator),
planned into moves by the planner and carried out by the actuator as evictions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import jsonpatch
import pytest
from kubeemu import NODES, PDBS, POD_METRICS, PODS, Fault

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget, cpu_millis, memory_mb, pod_limit
from actuator.safety import SafetyConfig
from actuator.steering import STEERED_TO, affinity_patch
from planner import plan as make_plan
from planner.placement_rules import fits_node
from planner.rebalance import pod_peak_cpu_m
from scaleahead.types import (
    HostPort,
    LabelRequirement,
    LabelSelector,
    MovePod,
    NodeSelectorRequirement,
    Plan,
    PodAffinityTerm,
    Reason,
    Taint,
    Toleration,
)

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("quantity", "millis"),
    [
        ("250m", 250), ("2", 2000), ("1.5", 1500), (4, 4000), (None, 0), ("", 0), ("2500000000n", 2500), ("5000u", 5),
        # the rest of the quantity format (found 2026-12-05: these raised ValueError, and a quota or
        # node written so stopped the cycle's state read)
        ("2k", 2_000_000), ("1e3", 1_000_000), ("0.5k", 500_000),
    ],
)  # fmt: skip
def test_cpu_quantities_in_millicores(quantity: Any, millis: int) -> None:
    assert cpu_millis(quantity) == millis


@pytest.mark.parametrize(
    ("quantity", "mb"),
    [
        ("512Mi", 512), ("2Gi", 2048), ("1G", 953), ("1048576", 1), ("64Ki", 0), (None, 0),
        ("1Pi", 2**30), ("1Ei", 2**40), ("1P", 10**15 // 2**20), ("2E", 2 * 10**18 // 2**20), ("3E6", 2),
    ],
)  # fmt: skip
def test_memory_quantities_in_mib(quantity: Any, mb: int) -> None:
    assert memory_mb(quantity) == mb


def test_a_quota_in_petabytes_is_read_and_a_malformed_quantity_named() -> None:
    from actuator.kubernetes import _rooms

    rq = {"status": {"hard": {"requests.memory": "1Pi", "pods": "10"}, "used": {"requests.memory": "1Gi", "pods": "2"}}}
    assert _rooms(rq)["requests.memory"] == 2**30 - 1024
    with pytest.raises(ValueError, match="'12 cores' is not a Kubernetes quantity"):
        cpu_millis("12 cores")


@pytest.mark.parametrize(
    ("quantity", "pods"),
    [("110", 110), ("32", 32), (None, 110), ("", 110), ("1k", 1000), ("5k", 5000), ("1.5", 2), ("lots", 0), ("-3", 0)],
)
def test_a_nodes_pod_limit(quantity: Any, pods: int) -> None:
    assert pod_limit(quantity) == pods


def node(cpu: str, unschedulable: bool = False, **spec: Any) -> dict[str, Any]:
    return {
        "spec": {"unschedulable": unschedulable} | spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi"}},
    }


def pod(node_name: str, owner: str, cpu: str, cls: str | None = None, **extra: Any) -> dict[str, Any]:
    labels = {"app": owner} | ({"scaleahead.io/interference": cls} if cls else {})
    return {
        "metadata": {
            "labels": labels,
            "ownerReferences": [{"kind": "ReplicaSet", "name": f"{owner}-rs", "controller": True, "uid": "u"}],
        },
        "spec": {"nodeName": node_name, "containers": [{"resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
        | extra,
        "status": {"phase": "Running"},
    }


def fragmented(kube: Any) -> None:
    """Three 4-core nodes; n3 holds one small pod that fits on n1."""
    for name in ("n1", "n2", "n3"):
        kube.cluster.put(NODES, None, name, node("4"))
    kube.cluster.put(PODS, "shop", "web-1", pod("n1", "web", "1", "latency-critical"))
    kube.cluster.put(PODS, "shop", "web-2", pod("n2", "web", "1", "latency-critical"))
    kube.cluster.put(PODS, "shop", "batch-1", pod("n2", "batch", "1500m", "cpu-bound"))
    cart = pod("n3", "cart", "500m")
    cart["metadata"]["uid"] = "cart-1-uid"
    kube.cluster.put(PODS, "shop", "cart-1", cart)
    kube.cluster.put(
        PDBS,
        "shop",
        "web-pdb",
        {"spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}},
    )


def test_nodes_pods_and_pdbs_are_read_for_the_planner(kube) -> None:
    fragmented(kube)
    kube.cluster.put(NODES, None, "n4", node("8", unschedulable=True))
    pending = pod("", "web", "1")  # not scheduled yet: not placed, never moved
    kube.cluster.put(PODS, "shop", "web-3", pending)
    kube.cluster.faults.append(Fault("GET", "/apis/metrics.k8s.io", status=404))  # no metrics-server
    nodes, pods, pdbs, _ = KubernetesTarget(kube.api_client()).read_placement()
    assert all(p.usage_cpu_m == 0 for p in pods), "without the metrics API, requests alone count"
    assert {(n.name, n.cpu_m, n.memory_mb, n.schedulable) for n in nodes} == {
        ("n1", 4000, 16384, True), ("n2", 4000, 16384, True), ("n3", 4000, 16384, True), ("n4", 8000, 16384, False)
    }  # fmt: skip
    by_name = {p.name: p for p in pods}
    assert set(by_name) == {"web-1", "web-2", "batch-1", "cart-1"}
    assert (by_name["batch-1"].node, by_name["batch-1"].cpu_request_m, by_name["batch-1"].owner) == (
        "n2",
        1500,
        "batch-rs",
    )
    assert by_name["batch-1"].interference == "cpu-bound" and by_name["cart-1"].interference == "none"
    assert by_name["cart-1"].uid == "cart-1-uid" and by_name["web-1"].uid == ""
    assert [(b.namespace, b.owner, b.disruptions_allowed) for b in pdbs] == [("shop", "web-rs", 1)]


def test_read_state_carries_the_placement_only_when_asked(kube) -> None:
    fragmented(kube)
    assert KubernetesTarget(kube.api_client()).read_state([]).nodes == ()
    state = KubernetesTarget(kube.api_client(), placement=True).read_state([])
    assert len(state.nodes) == 3 and len(state.pods) == 4


def test_a_placement_read_forbidden_says_which_component_grants_it(kube, caplog) -> None:  # type: ignore[no-untyped-def]
    """The shipped base grants no node list (deploy/components/rebalance does): with loop.max_moves
    set and the component missing, each cycle's warning says so, and the cycle's state is read."""
    fragmented(kube)
    kube.cluster.faults.append(Fault("GET", "/api/v1/nodes", status=403, message="nodes is forbidden"))
    with caplog.at_level("WARNING"):
        state = KubernetesTarget(kube.api_client(), placement=True).read_state([])
    assert state.nodes == ()
    (record,) = [r for r in caplog.records if getattr(r, "event", "") == "placement"]
    assert "nodes is forbidden" in record.getMessage()
    assert "only with the component deploy/components/rebalance" in record.getMessage()
    caplog.clear()  # another failure is not blamed on the rights
    kube.cluster.faults.append(Fault("GET", "/api/v1/nodes", status=500))
    with caplog.at_level("WARNING"):
        KubernetesTarget(kube.api_client(), placement=True).read_state([])
    (record,) = [r for r in caplog.records if getattr(r, "event", "") == "placement"]
    assert "injected 500" in record.getMessage() and "component" not in record.getMessage()


def test_a_planned_move_is_carried_out_as_an_eviction(kube) -> None:
    fragmented(kube)
    target = KubernetesTarget(kube.api_client(), placement=True)
    state = target.read_state([])
    plan = make_plan({}, state, [], NOW, max_moves=4)
    moves = [a for a in plan.actions if isinstance(a, MovePod)]
    moved = {m.pod: (m.from_node, m.to_node) for m in moves}
    assert moved["cart-1"][0] == "n3", "n3's one small pod goes: a node freed"
    assert moved["web-2"] == ("n2", "n1"), "the latency-critical pod leaves the cpu-bound one"
    assert all(m.reason.message for m in moves)
    results = Actuator(target, None, []).apply_plan(plan, NOW)
    assert [r.outcome for r in results if isinstance(r.action, MovePod)] == ["applied"] * len(moves)
    evictions = [w for w in kube.cluster.writes() if w[1].endswith("/eviction")]
    assert len(evictions) == len(moves)


def test_a_drain_that_would_leave_the_plans_scale_up_no_room_is_left_out(kube) -> None:
    """The Deployment api (1500m a pod) goes 1 -> 4 in the same plan. Freeing n3 (its cart pod onto
    n1) would leave room for 2 of the 3 new pods (n1 1, n2 1), against 3 before: the drain is left
    out and a note says why; the separation of web-2 from batch-1 (room for all 3 after it) stays."""
    from dataclasses import replace

    import numpy as np
    from kubeemu import DEPLOYMENTS, deployment, policy

    from scaleahead.types import Forecast, ScaleTo, WorkloadRef

    fragmented(kube)
    api = deployment(1, labels={"app": "api"})
    api["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1500m", "memory": "256Mi"}}
    kube.cluster.put(DEPLOYMENTS, "default", "api", api)
    ref = WorkloadRef("Deployment", "default", "api")
    pol = policy("api")
    state = KubernetesTarget(kube.api_client(), [pol], placement=True).read_state([ref])
    assert state.pod_shapes[ref]["requests.cpu"] == 1500
    ws = state.workloads[ref]  # the loop adds the demand observed, from the history
    state = replace(state, workloads={ref: replace(ws, observed_demand=20.0, observed_at=NOW - 5)})
    level = np.full(90, 35.0)  # 35 req/s at 10 a replica and 0.9: 4 replicas
    forecast = Forecast(ref, NOW - 1, 10.0, {q: level for q in (0.1, 0.5, 0.9, 0.99)})
    plan = make_plan({ref: forecast}, state, [pol], NOW, max_moves=4)
    scale = plan.actions[0]
    assert isinstance(scale, ScaleTo) and (scale.from_replicas, scale.to_replicas) == (1, 4), scale
    moved = {a.pod: (a.from_node, a.to_node) for a in plan.actions if isinstance(a, MovePod)}
    assert moved == {"web-2": ("n2", "n1")}, moved
    assert any(
        n.startswith("rebalancing left out freeing n3 (1 move): the new pods would then fit 2 of 3") for n in plan.notes
    ), plan.notes
    without = make_plan({}, state, [pol], NOW, max_moves=4)  # no scale-up: n3 is freed as before
    assert "cart-1" in {a.pod for a in without.actions if isinstance(a, MovePod)}


def test_pods_waiting_for_a_node_are_read_and_the_moves_keep_room_for_them(kube) -> None:
    """Three pods of an earlier scale-up (1500m each) wait for a node. Freeing n3 would leave room
    for 2 of them (n1 1, n2 1), against 3 before: the drain is left out and a note says so; the
    separation of web-2 from batch-1 stays. A pod being deleted, or one already finished, is not read."""
    fragmented(kube)
    for i in range(3):
        kube.cluster.put(PODS, "shop", f"api-{i}", pod("", "api", "1500m") | {"status": {"phase": "Pending"}})
    gone = pod("", "api", "1500m") | {"status": {"phase": "Pending"}}
    gone["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    kube.cluster.put(PODS, "shop", "api-gone", gone)
    kube.cluster.put(PODS, "shop", "job-1", pod("", "job", "1500m") | {"status": {"phase": "Succeeded"}})
    state = KubernetesTarget(kube.api_client(), placement=True).read_state([])
    assert sorted((p.name, p.node, p.cpu_request_m, p.owner) for p in state.pending_pods) == [
        (f"api-{i}", "", 1500, "api-rs") for i in range(3)
    ]
    assert not any(p.name.startswith("api") for p in state.pods)
    plan = make_plan({}, state, [], NOW, max_moves=4)
    moved = {a.pod: (a.from_node, a.to_node) for a in plan.actions if isinstance(a, MovePod)}
    assert moved == {"web-2": ("n2", "n1")}, moved
    assert any(
        n.startswith("rebalancing left out freeing n3 (1 move): the new pods would then fit 2 of 3")
        and n.endswith("(3 of shop/api-rs (pending))")
        for n in plan.notes
    ), plan.notes
    assert "cart-1" in {a.pod for a in make_plan({}, replace(state, pending_pods=()), [], NOW, max_moves=4).actions
                        if isinstance(a, MovePod)}  # fmt: skip


def test_the_node_rules_of_new_and_waiting_pods_are_read(kube) -> None:
    """The room the moves keep for a scale-up's new pods and for pods waiting for a node is on the
    nodes their node selector, required node affinity and tolerations allow: read from the pod
    template (``pod_rules``) and from each waiting pod."""
    from kubeemu import DEPLOYMENTS, deployment, policy

    from actuator.kubernetes import TOLERATE_ALL
    from scaleahead.types import Toleration, WorkloadRef

    fragmented(kube)
    api = deployment(1, labels={"app": "api"})
    tpl = api["spec"]["template"]["spec"]
    tpl["nodeSelector"] = {"pool": "fast"}
    tpl["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "fast", "effect": "NoSchedule"}]
    tpl["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
            }
        }
    }
    kube.cluster.put(DEPLOYMENTS, "default", "api", api)
    ref = WorkloadRef("Deployment", "default", "api")
    waiting = pod("", "api", "1500m") | {"status": {"phase": "Pending"}}
    waiting["spec"]["nodeSelector"] = {"pool": "fast"}
    kube.cluster.put(PODS, "shop", "api-0", waiting)
    state = KubernetesTarget(kube.api_client(), [policy("api")], placement=True).read_state([ref])
    rules = state.pod_rules[ref]
    assert dict(rules.node_selector) == {"pool": "fast"} and rules.owner == "api"
    # not the template's tolerations: admission adds some to the pods it creates (an extended
    # resource's), so its new pods are taken to tolerate every taint
    assert rules.tolerations == TOLERATE_ALL != (Toleration("dedicated", "Equal", "fast", "NoSchedule"),)
    assert len(rules.required_node_terms) == 1
    (pending,) = state.pending_pods
    assert dict(pending.node_selector) == {"pool": "fast"}
    without = KubernetesTarget(kube.api_client(), [policy("api")]).read_state([ref])
    assert without.pod_rules == {}, "rebalancing off: not read"
    # a template whose node selector is not an object: its new pods count on any node, nothing else changes
    tpl["nodeSelector"] = ["pool=fast"]
    kube.cluster.put(DEPLOYMENTS, "default", "api", api)
    state = KubernetesTarget(kube.api_client(), [policy("api")], placement=True).read_state([ref])
    assert ref in state.workloads and ref not in state.pod_rules and state.nodes


def test_pod_usage_comes_from_the_metrics_api_when_it_is_served(kube) -> None:
    fragmented(kube)
    usage = {"containers": [{"name": "c", "usage": {"cpu": "2500000000n", "memory": "100Mi"}}]}
    kube.cluster.put(POD_METRICS, "shop", "batch-1", usage)  # batch-1 uses more than its 1.5 cores request
    _, pods, _, _ = KubernetesTarget(kube.api_client()).read_placement()
    by_name = {p.name: p for p in pods}
    assert by_name["batch-1"].usage_cpu_m == 2500 and by_name["web-1"].usage_cpu_m == 0
    assert pod_peak_cpu_m(by_name["batch-1"]) == 2500, "placed by its usage, not its request"
    assert by_name["batch-1"].usage_memory_mb == 100 and by_name["web-1"].usage_memory_mb == 0
    # one reading that does not parse leaves the other
    odd = {"containers": [{"name": "c", "usage": {"cpu": "700m", "memory": "lots"}}]}
    kube.cluster.put(POD_METRICS, "shop", "web-1", odd)
    kube.cluster.put(
        POD_METRICS, "shop", "web-2", {"containers": [{"name": "c", "usage": {"cpu": "x", "memory": "1Gi"}}]}
    )
    by_name = {p.name: p for p in KubernetesTarget(kube.api_client()).read_placement()[1]}
    assert (by_name["web-1"].usage_cpu_m, by_name["web-1"].usage_memory_mb) == (700, 0)
    assert (by_name["web-2"].usage_cpu_m, by_name["web-2"].usage_memory_mb) == (0, 1024)


def test_a_pod_using_more_memory_than_it_requests_is_not_moved_where_its_use_does_not_fit(kube) -> None:
    """cart-1 requests 256Mi but uses 15.9Gi: by requests it fits on n1 (16Gi) and n3 would be freed;
    by its use n1 would pass its allocatable memory (memory pressure: the kubelet evicts), so n3 stays."""
    fragmented(kube)
    state = KubernetesTarget(kube.api_client(), placement=True).read_state([])
    assert "cart-1" in {a.pod for a in make_plan({}, state, [], NOW, max_moves=4).actions if isinstance(a, MovePod)}
    usage = {"containers": [{"name": "c", "usage": {"cpu": "100m", "memory": "16280Mi"}}]}
    kube.cluster.put(POD_METRICS, "shop", "cart-1", usage)
    state = KubernetesTarget(kube.api_client(), placement=True).read_state([])
    moves = [a for a in make_plan({}, state, [], NOW, max_moves=4).actions if isinstance(a, MovePod)]
    assert "cart-1" not in {m.pod for m in moves}, moves


def test_daemonset_and_mirror_pods_are_node_bound_and_do_not_block_a_drain(kube) -> None:
    fragmented(kube)
    for name in ("n1", "n2", "n3"):  # kube-proxy everywhere, and a static pod on n3
        proxy = pod(name, "kube-proxy", "100m")
        proxy["metadata"]["ownerReferences"][0].update(kind="DaemonSet", name="kube-proxy")
        kube.cluster.put(PODS, "kube-system", f"kube-proxy-{name}", proxy)
    static = pod("n3", "etcd", "100m")
    static["metadata"].update(ownerReferences=[], annotations={"kubernetes.io/config.mirror": "abc"})
    kube.cluster.put(PODS, "kube-system", "etcd-n3", static)
    target = KubernetesTarget(kube.api_client(), placement=True)
    _, pods, _, _ = target.read_placement()
    bound = {p.name for p in pods if p.node_bound}
    assert bound == {"kube-proxy-n1", "kube-proxy-n2", "kube-proxy-n3", "etcd-n3"}
    assert all(p.owner == "" for p in pods if p.node_bound)
    plan = make_plan({}, target.read_state([]), [], NOW, max_moves=4)
    moved = {m.pod: (m.from_node, m.to_node) for m in plan.actions if isinstance(m, MovePod)}
    assert moved["cart-1"][0] == "n3" and "frees n3" in next(
        m.reason.message for m in plan.actions if isinstance(m, MovePod) and m.pod == "cart-1"
    ), "n3 is freed although its kube-proxy and static pod stay"
    assert not {"kube-proxy-n1", "kube-proxy-n2", "kube-proxy-n3", "etcd-n3"} & set(moved)


def required_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def planned_moves(target: KubernetesTarget) -> dict[str, tuple[str, str]]:
    plan = make_plan({}, target.read_state([]), [], NOW, max_moves=4)
    return {m.pod: (m.from_node, m.to_node) for m in plan.actions if isinstance(m, MovePod)}


def test_no_move_goes_to_a_node_the_pods_node_selector_or_required_node_affinity_excludes(kube) -> None:
    # unconstrained, cart-1 goes n3 -> n2 (n3 freed) and web-2 n2 -> n1 (away from batch-1); here
    # cart-1 may only run in pool web (n1, n3) and web-2 only in pool batch (n2)
    fragmented(kube)
    for name, pool in (("n1", "web"), ("n2", "batch"), ("n3", "web")):
        kube.cluster.put(NODES, None, name, node("4") | {"metadata": {"labels": {"pool": pool}}})
    kube.cluster.put(PODS, "shop", "cart-1", pod("n3", "cart", "500m", nodeSelector={"pool": "web"}))
    batch_only = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}
    gpu_named = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}
    affinity = required_affinity(batch_only, gpu_named)
    kube.cluster.put(PODS, "shop", "web-2", pod("n2", "web", "1", "latency-critical", affinity=affinity))
    target = KubernetesTarget(kube.api_client(), placement=True)
    nodes, pods, _, _ = target.read_placement()
    by_name = {p.name: p for p in pods}
    assert by_name["cart-1"].node_selector == {"pool": "web"}
    assert by_name["web-2"].required_node_terms == (
        (NodeSelectorRequirement("pool", "In", ("batch",)),),
        (NodeSelectorRequirement("metadata.name", "In", ("gpu-1",), field=True),),
    )
    assert {n.name: dict(n.labels) for n in nodes}["n2"] == {"pool": "batch"}
    moves = planned_moves(target)
    assert moves["cart-1"] == ("n3", "n1"), "n3 is still freed, onto the web pool's node"
    assert "web-2" not in moves, "the only other batch node is the one it is on"
    assert all(fits_node(by_name[p], next(n for n in nodes if n.name == to)) for p, (_, to) in moves.items())


def test_no_move_goes_to_a_node_whose_taint_the_pod_does_not_tolerate(kube) -> None:
    # n1 and n2 are tainted (web-1 tolerates n1's taint), n3 is not
    fragmented(kube)
    kube.cluster.put(NODES, None, "n1", node("4", taints=[{"key": "maintenance", "effect": "NoExecute"}]))
    tolerates_maintenance = [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]
    kube.cluster.put(
        PODS, "shop", "web-1", pod("n1", "web", "1", "latency-critical", tolerations=tolerates_maintenance)
    )
    batch = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    kube.cluster.put(NODES, None, "n2", node("4", taints=[batch]))
    # web-2 tolerates n1's NoExecute taint for 300 s only: it would be evicted again, so it does not count
    for_a_while = [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
    kube.cluster.put(PODS, "shop", "web-2", pod("n2", "web", "1", "latency-critical", tolerations=for_a_while))
    wrong_value = [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]
    kube.cluster.put(PODS, "shop", "cart-1", pod("n3", "cart", "500m", tolerations=wrong_value))
    target = KubernetesTarget(kube.api_client(), placement=True)
    nodes, pods, _, _ = target.read_placement()
    taints = {n.name: n.taints for n in nodes}
    assert taints == {
        "n1": (Taint("maintenance", "", "NoExecute"),),
        "n2": (Taint("dedicated", "batch", "NoSchedule"),),
        "n3": (),
    }
    by_name = {p.name: p for p in pods}
    assert by_name["cart-1"].tolerations == (Toleration("dedicated", "Equal", "db", "NoSchedule"),)
    assert by_name["web-2"].tolerations == ()
    moves = planned_moves(target)
    assert "cart-1" not in moves, "n1 and n2 have taints it does not tolerate"
    assert {to for _, to in moves.values()} == {"n3"}, "no pod that moves tolerates n1's or n2's taint"
    any_dedicated = [{"key": "dedicated", "operator": "Exists"}]
    kube.cluster.put(PODS, "shop", "cart-1", pod("n3", "cart", "500m", tolerations=any_dedicated))
    assert planned_moves(target)["cart-1"] == ("n3", "n2")


def test_a_steered_pod_is_not_pinned_to_its_node_by_the_webhooks_own_requirement(kube) -> None:
    # web-2 was created by a steer to n2: the webhook added matchFields metadata.name In [n2], which
    # its ReplicaSet's template does not have; it is free to move like any other pod of its owner
    fragmented(kube)
    steered = pod("n2", "web", "1", "latency-critical")
    steered = jsonpatch.apply_patch(steered, affinity_patch(steered, "n2"))
    steered["metadata"]["annotations"] = {STEERED_TO: "n2"}
    kube.cluster.put(PODS, "shop", "web-2", steered)
    # cart-1 was steered too, but its own rule (a term, which the webhook ANDed n3 into) stays
    own = {"matchExpressions": [{"key": "disk", "operator": "DoesNotExist"}]}
    cart = pod("n3", "cart", "500m", affinity=required_affinity(own))
    cart = jsonpatch.apply_patch(cart, affinity_patch(cart, "n3"))
    cart["metadata"]["annotations"] = {STEERED_TO: "n3"}
    kube.cluster.put(PODS, "shop", "cart-1", cart)
    target = KubernetesTarget(kube.api_client(), placement=True)
    nodes, pods, _, _ = target.read_placement()
    by_name = {p.name: p for p in pods}
    assert by_name["web-2"].required_node_terms == ()
    assert by_name["cart-1"].required_node_terms == ((NodeSelectorRequirement("disk", "DoesNotExist"),),)
    moves = planned_moves(target)
    assert moves == {"cart-1": ("n3", "n2"), "web-2": ("n2", "n1")}
    assert all(fits_node(by_name[p], next(n for n in nodes if n.name == to)) for p, (_, to) in moves.items())


def containers(*requests: dict[str, str], **extra: Any) -> list[dict[str, Any]]:
    return [{"name": f"c{i}", "resources": {"requests": r}} | extra for i, r in enumerate(requests)]


def test_a_pods_requests_are_read_as_the_scheduler_counts_them(kube) -> None:
    # the larger of the containers' sum and any init container, a sidecar (restartPolicy Always)
    # added to both, plus the pod's overhead; memory summed exactly and rounded up to a MiB
    fragmented(kube)
    init = pod("n1", "init", "500m")
    init["spec"] |= {
        "containers": containers({"cpu": "500m", "memory": "256Mi"}, {"cpu": "250m", "memory": "100M"}),
        "initContainers": containers({"cpu": "2", "memory": "1Gi"}),
        "overhead": {"cpu": "100m", "memory": "64Mi"},
    }
    kube.cluster.put(PODS, "shop", "init-1", init)
    sidecar = pod("n1", "sidecar", "500m")
    sidecar["spec"]["initContainers"] = [
        *containers({"cpu": "300m", "memory": "100M"}, restartPolicy="Always"),
        *containers({"cpu": "1", "memory": "100M"}),
    ]
    sidecar["spec"]["containers"] = containers(*[{"cpu": "200m", "memory": "100M"}] * 3)
    kube.cluster.put(PODS, "shop", "sidecar-1", sidecar)
    _, pods, _, _ = KubernetesTarget(kube.api_client()).read_placement()
    by_name = {p.name: p for p in pods}
    assert (by_name["init-1"].cpu_request_m, by_name["init-1"].memory_request_mb) == (2100, 1024 + 64)
    # cpu: containers 600 + sidecar 300 = 900 < the init container 1000 + the sidecar before it 300
    # memory: 4 x 100M = 381.5 MiB (the sum of the parts read one by one would be 4 x 95)
    assert (by_name["sidecar-1"].cpu_request_m, by_name["sidecar-1"].memory_request_mb) == (1300, 382)
    assert by_name["web-1"].cpu_request_m == 1000, "a plain pod: its containers' sum"


def test_pod_limits_host_ports_anti_affinity_terms_and_pdb_selectors_are_read(kube) -> None:
    fragmented(kube)
    kube.cluster.put(
        NODES, None, "n1", node("4") | {"status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "3"}}}
    )
    ported = pod("n3", "cart", "500m")
    ported["spec"]["containers"][0]["ports"] = [
        {"containerPort": 8080, "hostPort": 8080, "protocol": "UDP", "hostIP": "10.0.0.1"},
        {"containerPort": 9090},  # no host port
    ]
    by_zone = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["batch", "db"]}]}
    ported["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": by_zone,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "namespaces": ["shop", "data"],
                },
                {"labelSelector": {"matchLabels": {"app": "cart"}}, "topologyKey": "kubernetes.io/hostname"},
                {"labelSelector": {"matchLabels": {"app": "x"}}, "namespaceSelector": {}, "topologyKey": "rack"},
                {"topologyKey": "kubernetes.io/hostname"},  # no labelSelector: selects no pod
            ]
        }
    }
    kube.cluster.put(PODS, "shop", "cart-1", ported)
    web_or_batch = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "batch"]}]}
    for name, spec in (("web-pdb", {"selector": web_or_batch}), ("all-pdb", {"selector": {}}), ("no-pdb", {})):
        kube.cluster.put(PDBS, "shop", name, {"spec": spec, "status": {"disruptionsAllowed": 1}})
    nodes, pods, pdbs, _ = KubernetesTarget(kube.api_client()).read_placement()
    assert {n.name: n.max_pods for n in nodes} == {"n1": 3, "n2": 110, "n3": 110}, "110: the kubelet's default"
    cart = next(p for p in pods if p.name == "cart-1")
    assert cart.host_ports == (HostPort(8080, "UDP", "10.0.0.1"),)
    R = LabelRequirement
    assert cart.anti_affinity_terms == (
        PodAffinityTerm(
            LabelSelector((), (R("app", "In", ("batch", "db")),)), ("shop", "data"), "topology.kubernetes.io/zone"
        ),
        PodAffinityTerm(LabelSelector((("app", "cart"),)), (), "kubernetes.io/hostname"),
        PodAffinityTerm(LabelSelector((("app", "x"),)), None, "rack"),
        PodAffinityTerm(None, (), "kubernetes.io/hostname"),
    )
    assert cart.anti_affinity == (), "the terms are read in full, not as the shorthand"
    covered = sorted((b.name, b.owner) for b in pdbs)  # policy/v1: {} selects every pod, no selector none
    assert covered == [
        ("all-pdb", "batch-rs"),
        ("all-pdb", "cart-rs"),
        ("all-pdb", "web-rs"),
        ("web-pdb", "batch-rs"),
        ("web-pdb", "web-rs"),
    ]
    # The Eviction API refuses a pod two budgets cover (500): web's and batch's pods are unmovable,
    # cart's (under all-pdb only) is not (until 2026-12-07 the planner moved them, then every
    # eviction failed).
    two = "it is covered by 2 PodDisruptionBudgets, which the Eviction API refuses to evict"
    owners = {p.owner: p.unmovable for p in pods if p.namespace == "shop" and p.owner}
    assert owners["web-rs"] == owners["batch-rs"] == two, owners
    assert owners["cart-rs"] != two, owners


def test_ephemeral_storage_is_read_as_the_scheduler_counts_it_on_pods_and_nodes(kube) -> None:
    # a node's allocatable ephemeral storage in MiB (rounded down; none reported: 0, which
    # NodeResourcesFit reads as no room); a pod's request as its memory's: containers' sum, at least
    # any init container, sidecars added, a limit where no request is set, plus overhead, rounded up
    fragmented(kube)
    disk = node("4")
    disk["status"]["allocatable"]["ephemeral-storage"] = "95500736762"  # bytes, as a kubelet reports it
    kube.cluster.put(NODES, None, "n4", disk)
    bitnami = pod("n1", "bitnami", "100m")
    bitnami["spec"] |= {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "100m", "ephemeral-storage": "50Mi"}}},
            {"name": "b", "resources": {"limits": {"ephemeral-storage": "100M"}}},  # the request defaults to it
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}],
        "overhead": {"ephemeral-storage": "1Mi"},
    }
    kube.cluster.put(PODS, "shop", "bitnami-1", bitnami)
    nodes, pods, _, _ = KubernetesTarget(kube.api_client()).read_placement()
    assert {n.name: n.ephemeral_storage_mb for n in nodes} == {"n1": 0, "n2": 0, "n3": 0, "n4": 91076}
    by_name = {p.name: p for p in pods}
    assert by_name["bitnami-1"].ephemeral_storage_request_mb == 1024 + 1, "the init container, plus overhead"
    assert by_name["bitnami-1"].unmovable == ""
    assert by_name["web-1"].ephemeral_storage_request_mb == 0
    bitnami["spec"]["initContainers"] = []
    kube.cluster.put(PODS, "shop", "bitnami-1", bitnami)
    _, pods, _, _ = KubernetesTarget(kube.api_client()).read_placement()
    # 50 MiB + 100 MB (95.37 MiB) + 1 MiB = 146.37 MiB, rounded up
    assert {p.name: p.ephemeral_storage_request_mb for p in pods}["bitnami-1"] == 147


def test_pods_with_rules_the_planner_does_not_model_are_read_as_unmovable(kube) -> None:
    fragmented(kube)
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "pvc-1": (
            {
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                    {"name": "c", "configMap": {}},
                ]
            },
            "it mounts a volume of type persistentVolumeClaim",
        ),
        "local-1": (
            {"volumes": [{"name": "h", "hostPath": {"path": "/x"}}, {"name": "e", "ephemeral": {}}]},
            "it mounts volumes of type ephemeral and hostPath",
        ),
        "gpu-1": (
            {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]},
            "it requests nvidia.com/gpu",
        ),
        "huge-1": (
            {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "hugepages-2Mi": "20Mi"}}}]},
            "it requests hugepages-2Mi",
        ),
        "near-1": (
            {
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}
                }
            },
            "it has required pod affinity",
        ),
        "spread-1": (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "it has a topology spread constraint with whenUnsatisfiable DoNotSchedule",
        ),
        "own-1": ({"schedulerName": "volcano"}, "it is scheduled by volcano, not the default scheduler"),
        "claim-1": ({"resourceClaims": [{"name": "gpu"}]}, "it claims devices (spec.resourceClaims)"),
        "both-1": (
            {
                "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "z"}]}},
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
            },
            "it has required pod affinity and mounts a volume of type persistentVolumeClaim",
        ),
    }
    for name, (spec, _) in cases.items():
        kube.cluster.put(PODS, "shop", name, pod("n1", name.split("-")[0], "100m", **spec))
    movable = {
        "soft-1": {
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway"}]
        },
        "plain-1": {
            "volumes": [{"name": "t", "projected": {}}, {"name": "s", "secret": {}}, {"name": "d", "emptyDir": {}}]
        },
        # ephemeral storage is weighed against the node's allocatable, as memory (a Bitnami preset)
        "disk-1": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "ephemeral-storage": "50Mi"}}}]},
        # a zero quantity in any unit asks for nothing
        "zero-1": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "0", "hugepages-2Mi": "0Mi"}}}],
            "overhead": {"hugepages-1Gi": "0Gi"},
        },
    }
    for name, spec in movable.items():
        kube.cluster.put(PODS, "shop", name, pod("n1", name.split("-")[0], "100m", **spec))
    starting = pod("n1", "starting", "100m")
    starting["status"]["phase"] = "Pending"  # bound to n1, not running yet: it takes its place there
    kube.cluster.put(PODS, "shop", "starting-1", starting)
    leaving = pod("n1", "leaving", "100m")
    leaving["metadata"]["deletionTimestamp"] = "2026-12-05T01:00:00Z"
    kube.cluster.put(PODS, "shop", "leaving-1", leaving)
    done = pod("n1", "done", "100m")
    done["status"]["phase"] = "Succeeded"  # finished: the scheduler no longer counts it
    kube.cluster.put(PODS, "shop", "done-1", done)
    _, pods, _, _ = KubernetesTarget(kube.api_client()).read_placement()
    by_name = {p.name: p for p in pods}
    for name, (_, start) in cases.items():
        assert by_name[name].unmovable.startswith(f"{start}, which the planner does not model"), name
    assert all(by_name[name].unmovable == "" for name in (*movable, "web-1", "cart-1"))
    assert by_name["starting-1"].unmovable == "it is not running (phase Pending)"
    assert by_name["leaving-1"].unmovable == "it is terminating"
    assert "done-1" not in by_name


def test_a_plan_keeps_zone_anti_affinity_and_leaves_a_pvc_pod_saying_why(kube) -> None:
    # unconstrained, cart-1 goes n3 -> n2 (n3 freed) and web-2 n2 -> n1 (away from batch-1); here n1
    # and n2 are zone z1, where batch-1 runs, which cart-1's zone rule keeps it out of, and web-2
    # mounts a PersistentVolumeClaim
    fragmented(kube)
    for name, zone in (("n1", "z1"), ("n2", "z1"), ("n3", "z2")):
        labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
        kube.cluster.put(NODES, None, name, node("4") | {"metadata": {"labels": labels}})
    not_with_batch = {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["batch"]}]},
        "topologyKey": "topology.kubernetes.io/zone",
    }
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [not_with_batch]}}
    kube.cluster.put(PODS, "shop", "cart-1", pod("n3", "cart", "500m", affinity=anti))
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}}]
    kube.cluster.put(PODS, "shop", "web-2", pod("n2", "web", "1", "latency-critical", volumes=volumes))
    target = KubernetesTarget(kube.api_client(), placement=True)
    plan = make_plan({}, target.read_state([]), [], NOW, max_moves=4)
    moves = {m.pod: (m.from_node, m.to_node) for m in plan.actions if isinstance(m, MovePod)}
    assert moves == {"web-1": ("n1", "n3")}, "n1 is freed instead; cart-1 may not join batch-1's zone"
    assert plan.notes == (
        "rebalancing leaves shop/web-2 where it is: it mounts a volume of type persistentVolumeClaim, which the "
        "planner does not model: the scheduler could refuse its replacement on the planned node",
    )
    kube.cluster.put(PODS, "shop", "web-2", pod("n2", "web", "1", "latency-critical"))
    kube.cluster.put(NODES, None, "n1", node("4") | {"metadata": {"labels": {"topology.kubernetes.io/zone": "z3"}}})
    assert planned_moves(target) == {"cart-1": ("n3", "n1"), "web-2": ("n2", "n1")}, "n1 is now in zone z3"


def test_a_pod_under_two_pdbs_is_refused_before_any_eviction(kube) -> None:  # type: ignore[no-untyped-def]
    """A pod two PDBs cover is refused before any eviction is sent: the Eviction API answers 500 for
    it whatever the budgets allow (since 2026-12-07; before, the tightest budget was read and its 0
    refused the move, untested until the mutation audit of 2026-12-06)."""
    meta = {
        "labels": {"app": "web", "tier": "front"},
        "ownerReferences": [
            {"kind": "ReplicaSet", "name": "web-1", "controller": True, "apiVersion": "apps/v1", "uid": "u"}
        ],
    }
    kube.cluster.put(
        PODS, "default", "p1", {"metadata": meta, "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}}
    )
    for name, label, allowed in (("a", {"app": "web"}, 1), ("b", {"tier": "front"}, 0)):
        kube.cluster.put(
            PDBS,
            "default",
            name,
            {"spec": {"selector": {"matchLabels": label}}, "status": {"disruptionsAllowed": allowed}},
        )
    act = Actuator(KubernetesTarget(kube.api_client(), [], timeout_s=2.0), None, [], SafetyConfig())
    (res,) = act.apply_plan(Plan(NOW, (MovePod("default", "p1", "n1", "n2", Reason("t", "t")),)), NOW)
    assert res.outcome == "skipped" and "is covered by 2 PodDisruptionBudgets (a, b)" in res.detail, res
    assert not [c for c in kube.cluster.writes() if "eviction" in str(c)]
