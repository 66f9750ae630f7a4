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

from scaleahead.errors import UserError

TRADEOFF_BUDGETS = [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30]


def _check_output(path: Path | None, option: str, suffix: str | None = None) -> None:
    if path is None:
        return
    if suffix and path.suffix.lower() != suffix:
        raise UserError(f"{option} {path} does not end in {suffix}.", f"Give a file name ending in {suffix}.")
    if not path.parent.exists():
        raise UserError(f"The folder of {option} {path} does not exist.", "Create it first or choose another path.")


def _plot(path: Path, result: dict[str, Any], curve: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    xs = [r["moves"] for r in curve]
    ax1.plot(xs, [r["nodes_freed"] for r in curve], "o-", label="scaleahead (max_moves varies)")
    ax2.plot(xs, [r["interference_pairs_after"] for r in curve], "o-", label="scaleahead (max_moves varies)")
    for name, m in result["policies"].items():
        if name == "scaleahead":
            continue
        ax1.scatter([m["moves"]], [m["nodes_freed"]], marker="s", s=60, label=name)
        ax2.scatter([m["moves"]], [m["interference_pairs_after"]], marker="s", s=60, label=name)
    sa = result["policies"]["scaleahead"]
    ax1.scatter([sa["moves"]], [sa["nodes_freed"]], marker="*", s=200, c="k", label="scaleahead default", zorder=5)
    ax2.scatter([sa["moves"]], [sa["interference_pairs_after"]], marker="*", s=200, c="k", zorder=5)
    ax2.axhline(0.2 * sa["interference_pairs_before"], ls="--", c="grey", label="80 % cut target")
    ax1.set(xlabel="moves (evictions)", ylabel="nodes freed", title="Defragmentation")
    ax2.set(xlabel="moves (evictions)", ylabel="cpu-bound / latency-critical pairs", title="Interference")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.suptitle(f"scaleahead bench rebalance (seed {result['snapshot']['seed']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
            int, typer.Option("--max-moves", help="The scaleahead policy's move budget (planner default 10).")
        ] = 10,
        plot: Annotated[
            Path | None,
            typer.Option(
                help="Write a PNG: nodes freed and interference pairs against moves, scaleahead's "
                "trade-off curve (max_moves 1..30) and the peers."
            ),
        ] = None,
        max_peak_fraction: Annotated[
            float,
            typer.Option(
                "--max-peak-fraction",
                help="scaleahead's cap on a receiving node's forecast-peak CPU, as a share of allocatable (0.9).",
            ),
        ] = 0.9,
        show_moves: Annotated[bool, typer.Option(help="Print scaleahead's moves with their reasons.")] = True,
    ) -> None:
        """Rebalancing on a cluster snapshot built from Alibaba 2018 per-machine usage (EVALUATION.md 5b).

        Policies: scaleahead, descheduler_low_node_utilization, descheduler_high_node_utilization,
        none. Metrics: nodes_freed, moves, interference_pairs_before/after, peak_overcommit,
        pdb_violations (and evictions_refused, pods_pending, max_node_usage_pct).
        """
        from rich.console import Console
        from rich.table import Table

        from scaleahead.bench.rebalance import build_snapshot, run_bench, tradeoff

        if seed < 0:
            raise UserError(f"--seed {seed} is negative.", "Use a seed of 0 or more.")
        if not 0.0 < max_peak_fraction <= 1.0:
            raise UserError(f"--max-peak-fraction {max_peak_fraction} is outside (0, 1].", "Use a share such as 0.9.")
        if max_moves < 0:
            raise UserError(f"--max-moves {max_moves} is negative.", "Use 0 (no moves) or more.")
        _check_output(json_file, "--json")
        _check_output(plot, "--plot", ".png")
        console = Console()
        result, moves = run_bench(seed=seed, max_moves=max_moves, max_peak_fraction=max_peak_fraction)
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
        if show_moves:
            for mv in moves["scaleahead"]:
                console.print(f"  {mv.reason.message} (gain {mv.expected_gain:.3f})", markup=False)
        curve: list[dict[str, Any]] = []
        if plot is not None or json_file is not None:
            curve = [dict(r) for r in tradeoff(build_snapshot(seed), TRADEOFF_BUDGETS, max_peak_fraction)]
            result["tradeoff"] = curve
        if json_file is not None:
            json_file.write_text(json.dumps(result, indent=2) + "\n")
            console.print(f"wrote {json_file}")
        if plot is not None:
            _plot(plot, result, curve)
            console.print(f"wrote {plot}")
