"""``scaleahead bench rebalance``: the rebalancing benchmark of EVALUATION.md section 5b.

Why it exists: the command line for ``scaleahead.bench.rebalance``; it prints the metrics table
and the planner's moves with their reasons, and writes ``--json`` and ``--plot`` only after
everything was computed (bad input writes nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from scaleahead.commands import check_output
from scaleahead.errors import UserError

#: planner.rebalance's defaults, repeated so that ``scaleahead --help`` need not import the planner
#: (a test keeps them equal).
DEFAULT_MAX_MOVES = 4
DEFAULT_MAX_PEAK_FRACTION = 0.9


def parse_seeds(text: str) -> list[int]:
    """``"1-8"`` or ``"1,3,7"`` (or both, ``"1-3,7"``) -> the seeds, in order, without repeats."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            if "-" in part:
                lo, _, hi = part.partition("-")
                seeds.extend(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise UserError(f"--seeds {text!r} is not a list of seeds.", "Use for example 1-8 or 1,3,7.") from None
    if not seeds or any(s < 0 for s in seeds):
        raise UserError(f"--seeds {text!r} names no seed or a negative one.", "Use for example 1-8 or 1,3,7.")
    return list(dict.fromkeys(seeds))


def _plot(path: Path, result: dict[str, Any], curves: dict[str, list[dict[str, Any]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
    styles = {
        "cycles": ("s-", "scaleahead default, one plan per cycle (1..10)"),
        "tradeoff": ("o-", "scaleahead, default weights"),
        "tradeoff_separation_only": ("^--", "scaleahead, node_freed=0"),
    }
    for key, rows in curves.items():
        style, label = styles[key]
        xs = [r["moves"] for r in rows]
        ax1.plot(xs, [r["nodes_freed"] for r in rows], style, label=label)
        ax2.plot(xs, [r["interference_pairs_after"] for r in rows], style, label=label)
    for name, m in result["policies"].items():
        if name in ("scaleahead", "none"):
            continue
        ax1.scatter([m["moves"]], [m["nodes_freed"]], marker="s", s=60, label=name)
        ax2.scatter([m["moves"]], [m["interference_pairs_after"]], marker="s", s=60, label=name)
    sa = result["policies"]["scaleahead"]
    ref = result["policies"][result["targets"]["reference"]]
    ax1.scatter([sa["moves"]], [sa["nodes_freed"]], marker="*", s=220, c="k", label="scaleahead default", zorder=5)
    ax2.scatter([sa["moves"]], [sa["interference_pairs_after"]], marker="*", s=220, c="k", zorder=5)
    for ax in (ax1, ax2):
        ax.axvline(ref["moves"] / 2, ls=":", c="grey", label="half the reference's evictions")
    ax2.axhline(0.2 * sa["interference_pairs_before"], ls="--", c="grey", label="80 % cut target")
    ax2.set_ylim(bottom=0)
    ax1.set(xlabel="moves (evictions)", ylabel="nodes freed", title="Defragmentation")
    ax2.set(xlabel="moves (evictions)", ylabel="cpu-bound / latency-critical pairs", title="Interference")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.suptitle(
        f"scaleahead bench rebalance (seed {result['snapshot']['seed']}, peak cap "
        f"{result.get('params', {}).get('max_peak_fraction', 0.9)})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _seed_table(summary: dict[str, Any]) -> Any:
    from rich.table import Table

    seeds = summary["seeds"]
    table = Table(title=f"mean (min..max) over seeds {', '.join(map(str, seeds))}")
    table.add_column("metric")
    names = [n for n in summary["summary"] if n != "none"]
    for name in names:
        table.add_column(name, justify="right")
    for m in next(iter(summary["summary"].values())):
        cells = []
        for name in names:
            v = summary["summary"][name][m]
            cells.append(f"{v['mean']:g} ({v['min']:g}..{v['max']:g})")
        table.add_row(m, *cells)
    return table


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("rebalance")
    def bench_rebalance(
        json_file: Annotated[
            Path | None, typer.Option("--json", help="Write the EVALUATION.md section 7 JSON object to this file.")
        ] = None,
        seed: Annotated[
            int, typer.Option(help="Seed of the snapshot's pod mix (pods per node, owners, shares); 7 by default.")
        ] = 7,
        max_moves: Annotated[
            int,
            typer.Option(
                "--max-moves", help=f"The scaleahead policy's move budget (planner default {DEFAULT_MAX_MOVES})."
            ),
        ] = DEFAULT_MAX_MOVES,
        plot: Annotated[
            Path | None,
            typer.Option(
                help="Write a PNG: nodes freed and interference pairs against moves: scaleahead's trade-off curves "
                "(max_moves 1..40, default weights and separation only), its default and the peers."
            ),
        ] = None,
        max_peak_fraction: Annotated[
            float,
            typer.Option(
                "--max-peak-fraction",
                help="scaleahead's cap on a receiving node's forecast-peak CPU, as a share of allocatable (0.9).",
            ),
        ] = DEFAULT_MAX_PEAK_FRACTION,
        seeds: Annotated[
            str | None,
            typer.Option(
                help="Also run every policy on the snapshots of these seeds (e.g. 1-8 or 1,3,7) and print "
                "mean/min/max per metric; the JSON gets them under 'seeds'."
            ),
        ] = None,
        show_moves: Annotated[bool, typer.Option(help="Print scaleahead's moves with their reasons.")] = True,
        peak_ratio: Annotated[
            float | None,
            typer.Option(
                "--peak-ratio",
                help="Give pods the control loop's forecast peak instead of their history's maximum: their "
                "usage times this forecast ratio (the same for every workload), never below their request.",
            ),
        ] = None,
        peak_lookback_hours: Annotated[
            float | None,
            typer.Option(
                "--peak-lookback-hours",
                help="With the loop's peak: also the pod's highest usage over this many hours of history "
                "(the loop looks back 24 h on its workload's demand), when above the forecast ratio.",
            ),
        ] = None,
    ) -> None:
        """Rebalancing on a snapshot built from Alibaba 2018 machine usage (EVALUATION.md 5b).

        Policies: scaleahead, descheduler_low_node_utilization,
        descheduler_high_node_utilization, none. Metrics: nodes_freed, moves,
        interference_pairs_before/after, peak_overcommit, pdb_violations (and
        evictions_refused, pods_pending, max_node_usage_pct).

        The JSON also holds 'targets' (issue 5's rebalancing targets against
        descheduler_high_node_utilization) and, with --json or --plot, the
        trade-off curves over the move budget ('tradeoff',
        'tradeoff_separation_only') and 'cycles' (the default budget spent once
        per control cycle for up to 10 cycles, PDB budgets renewed each cycle).
        """
        from rich.console import Console
        from rich.table import Table

        from planner.rebalance import RebalanceWeights
        from scaleahead.bench.rebalance import build_snapshot, cycles, run_bench, seed_summary, tradeoff

        if seed < 0:
            raise UserError(f"--seed {seed} is negative.", "Use a seed of 0 or more.")
        if not 0.0 < max_peak_fraction <= 1.0:
            raise UserError(f"--max-peak-fraction {max_peak_fraction} is outside (0, 1].", "Use a share such as 0.9.")
        if max_moves < 0:
            raise UserError(f"--max-moves {max_moves} is negative.", "Use 0 (no moves) or more.")
        if peak_ratio is not None and not 1.0 <= peak_ratio <= 4.0:
            raise UserError(f"--peak-ratio {peak_ratio} is outside [1, 4].", "The loop clips its ratio to [1, 4].")
        if peak_lookback_hours is not None and not 0 < peak_lookback_hours <= 144:
            raise UserError(f"--peak-lookback-hours {peak_lookback_hours} is outside (0, 144].", "Use e.g. 24.")
        lookback_s = peak_lookback_hours * 3600.0 if peak_lookback_hours is not None else None
        seed_list = parse_seeds(seeds) if seeds is not None else None
        check_output(json_file, "--json")
        check_output(plot, "--plot", ".png")
        console = Console()
        result, moves = run_bench(
            seed=seed,
            max_moves=max_moves,
            max_peak_fraction=max_peak_fraction,
            peak_ratio=peak_ratio,
            peak_lookback_s=lookback_s,
        )
        table = Table(
            title=f"scaleahead bench rebalance (seed {seed}, {result['snapshot']['nodes']} nodes, "
            f"{result['snapshot']['pods']} pods)"
        )
        metrics = list(next(iter(result["policies"].values())))
        table.add_column("metric")
        for name in result["policies"]:
            table.add_column(name, justify="right")
        for m in metrics:
            table.add_row(m, *(str(row[m]) for row in result["policies"].values()))
        console.print(table)
        console.print(f"targets: {json.dumps(result['targets'])}", markup=False)
        if show_moves:
            for mv in moves["scaleahead"]:
                console.print(f"  {mv.reason.message}", markup=False)
        curves: dict[str, list[dict[str, Any]]] = {}
        if plot is not None or json_file is not None:
            snap = build_snapshot(seed, peak_ratio=peak_ratio, peak_lookback_s=lookback_s)
            curves["tradeoff"] = [dict(r) for r in tradeoff(snap, max_peak_fraction=max_peak_fraction)]
            separation_only = RebalanceWeights(node_freed=0.0)
            curves["tradeoff_separation_only"] = [
                dict(r) for r in tradeoff(snap, max_peak_fraction=max_peak_fraction, weights=separation_only)
            ]
            curves["cycles"] = [dict(r) for r in cycles(snap, max_moves=max_moves, max_peak_fraction=max_peak_fraction)]
            result.update(curves)
        if seed_list is not None:
            summary = seed_summary(
                seed_list,
                max_moves=max_moves,
                max_peak_fraction=max_peak_fraction,
                peak_ratio=peak_ratio,
                peak_lookback_s=lookback_s,
            )
            console.print(_seed_table(summary))
            met = summary["targets"].values()
            both = sum(1 for t in met if t["nodes_freed_at_least_reference"] and t["evictions_at_most_half_reference"])
            console.print(
                f"seeds where scaleahead frees at least the reference's nodes with at most half its evictions: "
                f"{both} of {len(seed_list)}",
                markup=False,
            )
            result["seeds"] = summary
        if json_file is not None:
            json_file.write_text(json.dumps(result, indent=2) + "\n")
            console.print(f"wrote {json_file}")
        if plot is not None:
            _plot(plot, result, curves)
            console.print(f"wrote {plot}")
