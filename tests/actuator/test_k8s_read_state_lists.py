"""read_state lists a namespace's Deployments / StatefulSets in one request when it reads more than a few
of them there (scale audit F4: one GET per workload was 10,000 requests a cycle at 10,000 workloads)."""

from __future__ import annotations

import logging

from kubeemu import DEPLOYMENTS, STATEFULSETS, Fault, deployment

from actuator.kubernetes import KubernetesTarget
from scaleahead.types import WorkloadRef

BIG = [WorkloadRef("Deployment", "big", f"w{i}") for i in range(12)]
SETS = [WorkloadRef("StatefulSet", "big", f"s{i}") for i in range(6)]
SMALL = [WorkloadRef("Deployment", "small", f"w{i}") for i in range(2)]


def put(kube, refs) -> None:
    for i, ref in enumerate(refs):
        kube.cluster.put(
            STATEFULSETS if ref.kind == "StatefulSet" else DEPLOYMENTS, ref.namespace, ref.name, deployment(i + 1)
        )
    kube.cluster.put(DEPLOYMENTS, "big", "not-ours", deployment(7))  # in the list, not read


def reads(kube) -> list[str]:
    return [p for m, p in kube.cluster.calls() if m == "GET" and ("/deployments" in p or "/statefulsets" in p)]


def test_a_namespace_with_more_than_a_few_workloads_is_listed_once_a_small_one_gets_its_own(kube):
    for refs in (BIG, SETS, SMALL):
        put(kube, refs)
    state = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False).read_state(BIG + SETS + SMALL)
    assert sorted(reads(kube)) == [
        "/apis/apps/v1/namespaces/big/deployments",
        "/apis/apps/v1/namespaces/big/statefulsets",
        "/apis/apps/v1/namespaces/small/deployments/w0",
        "/apis/apps/v1/namespaces/small/deployments/w1",
    ]  # until 2026-12-06: 20 GETs, one per workload
    assert state.unreadable == {}
    for refs in (BIG, SETS, SMALL):
        assert [state.workloads[r].replicas for r in refs] == list(range(1, len(refs) + 1))


def test_a_workload_missing_from_the_list_or_malformed_reads_as_with_its_own_get(kube):
    put(kube, BIG)
    kube.cluster.put(DEPLOYMENTS, "big", "w3", {**deployment(2), "spec": {"replicas": "two"}})
    refs = [*BIG, WorkloadRef("Deployment", "big", "gone")]
    listed = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False)
    one_by_one = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False)
    one_by_one.LIST_ABOVE = 1000
    a, b = listed.read_state(refs), one_by_one.read_state(refs)
    assert set(a.unreadable) == {refs[3], refs[-1]}
    assert a.unreadable == b.unreadable  # the same reasons word for word (404, the malformed field)
    assert "does not exist (404)" in a.unreadable[refs[-1]]
    assert {r: s.replicas for r, s in a.workloads.items()} == {r: s.replicas for r, s in b.workloads.items()}


def test_a_list_refused_falls_back_to_one_get_each_with_one_warning(kube, caplog):
    put(kube, BIG)
    forbidden = 'deployments.apps is forbidden: cannot list resource "deployments" in API group "apps"'
    kube.cluster.faults.append(
        Fault("GET", "/namespaces/big/deployments", 403, message=forbidden, times=2, at_end=True)
    )
    target = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False)
    with caplog.at_level(logging.WARNING, "scaleahead"):
        first = target.read_state(BIG)
        second = target.read_state(BIG)
    for state in (first, second):
        assert state.unreadable == {}
        assert [state.workloads[r].replicas for r in BIG] == list(range(1, 13))
    warned = [r for r in caplog.records if getattr(r, "event", "") == "list_failed"]
    assert len(warned) == 1, [r.getMessage() for r in warned]  # once per namespace and reason
    assert "RBAC forbids 'list' on deployments" in warned[0].getMessage(), warned[0].getMessage()
    assert "reading its 12 workloads one by one" in warned[0].getMessage()
    assert len(reads(kube)) == 2 * (1 + 12)
