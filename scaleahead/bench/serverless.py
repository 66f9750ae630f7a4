"""``scaleahead bench serverless``: pre-warming against cold starts, EVALUATION.md section 5 exactly.

Composition root: the ``scaleahead`` policy is the real thing end to end: the invocation
forecaster (``forecaster.invocations``) -> ``planner.plan`` with one ``workloadClass: function``
policy per function -> ``actuator.base.apply_plan`` -> the simulated serverless platform
(``actuator.simulated_serverless``). The peers (``scaleahead.bench.serverless_peers``) decide
warm minutes directly. All are scored by one function, ``score``, from the warm matrix and the
counts, which is also what the ``--decisions`` file holds, so anyone can recompute the metrics.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from actuator.base import apply_plan
from actuator.simulated_serverless import SimulatedServerless
from forecaster.invocations import InvocationForecaster
from planner import plan as make_plan
from scaleahead.bench.serverless_peers import FixedKeepAlive, HybridHistogram, Oracle
from scaleahead.errors import DataError
from scaleahead.policy import Policy, PolicySpec, WarmPool
from scaleahead.traces import FunctionsTrace
from scaleahead.types import WorkloadRef

POLICIES = ("scaleahead", "fixed_keepalive_10m", "fixed_keepalive_20m", "hybrid_histogram", "oracle")
BoolMatrix = npt.NDArray[np.bool_]
IntMatrix = npt.NDArray[np.int64]
#: Default warm-pool threshold of the scaleahead policy: the schema's default (docs/serverless.md).
DEFAULT_MIN_PROBABILITY = WarmPool.model_fields["min_probability"].default


@dataclass(frozen=True, slots=True)
class ServerlessRun:
    """The outcome of one run: warm matrices ``[functions, test minutes]`` and metrics per policy."""

    trace: str
    history_minutes: int
    test_minutes: int
    counts: IntMatrix  # [functions, test minutes]
    warm: dict[str, BoolMatrix]
    metrics: dict[str, dict[str, float | int | None]]
    names: tuple[str, ...]
    memory_mb: npt.NDArray[np.float64]
    params: dict[str, Any]


def score(counts: IntMatrix, warm: BoolMatrix, memory_mb: npt.NDArray[np.float64]) -> dict[str, float | int | None]:
    """The metrics of EVALUATION.md section 5 (without ``wasted_memory_rel_fixed10``).

    Args:
        counts: invocations ``[functions, minutes]`` of the test period.
        warm: whether each function had a warm instance for each minute (decided before it).
        memory_mb: memory of one warm instance of each function.
    """
    active = counts > 0
    cold = active & ~warm
    invocations = int(counts.sum())
    cold_starts = int(cold.sum())
    wasted = float(((warm & ~active) * memory_mb[:, None]).sum())
    inv_f = counts.sum(axis=1)
    called = inv_f > 0
    cold_pct = 100.0 * cold.sum(axis=1)[called] / inv_f[called]
    return {
        "cold_start_fraction": cold_starts / invocations if invocations else None,
        "p75_function_cold_pct": float(np.percentile(cold_pct, 75)) if cold_pct.size else None,
        "wasted_memory_mb_min": wasted,
        "cold_starts": cold_starts,
        "invocations": invocations,
        "warm_minutes": int(warm.sum()),
    }


def add_relative(metrics: dict[str, dict[str, float | int | None]]) -> None:
    """Add ``wasted_memory_rel_fixed10`` = wasted memory / that of ``fixed_keepalive_10m``."""
    base = metrics.get("fixed_keepalive_10m", {}).get("wasted_memory_mb_min")
    for m in metrics.values():
        wasted = m["wasted_memory_mb_min"]
        m["wasted_memory_rel_fixed10"] = (
            float(wasted) / float(base) if base and wasted is not None and float(base) > 0 else None
        )


def function_policies(trace: FunctionsTrace, min_probability: float) -> tuple[list[WorkloadRef], list[Policy]]:
    """One ``workloadClass: function`` policy per function, warm pool on, its memory per instance."""
    refs: list[WorkloadRef] = []
    policies: list[Policy] = []
    for i, name in enumerate(trace.names):
        fn = name[:48]
        app = trace.apps[i][:48]
        ref = WorkloadRef("KnativeService", f"app-{app}"[:63], f"fn-{i}-{fn}"[:63])
        spec = PolicySpec.model_validate(
            {
                "target": {"kind": "KnativeService", "namespace": ref.namespace, "name": ref.name},
                "demand": {"query": f'invocations{{function="{name}"}}', "unit": "invocations/min", "stepSeconds": 60},
                "capacityPerReplica": 1.0,
                "workloadClass": "function",
                "warmPool": {
                    "enabled": True,
                    "maxInstances": 1,
                    "memoryMbPerInstance": float(trace.memory_mb[i]),
                    "minProbability": min_probability,
                },
                "fallback": {"staleAfterSeconds": 120},
            }
        )
        refs.append(ref)
        policies.append(
            Policy.model_validate({"metadata": {"name": ref.name, "namespace": ref.namespace}, "spec": spec})
        )
    return refs, policies


def run_scaleahead(
    trace: FunctionsTrace, history: int, min_probability: float = DEFAULT_MIN_PROBABILITY, step_s: float = 60.0
) -> tuple[BoolMatrix, SimulatedServerless]:
    """The project's policy through the real forecaster, planner and actuator path."""
    counts = trace.counts
    refs, policies = function_policies(trace, min_probability)
    model = InvocationForecaster(len(refs), step_s=step_s).fit(counts[:, :history])
    sim = SimulatedServerless(refs, trace.memory_mb, start=trace.start + history * step_s, step_s=step_s)
    n_test = counts.shape[1] - history
    warm = np.zeros((len(refs), n_test), dtype=bool)
    for k in range(n_test):
        now = sim.now
        forecasts = model.forecasts(refs, now)
        state = sim.read_state(refs)
        result = make_plan({}, state, policies, now, step_s, invocations=forecasts)
        for r in apply_plan(result, sim):
            if r.outcome == "failed":
                raise RuntimeError(f"simulated platform refused {r.action}: {r.detail}")
        column = counts[:, history + k]
        warm[:, k] = sim.step(column)
        model.observe(column)
    return warm, sim


def _run_online(peer: FixedKeepAlive | HybridHistogram, counts: IntMatrix, history: int) -> BoolMatrix:
    for t in range(history):
        peer.observe(counts[:, t])
    warm = np.zeros((counts.shape[0], counts.shape[1] - history), dtype=bool)
    for k in range(warm.shape[1]):
        warm[:, k] = peer.decide()
        peer.observe(counts[:, history + k])
    return warm


def run_policies(
    trace: FunctionsTrace,
    history: int,
    policies: Sequence[str] = POLICIES,
    min_probability: float = DEFAULT_MIN_PROBABILITY,
    trace_name: str = "",
    progress: Callable[[str], None] | None = None,
) -> ServerlessRun:
    """Run every policy on the test period ``[history, end)`` and score it."""
    counts = trace.counts
    minutes = counts.shape[1]
    if history < 1 or history >= minutes:
        raise DataError(
            f"The trace has {minutes} minutes, too few for {history} minutes of history and a test period.",
            "Give a longer functions CSV or a smaller --history-minutes.",
        )
    warm: dict[str, BoolMatrix] = {}
    for name in policies:
        if progress:
            progress(name)
        if name == "scaleahead":
            warm[name], _ = run_scaleahead(trace, history, min_probability)
        elif name.startswith("fixed_keepalive_"):
            warm[name] = _run_online(
                FixedKeepAlive(len(counts), int(name.removeprefix("fixed_keepalive_")[:-1])), counts, history
            )
        elif name == "hybrid_histogram":
            warm[name] = _run_online(HybridHistogram(trace.apps), counts, history)
        elif name == "oracle":
            oracle = Oracle()
            warm[name] = np.stack([oracle.decide_with(counts[:, t]) for t in range(history, minutes)], axis=1)
        else:
            raise DataError(f"Unknown serverless policy {name!r}.", f"Use one of {', '.join(POLICIES)}.")
    test = counts[:, history:]
    metrics = {name: score(test, w, trace.memory_mb) for name, w in warm.items()}
    add_relative(metrics)
    params: dict[str, Any] = {}
    if min_probability != DEFAULT_MIN_PROBABILITY:
        params["min_probability"] = min_probability
    return ServerlessRun(
        trace_name, history, minutes - history, test, warm, metrics, trace.names, trace.memory_mb, params
    )


def to_json(run: ServerlessRun, extra_params: dict[str, Any] | None = None) -> dict[str, Any]:
    def clean(v: float | int | None) -> float | int | None:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    out: dict[str, Any] = {
        "trace": run.trace,
        "resolution_s": 60,
        "split": {
            "history_minutes": run.history_minutes,
            "test_minutes": run.test_minutes,
            "test_start_minute": run.history_minutes + 1,
        },
        "functions": len(run.names),
        "policies": {p: {k: clean(v) for k, v in m.items()} for p, m in run.metrics.items()},
    }
    params = {**run.params, **(extra_params or {})}
    if params:
        out["params"] = params
    return out


def write_decisions(run: ServerlessRun, path: Path) -> None:
    """``policy,function,minute,invocations,warm``; ``minute`` is the trace's 1-based ``minute_N``."""
    opener: Callable[..., IO[str]] = gzip.open if path.suffix == ".gz" else open  # type: ignore[assignment]
    first = run.history_minutes + 1
    with opener(path, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "function", "minute", "invocations", "warm"])
        minutes = [str(first + k) for k in range(run.test_minutes)]
        for policy, warm in run.warm.items():
            for f, name in enumerate(run.names):
                inv = run.counts[f]
                wf = warm[f]
                w.writerows((policy, name, minutes[k], int(inv[k]), int(wf[k])) for k in range(run.test_minutes))


def write_plot(run: ServerlessRun, path: Path, curve: Sequence[tuple[float, float, float]] = ()) -> None:
    """Cold-start share against wasted memory, one point per policy (and the threshold curve, if any)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=110)
    own = run.metrics.get("scaleahead", {})
    threshold = float(run.params.get("min_probability", DEFAULT_MIN_PROBABILITY))
    if curve and own.get("wasted_memory_rel_fixed10") is not None and all(c[0] != threshold for c in curve):
        point = (threshold, float(own["wasted_memory_rel_fixed10"] or 0.0), float(own["cold_start_fraction"] or 0.0))
        curve = sorted([*curve, point])
    if curve:
        xs = [c[1] for c in curve]
        ys = [100 * c[2] for c in curve]
        ax.plot(xs, ys, "-", color="tab:blue", alpha=0.45, label="scaleahead, minProbability varied")
        for p, x, y in curve:
            ax.annotate(
                f"{p:g}",
                (x, 100 * y),
                fontsize=7,
                color="tab:blue",
                alpha=0.8,
                xytext=(-4, 6),
                textcoords="offset points",
            )
    colours = {"scaleahead": "tab:blue", "oracle": "black", "hybrid_histogram": "tab:red"}
    for name, m in run.metrics.items():
        rel = m.get("wasted_memory_rel_fixed10")
        frac = m.get("cold_start_fraction")
        if rel is None or frac is None:
            continue
        ax.scatter([rel], [100 * float(frac)], s=60, color=colours.get(name, "tab:gray"), zorder=3)
        ax.annotate(name, (float(rel), 100 * float(frac)), xytext=(6, -10), textcoords="offset points", fontsize=9)
    ax.set_xlabel("wasted memory, relative to fixed_keepalive_10m")
    ax.set_ylabel("cold starts, % of invocations")
    ax.set_title(
        f"Serverless pre-warming, {run.trace}\n{len(run.names)} functions, {run.test_minutes} test minutes", fontsize=10
    )
    ax.grid(alpha=0.3)
    if curve:
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
