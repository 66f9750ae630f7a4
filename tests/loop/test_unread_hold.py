"""The shared limits keep an unreadable workload's pods (``scaleahead.unread.UnreadBook``)."""

from __future__ import annotations

from scaleahead.types import ClusterState, WorkloadState
from scaleahead.unread import UnreadBook
from tests.planner.planner_helpers import function_policy, service_policy


def _state(read: dict, unreadable: tuple = ()) -> ClusterState:
    return ClusterState(workloads=read, unreadable={ref: "500" for ref in unreadable})


def test_a_service_holds_its_last_read_replicas_in_its_tenant_and_the_cluster_capacity() -> None:
    web, api = service_policy("web", tenant="shop"), service_policy("api", tenant="shop")
    book = UnreadBook()
    refs = [web.workload, api.workload]
    book.update(
        _state({web.workload: WorkloadState(web.workload, 7, 7), api.workload: WorkloadState(api.workload, 2, 2)}),
        refs,
        0.0,
    )
    book.update(_state({api.workload: WorkloadState(api.workload, 3, 3)}, (web.workload,)), refs, 10.0)
    held = book.hold([web, api], {web.workload: "500"}, {"shop": 20, "*": 30, "other": 5}, None)
    assert held.capacity == {"shop": 13, "*": 23, "other": 5}
    assert held.warm_memory_budget_mb is None
    assert held.notes == (
        f"{web.workload.key}: its state cannot be read, so its 7 replicas (as last read) stay counted against "
        "loop.capacity['shop'] and loop.capacity['*']",
    )
    # A limit smaller than what is held leaves nothing, never a negative capacity.
    assert book.hold([web, api], {web.workload: "500"}, {"*": 5}, None).capacity == {"*": 0}


def test_a_function_holds_its_warm_instances_and_their_memory() -> None:
    fn = function_policy("fn")  # 200 MB an instance
    book = UnreadBook()
    book.update(_state({fn.workload: WorkloadState(fn.workload, 3, 3, warm_instances=2)}), [fn.workload], 0.0)
    held = book.hold([fn], {fn.workload: "timeout"}, {"*": 10}, 1000.0)
    assert held.capacity == {"*": 8}
    assert held.warm_memory_budget_mb == 600.0 and held.warm_memory_held_mb == 400.0
    assert "its 2 warm instances (as last read)" in held.notes[0]
    assert "400 MB of loop.warm_memory_budget_mb" in held.notes[0]
    # Never read: a function holds nothing it is known to have (its warm pool has no floor).
    assert UnreadBook().hold([fn], {fn.workload: "timeout"}, {"*": 10}, 1000.0).capacity == {"*": 10}


def test_a_workload_never_read_holds_its_min_replicas_and_a_removed_one_is_forgotten() -> None:
    web = service_policy("web", minReplicas=3)
    book = UnreadBook()
    held = book.hold([web], {web.workload: "500"}, {"*": 10}, None)
    assert held.capacity == {"*": 7}
    assert "its 3 replicas (its minReplicas: not read since the start)" in held.notes[0]
    book.update(_state({web.workload: WorkloadState(web.workload, 5, 5)}), [web.workload], 0.0)
    assert web.workload in book.last
    book.update(_state({}), [], 10.0)  # its policy is gone
    assert book.last == {}


def test_nothing_is_held_without_a_shared_limit_or_an_unreadable_workload() -> None:
    web = service_policy("web", minReplicas=3)
    book = UnreadBook()
    assert book.hold([web], {}, {"*": 10}, None).capacity == {"*": 10}
    held = book.hold([web], {web.workload: "500"}, None, None)
    assert (held.capacity, held.warm_memory_budget_mb, held.notes) == (None, None, ())


def test_scaleaheads_own_writes_are_what_an_unreadable_workload_holds() -> None:
    # Cooled 2 -> 0 by scaleahead, then unreadable: until 2026-12-07 it held the 2 instances read
    # before the write (loop reasons audit part 2). A direct scale-down counts at once; a floor only
    # when raised (the HPA may run more than it).
    from actuator.base import ActionResult
    from scaleahead.types import Reason, ScaleTo, SetWarmPool

    fn, web = function_policy("fn"), service_policy("web")
    floor = service_policy("api", target={"name": "api", "namespace": "shop", "mode": "floor", "hpaName": "api"})
    pols = [fn, web, floor]
    book = UnreadBook()
    read = {
        fn.workload: WorkloadState(fn.workload, 3, 3, warm_instances=2),
        web.workload: WorkloadState(web.workload, 7, 7),
        floor.workload: WorkloadState(floor.workload, 5, 5),
    }
    book.update(_state(read), [p.workload for p in pols], 0.0)
    why = Reason("t", "t")
    results = [
        ActionResult(SetWarmPool(fn.workload, 2, 0, 0.0, why), "applied", "", written=0),
        ActionResult(ScaleTo(web.workload, 7, 4, why), "applied", "", written=4),
        ActionResult(ScaleTo(floor.workload, 5, 2, why), "applied", "", written=2),
    ]
    book.wrote(results, pols, 10.0)
    assert book.last[fn.workload][1] == 0 and book.last[web.workload][0] == 4 and book.last[floor.workload][0] == 5
    held = book.hold(pols, {fn.workload: "403", web.workload: "500"}, {"*": 20}, 1000.0)
    assert held.capacity == {"*": 16} and held.warm_memory_budget_mb == 1000.0
    assert held.notes == (
        f"{web.workload.key}: its state cannot be read, so its 4 replicas (as scaleahead last wrote it) stay "
        "counted against loop.capacity['*']",
    )
    # A raised floor counts; a failed or skipped write, or a dry run, leaves the last read.
    book.wrote([ActionResult(ScaleTo(floor.workload, 5, 9, why), "applied", "", written=9)], pols, 20.0)
    book.wrote([ActionResult(ScaleTo(web.workload, 4, 9, why), "failed", "500")], pols, 20.0)
    book.wrote([ActionResult(ScaleTo(web.workload, 4, 8, why), "dry-run", "", written=8)], pols, 20.0)
    assert book.last[floor.workload][0] == 9 and book.last[web.workload][0] == 4
