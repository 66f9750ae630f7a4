"""``scaleahead bench rebalance-speed``: the time of one rebalancing plan on synthetic clusters.

Why it exists: the command line for ``scaleahead.bench.rebalance_speed``; docs/rebalance.md's
"Speed" section is measured with it. It prints one row per plan as soon as it is measured and
writes ``--json`` (the rows) and ``--moves`` (every plan's moves, to compare two versions of the
planner) at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from scaleahead.commands import check_output
from scaleahead.errors import UserError

#: pods per node of each kind of cluster by default: the two scripts docs/rebalance.md quoted
DEFAULT_PODS_PER_NODE = {"zones": "29", "plain": "2-14"}
#: the share of pods with a zone term and with a hostname term by default (the review's script)
DEFAULT_TERMS = {"zones": 0.1, "plain": 0.0}


def parse_counts(text: str, option: str) -> list[int]:
    """``"50,200,1000"`` -> [50, 200, 1000]; every count at least 1."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{option} {text!r} is not a comma-separated list of counts.", "E.g. 50,200,1000.") from None
    if not values or min(values) < 1:
        raise UserError(f"{option} {text!r} needs counts of at least 1.", "E.g. 50,200,1000.")
    return values


def parse_pods_per_node(text: str) -> tuple[int, int]:
    """``"LO-HI"`` (both included) or ``"N"``: a mean, drawn from N // 2 to 3N // 2 - 1 (the review's script)."""
    try:
        if "-" in text:
            lo_text, _, hi_text = text.partition("-")
            lo, hi = int(lo_text), int(hi_text)
        else:
            n = int(text)
            lo, hi = n // 2, n * 3 // 2 - 1
    except ValueError:
        raise UserError(f"--pods-per-node {text!r} is not a count or a range.", "E.g. 29 or 2-14.") from None
    if lo < 1 or hi < lo:
        raise UserError(f"--pods-per-node {text!r} gives no pod to some node or an empty range.", "E.g. 29 or 2-14.")
    return lo, hi


def _share(value: float | None, kind: str, option: str) -> float:
    share = DEFAULT_TERMS[kind] if value is None else value
    if not 0.0 <= share <= 1.0:
        raise UserError(f"{option} {share} is outside [0, 1].", "Give a share of pods, e.g. 0.1.")
    if kind == "plain" and share > 0:
        raise UserError(f"{option} needs --cluster zones: plain clusters have no labels.", "Use --cluster zones.")
    return share


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("rebalance-speed")
    def bench_rebalance_speed(
        cluster: Annotated[
            str,
            typer.Option(
                help="zones: 64-core nodes in 3 zones, pods with owner labels and anti-affinity terms (the "
                "review's script); plain: 32-core nodes, no labels, no rules (docs/rebalance.md, 'Speed').",
            ),
        ] = "zones",
        nodes: Annotated[str, typer.Option(help="Cluster sizes, in nodes, comma-separated.")] = "50,200,1000",
        pods_per_node: Annotated[
            str | None,
            typer.Option(
                help="Pods per node, drawn per node: LO-HI (both included) or a mean N (N/2 to 3N/2-1); "
                "default 29 for zones (~28,000 pods on 1,000 nodes), 2-14 for plain."
            ),
        ] = None,
        max_moves: Annotated[str, typer.Option(help="Move budgets, one plan each, comma-separated.")] = "4,10",
        zone_terms: Annotated[
            float | None,
            typer.Option(
                help="Share of pods with a zone anti-affinity term (selecting a label 1 % of pods carry); "
                "default 0.1 for zones."
            ),
        ] = None,
        hostname_terms: Annotated[
            float | None,
            typer.Option(help="Share of pods with a hostname anti-affinity term against their own app; default 0.1."),
        ] = None,
        seed: Annotated[int, typer.Option(min=0, help="Seed of the cluster (the same seed, the same cluster).")] = 0,
        repeats: Annotated[int, typer.Option(min=1, help="Plans per measurement (the median is reported).")] = 1,
        trace_memory: Annotated[
            bool,
            typer.Option(
                "--tracemalloc",
                help="Also the plan's peak of Python allocations, from one more untimed run under tracemalloc.",
            ),
        ] = False,
        new_workloads: Annotated[
            int,
            typer.Option(
                "--new-workloads",
                min=0,
                help="Workloads that scale up by 1-3 pods each in the same plan: the moves keep room for "
                "their new pods (docs/rebalance.md, 'Room for the plan's new pods'). 0: none.",
            ),
        ] = 0,
        new_zoned: Annotated[
            float,
            typer.Option(
                "--new-zoned",
                min=0.0,
                max=1.0,
                help="Share of the --new-workloads whose pods select one zone by node selector (z0-z2 in turn): "
                "the room for them is counted on that zone's nodes. 0: none.",
            ),
        ] = 0.0,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the result object here.")] = None,
        moves_out: Annotated[
            Path | None,
            typer.Option("--moves", help="Write every plan's moves (pod, nodes, reason, gain) here, as JSON."),
        ] = None,
    ) -> None:
        """Time one rebalancing plan (planner.rebalance.plan_moves) per cluster size and move budget.

        Prints, per plan: nodes, pods, max_moves, new_pods (--new-workloads), moves found, wall_s and
        cpu_s (the median of --repeats runs: wall-clock and the process's CPU time), peak_rss_mb (the
        process's so far)
        and, with --tracemalloc, tracemalloc_peak_mb.
        The clusters are synthetic and deterministic by --seed (docs/rebalance.md, 'Speed').
        """
        from scaleahead.bench.rebalance_speed import KINDS, bench_rebalance_speed

        if cluster not in KINDS:
            raise UserError(f"--cluster {cluster!r} is not known.", f"Use one of: {', '.join(KINDS)}.")
        sizes = parse_counts(nodes, "--nodes")
        budgets = parse_counts(max_moves, "--max-moves")
        per_node = parse_pods_per_node(pods_per_node or DEFAULT_PODS_PER_NODE[cluster])
        z = _share(zone_terms, cluster, "--zone-terms")
        h = _share(hostname_terms, cluster, "--hostname-terms")
        check_output(json_out, "--json")
        check_output(moves_out, "--moves")
        columns = ["nodes", "pods", "max_moves", "new_pods", "moves", "wall_s", "cpu_s", "peak_rss_mb"]
        if trace_memory:
            columns.append("tracemalloc_peak_mb")
        print(" ".join(f"{c:>12}" for c in columns), flush=True)

        def show(row: dict[str, Any]) -> None:
            print(" ".join(f"{row[c]:>12}" for c in columns), flush=True)

        result, moves = bench_rebalance_speed(
            cluster,
            sizes,
            per_node,
            budgets,
            zone_terms=z,
            hostname_terms=h,
            seed=seed,
            repeats=repeats,
            trace_memory=trace_memory,
            progress=show,
            new_workloads=new_workloads,
            new_zoned=new_zoned,
        )
        if json_out is not None:
            json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {json_out}")
        if moves_out is not None:
            moves_out.write_text(json.dumps(moves, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {moves_out}")
