"""read_state lists a namespace's Deployments / StatefulSets in one request when it reads more than a few
of them there (scale audit F4: one GET per workload was 10,000 requests a cycle at 10,000 workloads)."""

from __future__ import annotations

import json
import logging

from kubeemu import DEPLOYMENTS, STATEFULSETS, Fault, deployment

from actuator.kubernetes import KubernetesTarget
from scaleahead.clock import VirtualClock
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
    assert "Grant list on deployments (deploy/base/rbac.yaml)" in warned[0].getMessage()
    assert "reading its 12 workloads one by one" in warned[0].getMessage()
    assert len(reads(kube)) == 2 * (1 + 12)


def lists(kube, namespace: str = "big") -> list[str]:
    return [p for p in reads(kube) if p.endswith(f"/namespaces/{namespace}/deployments")]


def test_a_namespace_of_far_more_others_is_not_listed_for_a_few_of_ours(kube, caplog):
    # 6 of ours among 300 others (pages of 50 here; of 500 by default): the first page's
    # remainingItemCount says the namespace holds more than LIST_SPARSE times ours, so the list stops
    # there and ours are read one by one; not listed again until the number of ours there changes
    # (or LIST_RECHECK_S). Until 2026-12-06 the whole namespace was paged through every cycle (here 7
    # pages a cycle; 6 of ours among 10,000 Deployments: 21 pages, 30-100 MB).
    ours = [WorkloadRef("Deployment", "big", f"w{i}") for i in range(7)]
    put(kube, ours)
    for i in range(300):
        kube.cluster.put(DEPLOYMENTS, "big", f"other{i:03}", deployment(1))
    clock = VirtualClock(1_000_000.0)
    target = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False, clock=clock)
    target.LIST_PAGE = 50
    with caplog.at_level(logging.INFO, "scaleahead"):
        first = target.read_state(ours[:6])
    assert len(lists(kube)) == 1  # the first page only
    assert [r for r in caplog.records if getattr(r, "event", "") == "list_sparse"]
    second = target.read_state(ours[:6])
    assert len(lists(kube)) == 1  # not listed again
    for state in (first, second):
        assert state.unreadable == {}
        assert [state.workloads[r].replicas for r in ours[:6]] == list(range(1, 7))
    assert len(reads(kube)) == 1 + 2 * 6  # ours read one by one (none was on the first page)
    target.read_state(ours)  # one more of ours there: worth another look, still far too many others
    assert len(lists(kube)) == 2
    target.read_state(ours)
    assert len(lists(kube)) == 2
    clock.sleep(target.LIST_RECHECK_S)
    target.read_state(ours)  # and again after LIST_RECHECK_S
    assert len(lists(kube)) == 3


def test_without_remaining_item_count_the_objects_paged_through_bound_the_list(kube):
    # a server that leaves out remainingItemCount: the list stops once the objects paged through
    # exceed LIST_SPARSE times ours (here after 5 pages of 50 of the 7 a full list takes)
    ours = [WorkloadRef("Deployment", "big", f"w{i}") for i in range(6)]
    put(kube, ours)
    for i in range(300):
        kube.cluster.put(DEPLOYMENTS, "big", f"other{i:03}", deployment(1))
    target = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False)
    target.LIST_PAGE = 5
    real = target.apps.list_namespaced_deployment

    class Answer:
        def __init__(self, resp) -> None:
            page = json.loads(resp.data)
            assert page["metadata"].pop("remainingItemCount", 0) > 0 or not page["metadata"].get("continue")
            self.data, self.status = json.dumps(page).encode(), resp.status

    target.apps.list_namespaced_deployment = lambda namespace, **kw: Answer(real(namespace, **kw))
    state = target.read_state(ours)
    assert len(lists(kube)) == 5  # 25 objects > 4 x 6; until 2026-12-06 all 62 pages
    assert state.unreadable == {} and [state.workloads[r].replicas for r in ours] == list(range(1, 7))
    target.read_state(ours)
    assert len(lists(kube)) == 5


def test_a_namespace_a_few_times_ours_is_still_listed_in_pages(kube):
    put(kube, BIG)  # 12 of ours and one other: 3 pages of 5, all read from the list
    target = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False)
    target.LIST_PAGE = 5
    for _ in range(2):
        state = target.read_state(BIG)
        assert state.unreadable == {}
        assert [state.workloads[r].replicas for r in BIG] == list(range(1, 13))
    assert reads(kube) == lists(kube) and len(lists(kube)) == 2 * 3


def test_a_list_gone_on_its_continue_token_falls_back_without_an_rbac_hint(kube, caplog):
    put(kube, BIG)
    expired = "The provided continue parameter is too old to display a consistent list result."
    kube.cluster.faults.append(Fault("GET", "/namespaces/big/deployments", 410, message=expired, skip=1, at_end=True))
    target = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False)
    target.LIST_PAGE = 5
    with caplog.at_level(logging.WARNING, "scaleahead"):
        state = target.read_state(BIG)
    assert state.unreadable == {}
    assert [state.workloads[r].replicas for r in BIG] == list(range(1, 13))
    warned = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "list_failed"]
    assert len(warned) == 1 and "410" in warned[0], warned
    assert "reading its 12 workloads one by one" in warned[0]
    assert "rbac" not in warned[0].lower() and "Grant" not in warned[0], warned  # until 2026-12-06 it said so


def test_a_proxy_repeating_a_continue_token_or_endless_pages_fall_back_to_gets(kube, caplog):
    put(kube, BIG)
    target = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, quotas=False)
    target.LIST_PAGE = 5
    real = target.apps.list_namespaced_deployment
    calls = []

    def drops_continue(namespace, **kwargs):  # a proxy that drops the query's continue: page 1 forever
        calls.append(kwargs.pop("_continue", None))
        assert len(calls) < 50, "no bound on the pages"
        return real(namespace, **kwargs)

    target.apps.list_namespaced_deployment = drops_continue
    with caplog.at_level(logging.WARNING, "scaleahead"):
        state = target.read_state(BIG)
        assert len(calls) == 2  # the first page, then its token answered again: given up
        assert state.unreadable == {}
        assert [state.workloads[r].replicas for r in BIG] == list(range(1, 13))
        target.apps.list_namespaced_deployment = real
        target.LIST_MAX_PAGES = 2  # 3 pages needed: given up after 2
        state = target.read_state(BIG)
        assert state.unreadable == {}
    warned = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "list_failed"]
    assert len(warned) == 2, warned
    assert "continue token it had given before" in warned[0]
    assert "still more after 2 pages of 5" in warned[1]
