"""CLI of the forecaster area: ``train``, ``models list|show``, ``report``, ``bench forecast``.

Composition root: these commands wire traces, forecasters and storage together. Heavy libraries
(torch, Lightning, matplotlib) are imported inside the commands so ``scaleahead --help`` stays fast.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scaleahead.commands import DbOpt, OutputOpt, check_fits, check_folder, check_output, check_positive, db_width
from scaleahead.errors import DataError, UserError, hide_password
from scaleahead.types import Series

console = Console()
err = Console(stderr=True)

TraceOpt = Annotated[
    str,
    typer.Option(
        "--trace",
        help="Trace name (nasa-10s, alibaba-cpu-10s, worldcup-1m, nab-<stem>) or the path of a series CSV.",
    ),
]
ColumnOpt = Annotated[str | None, typer.Option("--column", help="Value column of a series CSV.")]


def _prometheus_training_data(url: str, policy: Path | None, days: float, end: str | None) -> list[Series]:
    """Every policy's demand over ``days`` before ``end``, read from Prometheus (chunked, in parallel)."""
    import time

    from scaleahead.cli import parse_time
    from scaleahead.commands.prometheus import make_config
    from scaleahead.policy import load_policies
    from scaleahead.prometheus.client import PrometheusClient
    from scaleahead.prometheus.history import read_range

    if policy is None:
        raise UserError("--prometheus needs --policy: its demand queries say what to read.", "Add --policy FILE.")
    if not np.isfinite(days) or days <= 0:
        raise UserError(f"--days must be positive and finite, got {days:g}.", "Give the days of history to train on.")
    policies = load_policies(policy)
    stop = time.time() if end is None else parse_time(end, "--end")
    with PrometheusClient(make_config(url)) as client:
        series, errors = read_range(client, policies, stop - days * 86400.0, stop)
    for message in errors.values():
        err.print(f"[yellow]skipped[/] {message}")
    usable = [s for s in series.values() if np.isfinite(s.values).any()]
    if not usable:
        raise UserError(
            f"No usable history from {hide_password(url)} for the {len(policies)} policies of {policy}.",
            "Check the URL, the demand queries and the range (--days, --end).",
        )
    return usable


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


PriorOpt = Annotated[
    str | None,
    typer.Option(
        help="LSTM prior: 'ridge' = the network corrects the ridge baseline's forecast (hybrid), "
        "'none' = it forecasts alone (default: none; docs/forecaster.md).",
    ),
]

BlendOpt = Annotated[
    bool | None,
    typer.Option(
        "--blend/--no-blend",
        help="Blend the LSTM's quantiles with the ridge's, weight chosen on the validation span "
        "(default: off; docs/forecaster.md).",
    ),
]


def _lstm_config(
    epochs: int | None,
    threads: int | None,
    seed: int | None,
    max_minutes: float | None,
    prior: str | None = None,
    blend: bool | None = None,
    model: str = "lstm",
) -> Any:
    from forecaster.lstm import LSTMConfig
    from forecaster.registry import CLOCK_PERIOD_S

    cfg = LSTMConfig(clock_period_s=CLOCK_PERIOD_S if model == "lstm_clock" else 0.0)
    if prior is not None:
        if prior not in ("ridge", "none"):
            raise UserError(f"--prior {prior!r} is not known.", "Use --prior ridge or --prior none.")
        cfg.prior = prior
    if blend is not None:
        cfg.blend = blend
    # Checked here, before any data is read or a model built: 0 epochs trained nothing and then failed
    # deep in checkpointing with a traceback.
    if epochs is not None:
        if epochs < 1:
            raise UserError(f"--epochs {epochs} would train nothing.", "Give at least 1 (default 30).")
        cfg.max_epochs = epochs
    if threads is not None:
        if threads < 1:
            raise UserError(f"--threads {threads} is not a thread count.", "Give at least 1 (default 1).")
        cfg.threads = threads
    if seed is not None:
        cfg.seed = seed
    if max_minutes is not None:
        if not max_minutes > 0:
            raise UserError(f"--max-minutes {max_minutes:g} leaves no time to train.", "Give a positive number.")
        cfg.max_minutes = max_minutes
    return cfg


def _clock_hint(series: list[Any]) -> None:
    """Say so when the training data's sudden rises cluster on 5-minute marks (``lstm_clock``)."""
    from scaleahead.retraining import clock_hint

    hint = clock_hint(series, remedy="--model lstm_clock")
    if hint:
        err.print(f"note: {hint}", markup=False, highlight=False, soft_wrap=True)


def _non_defaults(**kwargs: Any) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if v is not None}


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    models_app = typer.Typer(help="Trained model versions in the registry (storage).", no_args_is_help=True)
    app.add_typer(models_app, name="models")

    @app.command()
    def train(
        trace: Annotated[
            str | None,
            typer.Option(
                "--trace",
                help="Trace name (nasa-10s, alibaba-cpu-10s, worldcup-1m, nab-<stem>) or the path of a series CSV.",
            ),
        ] = None,
        prometheus: Annotated[
            str | None,
            typer.Option(help="Prometheus URL: train on every --policy's demand query instead of a trace."),
        ] = None,
        policy: Annotated[
            Path | None, typer.Option(help="Policy YAML whose demand queries are read (with --prometheus).")
        ] = None,
        days: Annotated[
            float | None, typer.Option(help="Days of Prometheus history before --end (with --prometheus; default 7).")
        ] = None,
        end: Annotated[
            str | None, typer.Option(help="End of the Prometheus range (ISO-8601 or epoch s; default: now).")
        ] = None,
        db: DbOpt = None,
        out: Annotated[
            Path,
            typer.Option(
                help="Folder for the checkpoint (lstm-<trace>-<time>.pt; lstm-clock-... with --model lstm_clock)."
            ),
        ] = Path("models"),
        column: ColumnOpt = None,
        whole: Annotated[
            bool, typer.Option("--whole/--history", help="Train on the whole trace, or only its history split (75 %).")
        ] = False,
        epochs: Annotated[int | None, typer.Option(help="Maximum epochs (default 30; early stopping).")] = None,
        threads: Annotated[int | None, typer.Option(help="torch threads (default 1).")] = None,
        seed: Annotated[int | None, typer.Option(help="Random seed (default 0).")] = None,
        max_minutes: Annotated[float | None, typer.Option(help="Training time cap in minutes (default 9).")] = None,
        prior: PriorOpt = None,
        blend: BlendOpt = None,
        model_name: Annotated[
            str,
            typer.Option(
                "--model",
                help="lstm, or lstm_clock: the LSTM also given the forecast origin's phase within 5 minutes, "
                'for demand that jumps at clock marks (docs/forecaster.md, "Clock phase").',
            ),
        ] = "lstm",
    ) -> None:
        """Train the LSTM on a trace and register it (data span, hyperparameters, metrics, artifact).

        The data is a trace name or series CSV (--trace), or every --policy's demand query read
        from Prometheus (--prometheus, the --days before --end). Of a trace, by default only the
        history split (first 75 %) is used, so `bench forecast` stays fair.
        """
        from forecaster.lstm import LSTMForecaster
        from forecaster.registry import LEARNED
        from scaleahead.traces import load_series, split_of
        from storage import Store

        if (trace is None) == (prometheus is None):
            raise UserError("Give exactly one of --trace and --prometheus.", "See scaleahead train --help.")
        if model_name not in LEARNED:
            raise UserError(f"--model {model_name!r} is not a learned model.", f"Use one of {', '.join(LEARNED)}.")
        if trace is not None and (days is not None or end is not None):  # (they were ignored: docs audit)
            raise UserError(
                f"{'--days' if days is not None else '--end'} only applies with --prometheus; a trace is read whole "
                "(--whole) or its history split (--history, the default).",
                "Leave it out, or cut the series CSV to the span to train on.",
            )
        # Checked before minutes of training, but made only when the checkpoint is saved: a refused
        # train leaves no empty folder behind.
        check_folder(out, "--out", create=False)
        cfg = _lstm_config(epochs, threads, seed, max_minutes, prior, blend, model_name)
        if prometheus is not None:
            train_data = _prometheus_training_data(prometheus, policy, 7.0 if days is None else days, end)
            source = f"{hide_password(prometheus)} ({len(train_data)} series)"  # a registry column
            name = "prometheus"
        else:
            assert trace is not None
            series = load_series(trace, column=column)
            sp = split_of(series, trace)
            train_data = [series if whole else series.between(sp.start, sp.test_start)]
            source = name = trace
        # The registry's columns, checked before minutes of training (PostgreSQL refuses a longer value
        # at the very end): the name is cut to fit, the data source must fit as given.
        stem = model_name.replace("_", "-")
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(name).name)
        safe = safe[: db_width("ModelVersionRow", "name") - len(stem) - 1]
        check_fits(
            "--trace" if trace is not None else "--prometheus (with its series count)",
            source,
            "ModelVersionRow",
            "data_source",
            "Give a shorter path (a symbolic link, or run from the file's folder); nothing was trained.",
        )
        store = Store(db)  # fail on a bad URL before training
        data = train_data[0]
        if model_name == "lstm":
            _clock_hint(train_data)
        err.print(f"training the LSTM on {len(train_data)} series ({len(data)} steps of {data.step_s:g} s)...")
        model = LSTMForecaster(cfg)

        def progress(epoch: int, epochs: int, val_loss: float | None, seconds: float) -> None:
            loss = "n/a" if val_loss is None else f"{val_loss:.4f}"
            err.print(f"epoch {epoch}/{epochs}: val pinball {loss} ({seconds:.0f} s)")

        model.on_epoch = progress
        model.fit(train_data)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        out.mkdir(parents=True, exist_ok=True)
        path = model.save(out / f"{stem}-{safe}-{stamp}.pt").resolve()
        metrics = asdict(model.report)
        mid = store.register_model(
            f"{stem}-{safe}",
            model_name,
            data_source=source,
            data_start=min(d.start for d in train_data),
            data_end=max(d.end for d in train_data),
            step_s=data.step_s,
            hyperparams=asdict(cfg),
            metrics=metrics,
            artifact_path=str(path),
            artifact_sha256=sha256_of(path),
            artifact=path.read_bytes(),
        )
        console.print(
            f"model {mid} registered: {path} ({metrics['epochs']} epochs, {metrics['train_s']:.0f} s, "
            f"val pinball {metrics['val_loss']:.4f})"
        )

    @models_app.command("list")
    def models_list(db: DbOpt = None, output: OutputOpt = "table") -> None:
        """List registered model versions."""
        from scaleahead.commands.rollout import json_text
        from storage import Store

        rows = Store(db, create=False).models()
        if output == "json":
            print(json_text([_model_json(m) for m in rows]))
            return
        table = Table(title="model versions")
        for col in ("id", "name", "family", "status", "created (UTC)", "data", "step_s", "val_loss"):
            # what a user reads before `models promote` is never cut short: the name and data fold
            table.add_column(col, overflow="fold", no_wrap=col not in ("name", "data"))
        for m in rows:
            table.add_row(
                str(m.id),
                m.name,
                m.family,
                m.status,
                m.created_at.strftime("%Y-%m-%d %H:%M"),
                m.data_source,
                f"{m.step_s:g}" if m.step_s else "",
                f"{m.metrics.get('val_loss', float('nan')):.4f}" if "val_loss" in m.metrics else "",
            )
        console.print(table)

    @models_app.command("promote")
    def models_promote(model_id: Annotated[int, typer.Argument(help="Model version id.")], db: DbOpt = None) -> None:
        """Make a model version the champion of its family (the others retired): also how a promoted
        model is rolled back. A running daemon that plans with that family switches to it within a
        minute (docs/operations.md)."""
        from forecaster.registry import LEARNED
        from storage import Store

        store = Store(db, create=False)
        m = store.model(model_id)
        note = _promotable_checkpoint(store, m) if m.family in LEARNED else ""
        arm = [r for r in store.rollouts(state="running") if r.challenger == str(model_id)]
        if arm:
            # the rollout would go on comparing the version with itself, and an abort would not
            # undo this (an operator audit)
            raise UserError(
                f"Model version {model_id} is the challenger of the running rollout {arm[0].id} (group "
                f"{arm[0].group}); nothing was changed.",
                f"Promote the rollout (`scaleahead rollout promote --group {arm[0].group}`), or abort it first "
                f"(`scaleahead rollout abort --group {arm[0].group}`).",
            )
        retired = store.make_champion(model_id)
        console.print(
            f"model {model_id} ({m.family}) is the champion; retired: {', '.join(map(str, retired)) or 'none'}. "
            f"A running daemon planning with a {m.family} version (or with forecast.model {m.family}) switches "
            "to it within a minute (log event model_changed)."
        )
        if note:
            console.print(f"note: {note}", markup=False)

    @models_app.command("show")
    def models_show(model_id: Annotated[int, typer.Argument(help="Model version id.")], db: DbOpt = None) -> None:
        """Show one model version as JSON, and whether its artifact is intact."""
        from scaleahead.commands.rollout import json_text
        from storage import Store

        store = Store(db, create=False)
        m = store.model(model_id)
        data = _model_json(m)
        path = Path(m.artifact_path)
        # null: the version names no artifact file to check
        data["artifact_ok"] = (path.is_file() and sha256_of(path) == m.artifact_sha256) if m.artifact_path else None
        if model_id in store.models_with_artifacts():
            try:
                data["stored_artifact_bytes"] = len(store.model_artifact(model_id) or b"")
                data["stored_artifact_ok"] = True
            except DataError:
                data["stored_artifact_ok"] = False
        print(json_text(data))

    @bench_app.command("forecast")
    def bench_forecast(
        trace: TraceOpt,
        json_out: Annotated[
            Path | None, typer.Option("--json", help="Write the results here (EVALUATION.md 7).")
        ] = None,
        column: ColumnOpt = None,
        models: Annotated[
            str | None, typer.Option(help="Comma-separated models (default: every registered model).")
        ] = None,
        save_forecasts: Annotated[
            Path | None, typer.Option(help="Also save every forecast and actual as .npz (input of `report`).")
        ] = None,
        epochs: Annotated[int | None, typer.Option(help="LSTM maximum epochs (default 30).")] = None,
        threads: Annotated[int | None, typer.Option(help="LSTM torch threads (default 1).")] = None,
        seed: Annotated[int | None, typer.Option(help="LSTM seed (default 0).")] = None,
        prior: PriorOpt = None,
        blend: BlendOpt = None,
    ) -> None:
        """Forecast accuracy, EVALUATION.md section 3: 15 min ahead, origins every 5 min of the test period.

        Every model is fitted on the history (first 75 %) only and scored on the same origins:
        MAE, rel_mae (vs seasonal naive), wql, coverage_q90, mae_by_step.
        """
        from forecaster.lstm import LSTMForecaster
        from forecaster.registry import available_models, make_model
        from scaleahead.bench import forecast as fb
        from scaleahead.traces import load_series

        for p, what in ((json_out, "--json"), (save_forecasts, "--save-forecasts")):
            if p is not None:
                check_output(p, what)
        names = [m.strip() for m in models.split(",")] if models else available_models()
        unknown = [m for m in names if m not in available_models()]
        if unknown:
            raise UserError(f"Unknown model(s) {unknown}.", f"Known: {', '.join(available_models())}.")
        series = load_series(trace, column=column)
        cfgs = {m: _lstm_config(epochs, threads, seed, None, prior, blend, m) for m in ("lstm", "lstm_clock")}

        def make(name: str) -> Any:
            return LSTMForecaster(cfgs[name]) if name in cfgs else make_model(name)

        params = _non_defaults(
            models=models, column=column, epochs=epochs, threads=threads, seed=seed, prior=prior, blend=blend
        )
        result = fb.run(series, trace, names, make=make, params=params, log=lambda m: err.print(m))
        table = Table(title=f"forecast accuracy: {trace} ({len(result.origins)} origins, 15 min ahead)")
        for col in ("model", "MAE", "rel_mae", "wql", "coverage_q90", "fit_s"):
            table.add_column(col)
        for name, v in result.models.items():
            if "error" in v:
                table.add_row(name, "error: " + escape(v["error"]), "", "", "", "")
                continue
            table.add_row(
                name,
                f"{v['mae']:.4g}",
                f"{v['rel_mae']:.3f}",
                f"{v['wql']:.4f}",
                f"{v['coverage_q90']:.3f}",
                f"{v['fit_s']:.1f}",
            )
        console.print(table)
        if json_out is not None:
            json_out.write_text(json.dumps(result.to_json(), indent=1))
        if save_forecasts is not None:
            result.save_forecasts(save_forecasts, series)

    @bench_app.command("forecast-speed")
    def bench_forecast_speed(
        series_count: Annotated[int, typer.Option("--series", help="Number of series forecast in one batch.")] = 1000,
        checkpoint: Annotated[
            Path | None, typer.Option(help="LSTM checkpoint (default: an untrained network of the default shape).")
        ] = None,
        repeats: Annotated[int, typer.Option(help="Runs; the median is reported.")] = 5,
        threads: Annotated[int, typer.Option(help="torch threads.")] = 2,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the result here.")] = None,
    ) -> None:
        """Time one batched LSTM forecast of N series (all quantiles, 90 steps at 10 s): forecast_ms.

        Weights do not change the cost, so without --checkpoint an untrained network of the
        default shape is timed. Each series has 8 days of 10 s history with 3 % missing points.
        """
        check_positive("--series", series_count, "Give a count of series, e.g. 1000.")
        check_positive("--repeats", repeats, "Give a count of runs, e.g. 5.")
        check_positive("--threads", threads, "Give a thread count, e.g. 2.")
        check_output(json_out, "--json")  # before the work, not after it
        import time

        import numpy as np
        import torch

        from forecaster.lstm import LSTMForecaster
        from scaleahead.types import Series, WorkloadRef

        model = LSTMForecaster.load(checkpoint) if checkpoint else LSTMForecaster.untrained(10.0)
        torch.set_num_threads(threads)
        rng = np.random.default_rng(0)
        n = 8 * 8640
        start = 1_700_000_000.0
        t = np.arange(n)
        items = []
        for k in range(series_count):
            v = 50 + 20 * np.sin(2 * np.pi * t / 8640 + k) + rng.normal(0, 3, n)
            v[rng.random(n) < 0.03] = np.nan
            items.append((WorkloadRef("Deployment", "bench", f"w{k}"), Series(f"w{k}", start, 10.0, v)))
        origin = start + n * 10.0
        times, cpu = [], []
        model.forecast_many(items, origin, 90)  # warm-up
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            fcs = model.forecast_many(items, origin, 90)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        assert len(fcs) == series_count
        ms, cpu_ms = float(np.median(times)), float(np.median(cpu))
        console.print(
            f"forecast_ms for {series_count} series x 90 steps x 4 quantiles: {ms:.1f} wall, {cpu_ms:.1f} CPU "
            f"(median of {repeats}; on a shared machine the wall time includes waiting for a core)"
        )
        if json_out is not None:
            doc = {
                "forecast_ms": {str(series_count): round(ms, 1)},
                "forecast_cpu_ms": {str(series_count): round(cpu_ms, 1)},
            }
            json_out.write_text(json.dumps({**doc, "threads": threads}))

    @app.command()
    def report(
        out: Annotated[Path, typer.Option(help="HTML file to write (self-contained, opens offline).")],
        bench: Annotated[list[Path] | None, typer.Option(help="A `bench forecast --json` file (repeatable).")] = None,
        forecasts: Annotated[
            list[Path] | None,
            typer.Option(help="Its `--save-forecasts` .npz (repeatable, same order as --bench) for fan charts."),
        ] = None,
        db: DbOpt = None,
        trace: Annotated[
            str | None, typer.Option(help="Actual demand for forecasts stored in --db (trace name or CSV).")
        ] = None,
        workload: Annotated[
            list[str] | None,
            typer.Option(
                help="Stored workload key Kind/ns/name whose demand --trace is (repeatable; default: the one "
                "workload with stored forecasts; required when the database holds several)."
            ),
        ] = None,
        column: ColumnOpt = None,
    ) -> None:
        """Forecast accuracy report: fans vs actuals, MAE by step, calibration, per-workload table.

        From a benchmark run (--bench [--forecasts]) and/or from forecasts stored in the database
        during operation compared with a trace (--trace [--db] [--workload]). The database is only
        read: a missing one is an error, never created.
        """
        from scaleahead.bench import report as rp

        check_output(out, "--out")
        if not bench and trace is None:
            raise UserError(
                "Nothing to report.", "Pass --bench FILE.json, or --trace NAME to compare stored forecasts."
            )
        if forecasts and (not bench or len(forecasts) != len(bench)):
            raise UserError("--forecasts must pair with --bench, one each, in the same order.", "")
        if trace is None and (workload or column is not None):  # (ignored without a word: docs audit)
            raise UserError(
                f"{'--workload' if workload else '--column'} only goes with --trace (the stored forecasts' demand).",
                "Add --trace NAME, or drop it.",
            )
        summaries, scored = [], []
        for i, b in enumerate(bench or []):
            s, sc = rp.from_bench(b, forecasts[i] if forecasts else None)
            summaries.append(s)
            if sc is not None:
                scored.append(sc)
        if trace is not None:
            from scaleahead.traces import load_series
            from storage import Store

            given = [rp.workload_ref(w) for w in workload or []]  # checked before anything is opened
            actual = load_series(trace, column=column)
            store = Store(db, create=False)  # it only reads: a missing database is an error, never created
            refs = given or store.workloads()
            stored_by = {ref: store.forecasts(ref) for ref in refs}
            stored_by = {ref: fcs for ref, fcs in stored_by.items() if fcs}
            if not given and len(stored_by) > 1:
                # One trace is one workload's demand: scoring the others against it would show
                # another service's error (before, every stored workload was scored against it).
                keys = [r.key for r in stored_by]
                raise UserError(
                    f"{store._safe_url()} holds forecasts of {len(keys)} workloads ({', '.join(keys[:5])}"
                    f"{' ...' if len(keys) > 5 else ''}), and --trace {trace} is the demand of one.",
                    "Name that workload with --workload KIND/NS/NAME.",
                )
            found = 0
            for ref, stored in stored_by.items():
                sc = rp.from_stored(ref.key, stored, actual)
                scored.append(sc)
                summaries.append(rp.summary_of(sc))
                found += 1
            if not found:
                held = [r.key for r in store.workloads() if store.forecasts(r)]
                raise UserError(
                    f"No stored forecasts in {store._safe_url()} for "
                    f"{', '.join(workload) if workload else 'any workload'}.",
                    f"It holds forecasts of: {', '.join(held[:10])}{' ...' if len(held) > 10 else ''}."
                    if held
                    else "It holds none: `scaleahead run` stores the forecasts it plans with (`scaleahead plan` "
                    "stores only its plan), e.g. `scaleahead run --policies examples/policy.yaml --history "
                    "trace:nasa-10s --target memory --virtual --ticks 360 --no-server --db URL`, then "
                    "`report --db URL --trace nasa-10s`.",
                )
        out.write_text(rp.render(summaries, scored))
        console.print(f"wrote {out} ({out.stat().st_size // 1024} KB)")


def _promotable_checkpoint(store: Any, m: Any) -> str:
    """Refuse (``UserError``) a learned (lstm, lstm_clock) version the daemon could not load: its
    checkpoint stored in the database is what it loads (a damaged one is never loaded), else the
    file, which must match the SHA-256 recorded at training. That copy must then load as the daemon
    loads it (``LSTMForecaster.load``: a checkpoint, of a known format, whose weights fit the network
    it declares and whose content matches the digest it was saved with), or the daemon would plan
    with its fallback model. Nothing is changed here; the caller promotes only when this returns.
    Returns a note when the file is damaged or missing but the stored copy is intact."""
    path = Path(m.artifact_path) if m.artifact_path else None
    file_ok: bool | None = None  # None: no file
    if path is not None and path.is_file():
        try:  # no hash recorded: nothing to check the file against (loading it below still is)
            file_ok = not m.artifact_sha256 or sha256_of(path) == m.artifact_sha256
        except OSError:
            file_ok = False
    if m.id in store.models_with_artifacts():
        try:
            data = store.model_artifact(m.id)
        except DataError as exc:
            raise UserError(
                f"Model version {m.id}: the checkpoint stored in the database does not match its SHA-256, and "
                "the daemon loads that copy (a damaged one is never loaded, so it would plan with its fallback "
                f"model){'; the file ' + str(path) + ' is intact' if file_ok else ''}.",
                "Retrain (scaleahead train) and promote the new version, or promote another one "
                "(scaleahead models list); nothing was changed.",
            ) from exc
        _check_loads(m, data, "the checkpoint stored in the database")
        if file_ok is False:
            return (
                f"the checkpoint file {path} does not match its SHA-256; the daemon loads the intact copy "
                "stored in the database."
            )
        if path is not None and file_ok is None:
            return (
                f"the checkpoint file {path} is missing; the daemon loads the intact copy stored in the "
                "database (`scaleahead models show` lists the version without a file)."
            )
        return ""
    if file_ok is None:
        raise UserError(
            f"Model version {m.id} has no checkpoint, in the database or at {m.artifact_path or '(no path)'}"
            f"{m.pruned_note}.",
            "Promote a version that has one (scaleahead models show ID).",
        )
    if file_ok is False:
        raise UserError(
            f"Model version {m.id}: its checkpoint file {path} does not match the SHA-256 recorded at training "
            "(changed or damaged since), and no copy is stored in the database.",
            "Restore the file from a backup, or retrain (scaleahead train) and promote the new version; "
            "nothing was changed.",
        )
    assert path is not None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(
            f"Model version {m.id}: its checkpoint file {path} cannot be read ({exc.strerror or exc}).",
            "Make it readable, or promote another version (scaleahead models list); nothing was changed.",
        ) from exc
    _check_loads(m, data, f"its checkpoint file {path}")
    return ""


def _check_loads(m: Any, data: bytes | None, what: str) -> None:
    """Refuse (``UserError``) the promotion of version ``m`` when ``data``, the checkpoint the daemon
    would load (``what`` names it), does not load. Reading a default-size checkpoint (240 KB),
    checking its digest and building its small network take about 15 ms; importing torch to read it
    (any check of its content needs ``torch.load``) about 1.3 s more, for learned versions only."""
    import tempfile

    from forecaster.lstm import CheckpointError, LSTMForecaster

    with tempfile.TemporaryDirectory(prefix="scaleahead-promote-") as tmp:
        copy = Path(tmp) / "model.ckpt"
        copy.write_bytes(data or b"")
        try:
            LSTMForecaster.load(copy)
        except CheckpointError as exc:
            # the loader names the file it read: here a copy, so "it" (``what`` says which one)
            why = exc.what.replace(f"LSTM checkpoint {copy}", "it").replace(str(copy), "it")
            raise UserError(
                f"Model version {m.id}: {what} does not load (the daemon would plan with its fallback model): {why}",
                "Retrain (scaleahead train) and promote the new version, or promote another one "
                "(scaleahead models list); nothing was changed.",
            ) from exc


def _model_json(m: Any) -> dict[str, Any]:
    d = {k: getattr(m, k) for k in m.__dataclass_fields__}
    d["created_at"] = m.created_at.isoformat()
    return d
