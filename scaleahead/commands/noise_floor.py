"""CLI of the forecast noise-floor diagnostic: ``scaleahead bench noise-floor``.

Composition root for ``scaleahead.bench.noise_floor``. It is a diagnostic that reads the test
period's actuals (an oracle), so it lives apart from ``bench forecast`` and is never a model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from scaleahead.commands import check_output
from scaleahead.errors import UserError

#: The LSTM fitted in sample keeps only this last share of the whole trace for early stopping.
IN_SAMPLE_VAL_FRACTION = 0.02

console = Console()
err = Console(stderr=True)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("noise-floor")
    def bench_noise_floor(
        trace: Annotated[
            str,
            typer.Option(
                "--trace",
                help="Trace name (nasa-10s, alibaba-cpu-10s, worldcup-1m, nab-<stem>) or the path of a series CSV.",
            ),
        ],
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the results here.")] = None,
        column: Annotated[str | None, typer.Option("--column", help="Value column of a series CSV.")] = None,
        in_sample: Annotated[
            str | None,
            typer.Option(
                "--in-sample",
                help="Comma-separated models (e.g. ridge,lstm) also fitted on the WHOLE trace, test period "
                "included, and scored on it: what the model family can fit at all (the LSTM, with its defaults "
                "but early stopping on the last 2 % of the trace, takes minutes).",
            ),
        ] = None,
    ) -> None:
        """DIAGNOSTIC (peeks at the test period by design): the error no forecaster can remove.

        Scores the baselines as `bench forecast` does and, on the same origins, an oracle that
        knows the future smooth demand (leave-one-out centred moving mean of the actuals) with
        Poisson (count traces) or empirical noise quantiles around it. Prints the oracle's wql and
        MAE over the best baseline's: if that ratio is above a target, no forecaster can reach it.
        Never a selectable model. See docs/forecaster.md, "Noise floor".
        """
        from forecaster.registry import CLOCK_PERIOD_S, LEARNED, available_models, make_model
        from scaleahead.bench import noise_floor as nf
        from scaleahead.traces import load_series

        names = [m.strip() for m in in_sample.split(",") if m.strip()] if in_sample else []
        unknown = [m for m in names if m not in available_models()]
        if unknown:
            raise UserError(f"--in-sample: unknown model(s) {unknown}.", f"Known: {', '.join(available_models())}.")

        check_output(json_out, "--json")  # before the work: a folder or an unwritable path is refused now
        series = load_series(trace, column=column)

        def make(name: str) -> Any:
            if name not in LEARNED:
                return make_model(name)
            from forecaster.lstm import LSTMConfig, LSTMForecaster

            # in sample: train on all but the last 2 % (the early-stopping span) of the whole trace
            clock = CLOCK_PERIOD_S if name == "lstm_clock" else 0.0
            return LSTMForecaster(LSTMConfig(val_fraction=IN_SAMPLE_VAL_FRACTION, clock_period_s=clock))

        result = nf.run(series, trace, log=lambda m: err.print(m), in_sample=names, make=make)
        best = result.bench.split["best_baseline"]
        table = Table(title=f"noise floor (oracle diagnostic): {trace}, {len(result.bench.origins)} origins")
        for col in ("row", "MAE", "rel_mae", "wql", "coverage_q90"):
            table.add_column(col)
        rows = {**{n: result.bench.models[n] for n in result.bench.models}, **result.oracles}
        for name, v in rows.items():
            cov = v.get("coverage_q90")
            table.add_row(
                name, f"{v['mae']:.4g}", f"{v['rel_mae']:.3f}", f"{v['wql']:.4f}", "" if cov is None else f"{cov:.3f}"
            )
        console.print(table)
        ratios = result.ratios()
        console.print(
            f"floor = {result.floor} (in_sample_* rows are not floors); over the best baseline ({best}): "
            + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items())
        )
        vg = result.variogram
        console.print(
            f"variogram nugget {vg['nugget']:.4g} (test variance {vg['variance']:.4g}); "
            f"{best} MSE {vg['mse'].get(best, float('nan')):.4g}"
        )
        if json_out is not None:
            json_out.write_text(json.dumps(result.to_json(), indent=1))
