"""`scaleahead bench serverless` end to end on a small functions CSV: output, recomputation, no peeking."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from scaleahead.bench.serverless import POLICIES, run_policies
from scaleahead.traces import FunctionsTrace, load_functions
from tests.serverless.conftest import cli

MINUTES = 120
HISTORY = 30


def make_counts(seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = np.zeros((6, MINUTES), dtype=np.int64)
    counts[0, ::5] = 2  # timer every 5 min
    counts[1, ::17] = 1  # timer every 17 min
    counts[2] = rng.poisson(3.0, MINUTES)  # busy
    counts[3] = rng.random(MINUTES) < 0.05  # sporadic
    counts[4, [3, 50, 90]] = 1  # rare
    counts[5] = (rng.random(MINUTES) < 0.3) * rng.integers(1, 5, MINUTES)
    return counts


def write_trace(folder: Path, counts: np.ndarray, header: list[str] | None = None) -> tuple[Path, Path]:
    inv = folder / "inv.csv"
    mem = folder / "mem.csv"
    cols = header or ["HashFunction", "HashOwner", "HashApp"]
    with inv.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols + [f"minute_{m + 1}" for m in range(counts.shape[1])])
        for f, row in enumerate(counts):
            w.writerow([f"fn{f}", f"owner{f}", f"app{f}", *row.tolist()])
    with mem.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["HashOwner", "HashApp", "SampleCount", "AverageAllocatedMb"])
        for f in range(counts.shape[0]):
            w.writerow([f"owner{f}", f"app{f}", 10, 100 + 50 * f])
    return inv, mem


def recompute(decisions: Path, memory: dict[str, float]) -> dict[str, dict[str, float]]:
    """The metrics of EVALUATION.md section 5 from the decisions file alone (plus memory per function)."""
    inv: dict[str, int] = defaultdict(int)
    cold: dict[str, int] = defaultdict(int)
    wasted: dict[str, float] = defaultdict(float)
    per_fn: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    with decisions.open() as fh:
        for row in csv.DictReader(fh):
            p, f, n, w = row["policy"], row["function"], int(row["invocations"]), int(row["warm"])
            inv[p] += n
            per_fn[(p, f)][1] += n
            if n > 0 and not w:
                cold[p] += 1
                per_fn[(p, f)][0] += 1
            if w and n == 0:
                wasted[p] += memory[f]
    out = {}
    for p in inv:
        pct = [100 * c / n for (q, _), (c, n) in per_fn.items() if q == p and n > 0]
        out[p] = {
            "cold_start_fraction": cold[p] / inv[p],
            "p75_function_cold_pct": float(np.percentile(pct, 75)),
            "wasted_memory_mb_min": wasted[p],
            "wasted_memory_rel_fixed10": wasted[p] / wasted["fixed_keepalive_10m"],
        }
    return out


def test_metrics_recomputed_from_the_decisions_file_match_the_json(tmp_path: Path) -> None:
    inv, mem = write_trace(tmp_path, make_counts())
    out = cli(
        "--trace", str(inv), "--memory", str(mem), "--history-minutes", str(HISTORY),
        "--json", str(tmp_path / "r.json"), "--decisions", str(tmp_path / "d.csv"), "--plot", str(tmp_path / "p.png"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["trace"] == str(inv) and doc["resolution_s"] == 60
    assert doc["split"]["history_minutes"] == HISTORY and doc["split"]["test_minutes"] == MINUTES - HISTORY
    assert doc["params"]["history_minutes"] == HISTORY
    assert set(doc["policies"]) == set(POLICIES)
    memory = {f"fn{f}": 100.0 + 50 * f for f in range(6)}
    again = recompute(tmp_path / "d.csv", memory)
    for policy, metrics in again.items():
        for name, value in metrics.items():
            assert doc["policies"][policy][name] == pytest.approx(value), (policy, name)
    assert doc["policies"]["oracle"]["cold_start_fraction"] == 0.0
    assert doc["policies"]["oracle"]["wasted_memory_mb_min"] == 0.0
    assert (tmp_path / "p.png").stat().st_size > 10_000
    with (tmp_path / "d.csv").open() as fh:
        assert fh.readline().strip() == "policy,function,minute,invocations,warm"
        first = next(csv.reader(fh))
    assert first[2] == str(HISTORY + 1)  # the trace's 1-based minute_N


def test_a_functions_csv_with_a_wrong_header_is_a_clear_error_with_exit_code_2(tmp_path: Path) -> None:
    inv, _ = write_trace(tmp_path, make_counts(), header=["Function", "Owner", "App"])
    out = cli("--trace", str(inv), "--json", str(tmp_path / "r.json"))
    assert out.returncode == 2
    assert "not a functions CSV" in out.stderr and "HashFunction" in out.stderr
    assert not (tmp_path / "r.json").exists()


def test_an_unknown_trace_name_is_a_clear_error_with_exit_code_2(tmp_path: Path) -> None:
    out = cli("--trace", "azure-functions-2m", "--json", str(tmp_path / "r.json"))
    assert out.returncode == 2 and "functions CSV" in out.stderr
    assert not (tmp_path / "r.json").exists()


def trace_of(counts: np.ndarray) -> FunctionsTrace:
    n = counts.shape[0]
    names = tuple(f"fn{i}" for i in range(n))
    return FunctionsTrace(names, names, 0.0, counts, np.full(n, 128.0), np.full(n, np.nan))


@pytest.mark.parametrize("cut", [HISTORY, HISTORY + 1, 75])
def test_changing_invocations_after_minute_t_changes_no_decision_up_to_t(cut: int) -> None:
    counts = make_counts()
    changed = counts.copy()
    rng = np.random.default_rng(cut)
    changed[:, cut:] = rng.poisson(1.0, size=changed[:, cut:].shape)
    a = run_policies(trace_of(counts), HISTORY)
    b = run_policies(trace_of(changed), HISTORY)
    k = cut - HISTORY  # test-period index of minute `cut`; decisions for minutes <= cut were made before it
    for policy in POLICIES:
        if policy == "oracle":
            continue
        assert np.array_equal(a.warm[policy][:, : k + 1], b.warm[policy][:, : k + 1]), policy
    assert not np.array_equal(a.warm["oracle"], b.warm["oracle"])  # the oracle does peek


def test_scaleahead_runs_through_the_simulated_platform_and_its_totals_agree_with_the_score() -> None:
    from scaleahead.bench.serverless import run_scaleahead, score

    trace = trace_of(make_counts())
    warm, sim = run_scaleahead(trace, HISTORY)
    m = score(trace.counts[:, HISTORY:], warm, trace.memory_mb)
    assert sim.applied > 0  # warm pools were set through apply_plan
    assert sim.totals.cold_starts == m["cold_starts"]
    assert sim.totals.wasted_memory_mb_steps == pytest.approx(m["wasted_memory_mb_min"])


def test_the_shared_azure_trace_loads_with_memory_per_function() -> None:
    fns = load_functions("azure-functions-1m")
    assert fns.counts.shape == (1000, 1440)
    assert (fns.memory_mb > 0).all()
