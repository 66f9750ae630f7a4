"""``scaleahead bench storage``: how many bytes stored forecasts take per workload-day."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from scaleahead.commands import check_output, check_positive
from scaleahead.types import Forecast, WorkloadRef


def measure_forecast_bytes(
    workloads: int = 10, interval_s: float = 120.0, step_s: float = 10.0, horizon_steps: int = 90
) -> float:
    """Record one day of forecasts every ``step_s`` for ``workloads`` into a fresh SQLite file.

    Returns:
        Bytes the database file grew by, per workload-day.
    """
    from storage import Store

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "size.db"
        Store(f"sqlite:///{path}").close()
        base = os.path.getsize(path)
        store = Store(f"sqlite:///{path}", forecast_interval_s=interval_s)
        refs = [WorkloadRef("Deployment", "bench", f"w{i}") for i in range(workloads)]
        rng = np.random.default_rng(0)
        for t in np.arange(0.0, 86400.0, step_s):
            store.record_forecasts(
                [
                    Forecast(
                        r,
                        float(t),
                        step_s,
                        {q: rng.random(horizon_steps) * 100 for q in (0.1, 0.5, 0.9, 0.99)},
                        "bench",
                    )
                    for r in refs
                ]
            )
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        return (os.path.getsize(path) - base) / workloads


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("storage")
    def bench_storage(
        workloads: Annotated[int, typer.Option(help="Workloads to simulate.")] = 10,
        interval_s: Annotated[float, typer.Option(help="Store one forecast per workload per this many s.")] = 120.0,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the result as JSON here.")] = None,
    ) -> None:
        """Bytes of stored forecasts per workload-day (SQLite, 4 quantiles x 90 steps at 10 s)."""
        check_positive("--workloads", workloads, "Give a count of workloads, e.g. 10.")
        check_positive("--interval-s", interval_s, "Give the seconds between stored forecasts, e.g. 120.")
        check_output(json_out, "--json")
        size = measure_forecast_bytes(workloads, interval_s)
        result = {
            "forecast_bytes_per_workload_day": round(size),
            "params": {"workloads": workloads, "forecast_interval_s": interval_s},
        }
        typer.echo(f"forecast storage: {size / 1e6:.2f} MB per workload-day (one forecast per {interval_s:g} s)")
        if json_out is not None:
            json_out.write_text(json.dumps(result, indent=2))
