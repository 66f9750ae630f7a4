"""The actuator tests' Kubernetes API: the emulator lives in ``scaleahead/bench/kubeemu.py``
(``scaleahead bench control-plane`` runs it too); this module re-exports it for the tests'
``from kubeemu import ...`` and adds the ``kube`` fixture and the ``policy`` helper.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import kmock
import pytest

from scaleahead.bench.kubeemu import (
    CONFIGMAPS,
    DEPLOYMENTS,
    HPAS,
    KSVC,
    LEASES,
    LIMITRANGES,
    NODES,
    PDBS,
    POD_METRICS,
    PODS,
    QUOTAS,
    RUNTIMECLASSES,
    STATEFULSETS,
    Cluster,
    Fault,
    Running,
    deployment,
)

__all__ = [
    "CONFIGMAPS",
    "DEPLOYMENTS",
    "HPAS",
    "KSVC",
    "LEASES",
    "LIMITRANGES",
    "NODES",
    "PDBS",
    "POD_METRICS",
    "PODS",
    "QUOTAS",
    "RUNTIMECLASSES",
    "STATEFULSETS",
    "Cluster",
    "Fault",
    "Running",
    "deployment",
    "kube",
    "policy",
]


@pytest.fixture
def kube() -> Iterator[Running]:
    """A fresh emulated cluster on a loopback port, served from a background thread."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    def serve() -> None:
        loop = asyncio.new_event_loop()
        box["loop"] = loop

        async def main() -> None:
            async with Cluster() as cluster, kmock.Server(cluster) as server:
                cluster.declare()
                box["cluster"], box["url"] = cluster, str(server.url)
                box["stop"] = asyncio.Event()
                ready.set()
                await box["stop"].wait()

        loop.run_until_complete(main())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10), "the emulator did not start"
    running = Running(box["cluster"], box["url"], box["loop"])
    try:
        yield running
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)


def policy(
    name: str = "web",
    kind: str = "Deployment",
    mode: str = "direct",
    hpa: str | None = None,
    min_replicas: int = 1,
    max_replicas: int = 20,
    max_step_up: int = 100,
    max_step_down: int = 100,
    warm_max: int = 5,
) -> Any:
    from scaleahead.policy import Policy

    target: dict[str, Any] = {"kind": kind, "namespace": "default", "name": name, "mode": mode}
    if hpa:
        target["hpaName"] = hpa
    return Policy.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "target": target,
                "demand": {"query": "rate(x[1m])"},
                "capacityPerReplica": 10,
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "maxStepUp": max_step_up,
                "maxStepDown": max_step_down,
                "warmPool": {"enabled": kind == "KnativeService", "maxInstances": warm_max},
            },
        }
    )
