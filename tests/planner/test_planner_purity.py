"""The planner is pure (../shared/STYLE.md): no clock, no file, no network. One plan with every
part at once (services under a shared capacity, functions under a warm-memory budget, rebalancing
moves) runs while the clock, `open` and sockets raise; it still decides, and the same inputs give
the same plan twice."""

from __future__ import annotations

import builtins
import datetime as dt
import socket
import time

import pytest
from planner_helpers import flat_forecast, function_policy, invocation_forecast, service_policy

from planner import plan
from scaleahead.policy import Policy
from scaleahead.types import (
    ClusterState,
    Forecast,
    InvocationForecast,
    MovePod,
    Node,
    Plan,
    Pod,
    ScaleTo,
    SetWarmPool,
    WorkloadRef,
    WorkloadState,
)

NOW = 1_000_000.0


def _pod(name: str, node: str, cpu: int, cls: str) -> Pod:
    return Pod("app", name, node, cpu, cpu, owner=name.rsplit("-", 1)[0], usage_cpu_m=float(cpu),
               peak_cpu_m=float(cpu), interference=cls, labels={"app": name.rsplit("-", 1)[0]})  # type: ignore[arg-type]  # fmt: skip


def _inputs() -> tuple[dict[WorkloadRef, Forecast], ClusterState, list[Policy], dict[WorkloadRef, InvocationForecast]]:
    a = service_policy("a", maxReplicas=100, maxStepUp=100, tenant="t1")
    b = service_policy("b", maxReplicas=100, maxStepUp=100, tenant="t2")
    fns = [function_policy(f"f{i}") for i in range(3)]
    ws = {p.workload: WorkloadState(p.workload, 2, 2, observed_demand=10.0, observed_at=NOW - 5) for p in (a, b)}
    for f in fns:
        ws[f.workload] = WorkloadState(f.workload, 0, 0, observed_demand=1.0, observed_at=NOW - 5, warm_instances=0)
    forecasts = {p.workload: flat_forecast(p.workload, NOW, 300.0) for p in (a, b)}
    invocations = {f.workload: invocation_forecast(f.workload, NOW, [0.9] * 15) for f in fns[:2]}
    nodes = tuple(Node(f"n{i}", 10_000, 10_000) for i in range(3))
    pods = (
        _pod("web-1", "n0", 1000, "none"),
        _pod("web-2", "n1", 1000, "none"),
        _pod("etl-1", "n2", 500, "cpu-bound"),
        _pod("api-1", "n2", 500, "latency-critical"),
    )
    state = ClusterState(workloads=ws, nodes=nodes, pods=pods)
    return forecasts, state, [a, b, *fns], invocations


def test_a_plan_reads_no_clock_no_file_and_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    forecasts, state, policies, invocations = _inputs()

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the planner read a clock, a file or the network")

    class _NoNow(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> dt.datetime:  # type: ignore[override]
            raise AssertionError("the planner read the clock")

    def run() -> Plan:
        return plan(forecasts, state, policies, NOW, max_moves=4, invocations=invocations, capacity={"*": 30},
                    warm_memory_budget_mb=250)  # fmt: skip

    before = run()
    for name in ("time", "time_ns", "monotonic", "monotonic_ns", "localtime", "gmtime"):
        monkeypatch.setattr(time, name, forbidden)
    monkeypatch.setattr(dt, "datetime", _NoNow)
    monkeypatch.setattr(builtins, "open", forbidden)
    monkeypatch.setattr(socket, "socket", forbidden)
    after = run()
    kinds = {type(a) for a in after.actions}
    assert {ScaleTo, SetWarmPool, MovePod} <= kinds, kinds
    assert after == before
