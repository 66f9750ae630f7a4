"""Small builders for hand-made clusters (1 CPU core = 1000 m, memory follows CPU by default)."""

from __future__ import annotations

from scaleahead.types import ClusterState, Node, Pod, PodDisruptionBudget

# db-1 with owner="" in the tests is a bare pod: nothing would recreate it, so it never moves.


def node(name: str, cpu_m: int = 10_000, memory_mb: int = 10_000, schedulable: bool = True) -> Node:
    return Node(name, cpu_m, memory_mb, schedulable=schedulable)


def pod(
    name: str,
    on: str,
    cpu: int,
    peak: float | None = None,
    cls: str = "none",
    owner: str | None = None,
    ns: str = "app",
    anti: tuple[str, ...] = (),
    mem: int | None = None,
    usage: float | None = None,
) -> Pod:
    return Pod(
        namespace=ns,
        name=name,
        node=on,
        cpu_request_m=cpu,
        memory_request_mb=cpu if mem is None else mem,
        owner=name.rsplit("-", 1)[0] if owner is None else owner,
        usage_cpu_m=float(cpu if usage is None else usage),
        peak_cpu_m=float(cpu if peak is None else peak),
        interference=cls,  # type: ignore[arg-type]
        labels={"app": name.rsplit("-", 1)[0]},
        anti_affinity=anti,
    )


def cluster(nodes: list[Node], pods: list[Pod], pdbs: list[PodDisruptionBudget] | None = None) -> ClusterState:
    return ClusterState(nodes=tuple(nodes), pods=tuple(pods), pdbs=tuple(pdbs or ()))
