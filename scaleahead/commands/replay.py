"""``scaleahead bench replay`` and ``scaleahead demo``: the service replay and the no-setup demo.

Both are thin: ``scaleahead.bench.replay`` and ``scaleahead.demo`` do the work. Heavy imports stay
inside the command functions so that ``scaleahead --help`` stays fast.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from scaleahead.commands import check_output, check_positive, number_list, share_steps
from scaleahead.errors import UserError

#: Most training seeds ``bench replay --seeds`` runs (each trains the forecaster again).
MAX_SEEDS = 100

#: The replay metrics every table shows, in this order (``metric_cells``).
METRIC_COLUMNS = ("violations", "unserved", "replica-seconds", "utilization", "scale events")


def metric_cells(m: dict[str, Any]) -> tuple[str, ...]:
    """One policy's replay metrics as table cells, in the order of ``METRIC_COLUMNS``."""
    return (
        f"{m['violation_fraction']:.4%}",
        f"{m['unserved_fraction']:.4%}",
        f"{m['replica_seconds']:,.0f}",
        f"{m['utilization']:.3f}",
        f"{m['scale_events']:,}",
    )


def _parse_sets(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--set {item!r} is not KEY=VALUE.", "Use e.g. --set forecastQuantile=0.99.")
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            # Unquoted, so not meant as text: what Python reads as a number (nan, inf, +3, .5, 1_000) is
            # one, and the policy says what is wrong with it (it used to be the string 'nan', and
            # the advice to write it without quotes, though none were written).
            try:
                parsed = float(value)
            except ValueError:
                parsed = value
        # A dotted key sets a field of a nested block: objective.sloRisk=1000 -> {"objective": {"sloRisk": 1000}}.
        *parents, leaf = [part.strip() for part in key.split(".")]
        node = out
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise UserError(f"--set {item!r}: {part!r} is set to a value and a block at once.", "Give one of them.")
            node = child
        node[leaf] = parsed
    return out


def check_policy(setup: Any, overrides: dict[str, Any], option: str) -> None:
    """A ``UserError`` naming ``option`` unless ``overrides`` give a valid replay policy."""
    from pydantic import ValidationError

    from scaleahead.bench import replay as rp

    try:
        rp.replay_policy_object(setup, "check", **overrides)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'][1:])}: {err['msg']}" for err in exc.errors())
        raise UserError(
            f"{option} gives an invalid policy ({problems}).", "See docs/configuration.md for fields and bounds."
        ) from exc


def _seed_table(spread: dict[str, Any], model: str) -> Any:
    """The table of ``bench replay --seeds``: one row per training seed, then min/median/max."""
    from rich.table import Table

    def ratio(v: float | None) -> str:
        return "" if v is None else f"{v:.3f}x"

    table = Table(title=f"scaleahead with {model} trained from each seed (the peers as above)")
    for col in (
        "seed",
        "violations",
        "replica-seconds",
        "scale events",
        "violations / hpa",
        "cost / hpa",
        "cost / oracle",
    ):
        table.add_column(col, justify="right", no_wrap=True)

    def cells(row: dict[str, Any]) -> list[str]:
        return [
            f"{row['violation_fraction']:.4%}",
            f"{row['replica_seconds']:,.0f}",
            f"{row['scale_events']:,.0f}",
            ratio(row.get("violations_rel_hpa")),
            ratio(row.get("cost_rel_hpa")),
            ratio(row.get("cost_rel_oracle")),
        ]

    for seed, row in spread["runs"].items():
        table.add_row(seed, *cells(row))
    if len(spread["runs"]) > 1:
        for stat in ("min", "median", "max"):
            table.add_row(stat, *cells({k: v[stat] for k, v in spread["summary"].items()}))
    return table


def _window(setup: Any, start: str | None, hours: float) -> tuple[int, int] | None:
    from scaleahead.bench.replay import busiest_window
    from scaleahead.cli import parse_time

    if hours <= 0:
        raise UserError(f"--plot-hours {hours:g} must be positive.", "Use e.g. --plot-hours 6.")
    if start is None:
        return busiest_window(setup, hours)
    t = parse_time(start, "--plot-start")
    a = int(math.floor((t - setup.t0) / setup.step_s))
    n = setup.demand.size
    if a < 0 or a >= n:
        raise UserError(
            f"--plot-start {start} is outside the test period.", "Pick a time after the 75 % split of the trace."
        )
    return a, min(n, a + max(1, int(hours * 3600 / setup.step_s)))


def _rollout_replay(
    traces: list[str],
    json_path: Path,
    mode: str,
    challenger: str | None,
    champion: str,
    canary_steps: str,
    window_s: float,
    margins: tuple[float, float, float],
    split: float,
    steps: int | None,
    db: str | None,
    compare: bool,
    startup_s: float,
    column: str | None,
) -> None:
    """``bench replay --rollout``: the closed-loop rollout of ``scaleahead.bench.rollout_loop``."""
    from rich.console import Console
    from rich.table import Table

    from actuator.rollouts import CanaryParams
    from forecaster.registry import available_models
    from scaleahead.bench.rollout_loop import MODES, run_rollout_replay
    from scaleahead.traces import load_series

    if mode not in MODES:
        raise UserError(f"--rollout {mode!r} is not a rollout mode.", f"Use one of {', '.join(MODES)}.")
    if not challenger:
        raise UserError("--rollout needs --challenger MODEL.", "E.g. --challenger window_mean.")
    known = available_models()
    for what, name in (("--champion", champion), ("--challenger", challenger)):
        if name not in known:
            raise UserError(f"{what} {name!r} is not a registered model.", f"Known: {', '.join(sorted(known))}.")
    shares = share_steps("--canary-steps", canary_steps)
    if not math.isfinite(window_s) or window_s <= 0:
        raise UserError(f"--rollout-window {window_s:g} must be a positive number of seconds.", "E.g. 21600.")
    if any(not math.isfinite(m) for m in margins):
        raise UserError("The --max-*-increase margins must be finite numbers.", "E.g. --max-cost-increase 0.05.")
    # Checked before any trace is read or model fitted (the rollout book and the simulation check
    # them again, but only after minutes of work).
    if not 0.0 < split < 1.0:  # also NaN
        raise UserError(f"--split {split} is not a share strictly between 0 and 1.", "Use e.g. --split 0.5.")
    if steps is not None and steps < 2:
        raise UserError(f"--steps {steps} is too few to run a rollout.", "Use --steps 200 or more, or leave it out.")
    params = CanaryParams(
        steps=shares,
        window_s=window_s,
        max_violation_increase=margins[0],
        max_cost_increase=margins[1],
        max_error_increase=margins[2],
    )
    series = [(t, load_series(t, column=column)) for t in traces]
    console = Console(stderr=True)
    with console.status("rollout replay: fitting, forecasting, stepping every workload together"):
        doc = run_rollout_replay(series, mode, champion, challenger, params, split, startup_s, steps, db, compare)
    if startup_s != 60.0:
        doc["params"]["startup_seconds"] = startup_s
    if column is not None:
        doc["params"]["column"] = column
    json_path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    out = Console()
    if not out.is_terminal:
        out = Console(width=200)
    r = doc["rollout"]
    step_s = doc["resolution_s"]
    timeline = Table(
        title=f"{mode} rollout: champion {champion} vs challenger {challenger}, {len(traces)} workloads, "
        f"{doc['steps']} steps of {step_s:g} s, evaluated every {r['window_steps']} steps"
    )
    for col in ("step", "time (h)", "share", "decision", "why", "switched"):
        timeline.add_column(col, overflow="fold")
    for e in r["timeline"]:
        timeline.add_row(
            str(e["step"]),
            f"{e['step'] * step_s / 3600:.1f}",
            f"{e['share']:.0%}" + (f" -> {e['new_share']:.0%}" if e["new_share"] != e["share"] else ""),
            e["decision"],
            e["why"],
            str(len(e["switched"])),
        )
    out.print(timeline)
    table = Table(title="outcomes over the run (mean over workloads; replica-seconds and scale events summed)")
    table.add_column("run", no_wrap=True)
    for col in (*METRIC_COLUMNS, "challenger steps"):
        table.add_column(col, justify="right", no_wrap=True)
    for name, m in doc["policies"].items():
        table.add_row(name, *metric_cells(m), f"{m['challenger_steps']:,}")
    out.print(table)
    out.print(
        f"rollout {r['id']} ended {r['state']} at share {r['final_share']:.0%}; "
        f"{doc['timing_s']['total']:.1f} s; JSON: {json_path}",
        soft_wrap=True,
    )


def day_range(text: str) -> list[int]:
    """``--rolling-day``: ``K`` or ``A-B`` (A <= B) as the list of days; anything else is a ``UserError``."""
    first, sep, last = text.strip().partition("-")
    try:
        lo = int(first)
        hi = int(last) if sep else lo
    except ValueError:
        lo, hi = 0, -1
    if lo < 1 or hi < lo:
        raise UserError(
            f"--rolling-day {text!r} is not a day K or a range A-B of days (1 = the day before the test period).",
            "For example --rolling-day 1 or --rolling-day 1-3.",
        )
    return list(range(lo, hi + 1))


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("replay")
    def replay(
        ctx: typer.Context,
        trace: Annotated[
            list[str],
            typer.Option(
                help="Trace name (nasa-10s, alibaba-cpu-10s, worldcup-1m, ...) or CSV path; with --rollout give "
                "it once per workload."
            ),
        ],
        json_path: Annotated[Path, typer.Option("--json", help="Write the metrics JSON here (EVALUATION.md s. 7).")],
        decisions: Annotated[
            Path | None,
            typer.Option(help="Write policy,timestamp,demand,desired,allocated,ready rows here (.gz to compress)."),
        ] = None,
        capacity: Annotated[
            float | None, typer.Option(help="Demand one ready replica serves (default: p99 of the test period / 40).")
        ] = None,
        startup_seconds: Annotated[float, typer.Option(help="Start-up delay L of a new replica (s).")] = 60.0,
        plot: Annotated[Path | None, typer.Option(help="Write a PNG of demand vs ready capacity per policy.")] = None,
        plot_start: Annotated[
            str | None, typer.Option(help="Start of the plotted window (ISO-8601 or epoch s); default: busiest.")
        ] = None,
        plot_hours: Annotated[float, typer.Option(help="Length of the plotted window (h).")] = 6.0,
        model: Annotated[
            str | None,
            typer.Option(
                help="Forecaster of the scaleahead policy (default: the setting forecast.model, "
                "$SCALEAHEAD_FORECAST__MODEL, default lstm; if not registered, the best baseline). The JSON "
                "records it as params.scaleahead_model."
            ),
        ] = None,
        policies: Annotated[
            str, typer.Option(help="Comma-separated policies to run.")
        ] = "scaleahead,predictive_seasonal_naive,hpa,static_peak,oracle",
        set_: Annotated[
            list[str] | None,
            typer.Option(
                "--set",
                help="Override a field of the predictive policies' spec, e.g. forecastQuantile=0.99 or "
                "objective.sloRisk=1000 (a dot reaches into a block).",
            ),
        ] = None,
        column: Annotated[str | None, typer.Option(help="Value column of a series CSV.")] = None,
        rollout: Annotated[
            str | None,
            typer.Option(
                help="Run a rollout closed-loop instead: canary, ab or shadow, one workload per --trace "
                "(docs/replay.md, 'Rollouts in the replay')."
            ),
        ] = None,
        challenger: Annotated[str | None, typer.Option(help="With --rollout: the challenger forecaster.")] = None,
        champion: Annotated[
            str, typer.Option(help="With --rollout: the champion forecaster (the one running now).")
        ] = "seasonal_naive",
        canary_steps: Annotated[
            str, typer.Option(help="With --rollout canary: the challenger's share steps, comma-separated.")
        ] = "0.1,0.25,0.5,1.0",
        rollout_window: Annotated[
            float, typer.Option(help="With --rollout: seconds of outcomes per evaluation (canary decision).")
        ] = 3600.0,
        max_violation_increase: Annotated[
            float,
            typer.Option(
                help="With --rollout canary: the margin on the violation fraction (roll back when the challenger "
                "is shown worse by more; advance only when shown worse by less), as rollout start."
            ),
        ] = 0.02,
        max_cost_increase: Annotated[
            float,
            typer.Option(help="With --rollout canary: roll back if its cost per demand is higher by more (relative)."),
        ] = 0.05,
        max_error_increase: Annotated[
            float,
            typer.Option(help="With --rollout canary: roll back if its forecast error is higher by more (relative)."),
        ] = 0.05,
        split: Annotated[float, typer.Option(help="With --rollout ab: the challenger's fixed share.")] = 0.5,
        steps: Annotated[
            int | None, typer.Option(help="With --rollout: replay only the first N test steps (default: all).")
        ] = None,
        rollout_db: Annotated[
            str | None,
            typer.Option(help="With --rollout: keep the rollout state in this database (default: a temporary SQLite)."),
        ] = None,
        compare: Annotated[
            bool,
            typer.Option(help="With --rollout: also run all-champion and all-challenger references in the same loop."),
        ] = True,
        seeds: Annotated[
            str | None,
            typer.Option(
                help="Train the scaleahead policy's forecaster (a learned one: lstm, lstm_clock) from each of these "
                "seeds, e.g. 0-4 or 0,3, and replay it once per seed: a second table and the JSON's 'seeds' block "
                "give every seed's outcome and their min/median/max. The first table, the JSON's 'policies', "
                "--plot and --decisions are the first seed's (default: the model's own seed, 0)."
            ),
        ] = None,
    ) -> None:
        """Service replay: scaleahead vs the HPA, static peak and the oracle on one trace (EVALUATION.md s. 4).

        With --rollout canary|ab|shadow --challenger MODEL and several --trace: one simulation of all
        workloads in which the live rollout state (kept in storage) picks each workload's forecaster
        at every step and the canary advances, promotes or rolls back from the outcomes measured so
        far; prints and writes the timeline.
        """
        check_output(json_path, "--json")
        check_output(decisions, "--decisions")
        check_output(plot, "--plot", ".png")
        check_positive("--plot-hours", plot_hours, "Give the hours of the plotted window, e.g. 6.")
        if plot_start is not None:  # a time that is no time fails now, not after the trace is read
            from scaleahead.cli import parse_time

            parse_time(plot_start, "--plot-start")
        seed_list = None
        if seeds is not None:
            from scaleahead.commands.rebalance import parse_seeds

            seed_list = parse_seeds(seeds)
            if len(seed_list) > MAX_SEEDS:
                raise UserError(
                    f"--seeds names {len(seed_list):,} seeds; each one trains the forecaster again (about a minute "
                    f"on 2 cores), so at most {MAX_SEEDS} are run.",
                    "Give fewer seeds, for example 0-4.",
                )
        if rollout is not None:
            if seeds is not None:
                raise UserError(
                    "--seeds does not apply to a --rollout replay.",
                    "Drop --seeds; replay the models one at a time without --rollout to see their seed spread.",
                )
            if decisions is not None or plot is not None or set_ or model is not None or capacity is not None:
                raise UserError(
                    "--decisions, --plot, --set, --model and --capacity do not apply to a --rollout replay.",
                    "Drop them; the rollout's models are --champion and --challenger.",
                )
            _rollout_replay(
                trace,
                json_path,
                rollout,
                challenger,
                champion,
                canary_steps,
                rollout_window,
                (max_violation_increase, max_cost_increase, max_error_increase),
                split,
                steps,
                rollout_db,
                compare,
                startup_seconds,
                column,
            )
            return
        if len(trace) != 1:
            raise UserError(
                f"--trace was given {len(trace)} times; a replay without --rollout runs one trace.",
                "Give --trace once, or add --rollout canary|ab|shadow --challenger MODEL for several workloads.",
            )
        rollout_only = [
            "--" + param.replace("_", "-")
            for param in (
                "challenger",
                "champion",
                "canary_steps",
                "rollout_window",
                "max_violation_increase",
                "max_cost_increase",
                "max_error_increase",
                "split",
                "steps",
                "rollout_db",
                "compare",
            )
            if getattr(ctx.get_parameter_source(param), "name", "DEFAULT") != "DEFAULT"  # given on the command line
        ]
        if rollout_only:
            given = ", ".join(rollout_only).replace("--compare", "--compare/--no-compare")
            verb = "applies" if len(rollout_only) == 1 else "apply"
            raise UserError(f"{given} only {verb} with --rollout.", f"Add --rollout canary|ab|shadow or drop {given}.")
        trace_name = trace[0]
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.table import Table

        from scaleahead.bench import replay as rp
        from scaleahead.traces import load_series

        names = [p.strip() for p in policies.split(",") if p.strip()]
        unknown = [p for p in names if p not in rp.POLICIES]
        if unknown or not names:
            raise UserError(f"--policies has unknown names {unknown}.", f"Known: {', '.join(rp.POLICIES)}.")
        if seed_list is not None:
            if "scaleahead" not in names:
                raise UserError(
                    "--seeds trains the scaleahead policy's forecaster, but --policies leaves that policy out.",
                    "Add scaleahead to --policies, or drop --seeds.",
                )
            if model is not None:
                rp.check_seedable(model)
        overrides = _parse_sets(set_ or [])
        if capacity is not None and (not math.isfinite(capacity) or capacity <= 0):
            raise UserError(
                f"--capacity {capacity:g} is not a positive number: one replica must serve some demand.",
                "Give the demand one ready replica serves, or leave it out to use p99 of the test period / 40.",
            )
        series = load_series(trace_name, column=column)
        setup = rp.prepare(series, capacity, startup_seconds, name=trace_name)
        window = _window(setup, plot_start, plot_hours) if plot is not None else None
        check_policy(setup, overrides, "--set")
        console = Console(stderr=True)
        with Progress(
            TextColumn("{task.description:28s}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as bar:
            tasks = {n: bar.add_task(n, total=setup.demand.size) for n in names}
            first = None if seed_list is None else seed_list[0]
            doc, runs = rp.run_replay(
                setup, names, model, overrides, progress=lambda n, k: bar.advance(tasks[n], k), seed=first
            )
            if seed_list is not None:
                seed_tasks = {s: bar.add_task(f"scaleahead seed {s}", total=setup.demand.size) for s in seed_list[1:]}
                doc["seeds"] = rp.seed_spread(
                    setup, doc, seed_list, overrides, progress=lambda s, k: bar.advance(seed_tasks[s], k)
                )
        doc["trace"] = trace_name
        params = doc.setdefault("params", {})
        if capacity is not None:
            params["capacity"] = capacity
        if startup_seconds != 60.0:
            params["startup_seconds"] = startup_seconds
        if column is not None:
            params["column"] = column
        json_path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        if decisions is not None:
            rp.write_decisions(decisions, setup, runs)
        if plot is not None:
            rp.plot(plot, setup, runs, window)
        out = Console()
        if not out.is_terminal:
            out = Console(width=160)
        table = Table(
            title=f"{trace_name}: {setup.demand.size} test steps of {setup.step_s:g} s, c = {setup.capacity:.4g}, "
            f"start-up {setup.startup_s:g} s"
        )
        table.add_column("policy", no_wrap=True)
        for col in METRIC_COLUMNS:
            table.add_column(col, justify="right", no_wrap=True)
        for name, m in doc["policies"].items():
            table.add_row(name, *metric_cells(m))
        out.print(table)
        if "scaleahead_model_note" in doc["params"]:
            out.print(f"scaleahead forecaster: {doc['params']['scaleahead_model_note']}", soft_wrap=True)
        if "seeds" in doc:
            out.print(_seed_table(doc["seeds"], doc["params"]["scaleahead_model"]))
        timing = doc["timing_s"]
        out.print(
            f"replay time (training excluded): {timing['replay_total']:.1f} s wall, "
            f"{timing['replay_cpu_total']:.1f} s CPU; JSON: {json_path}"
        )

    @bench_app.command("replay-tradeoff")
    def replay_tradeoff(
        trace: Annotated[str, typer.Option(help="Trace name or series CSV path.")],
        json_path: Annotated[Path, typer.Option("--json", help="Write the points (metrics per setting) here.")],
        plot: Annotated[Path | None, typer.Option(help="Write a PNG: violations vs replica-seconds.")] = None,
        slo_risks: Annotated[
            str, typer.Option(help="Comma-separated objective.sloRisk values (the objective's curve).")
        ] = "30,100,1000,3000",
        quantiles: Annotated[
            str, typer.Option(help="Comma-separated fixed forecastQuantile values (instead of the objective).")
        ] = "0.5,0.9,0.99",
        utilizations: Annotated[
            str, typer.Option(help="Comma-separated targetUtilization values (at the default objective).")
        ] = "0.7,0.9,1.0",
        bound: Annotated[
            bool,
            typer.Option(help="Also draw the rate oracle's curve: what knowing the coming 5-min average would buy."),
        ] = True,
        validation: Annotated[
            bool,
            typer.Option(
                help="Run on the history's last 8 days instead of the test period (fit on the first 6, replay "
                "the last 2): how defaults are chosen without looking at the test period."
            ),
        ] = False,
        long_validation: Annotated[
            bool,
            typer.Option(
                help="Run on the whole history instead of the test period (fit on its first half, replay its "
                "second half): the long validation that chose the defaults since 2026-12-02."
            ),
        ] = False,
        rolling_day: Annotated[
            str | None,
            typer.Option(
                help="Run on days of the history instead of the test period: the K-th last (1 = the day before "
                "the test period), each fitted on everything before it (rolling-origin validation); K or a range "
                "A-B (e.g. 1-3) replays those days at one capacity per replica and adds them up.",
                metavar="K|A-B",
            ),
        ] = None,
        capacity: Annotated[float | None, typer.Option(help="Demand one ready replica serves.")] = None,
        startup_seconds: Annotated[float, typer.Option(help="Start-up delay L (s).")] = 60.0,
        model: Annotated[str | None, typer.Option(help="Forecaster (default as in bench replay).")] = None,
        risk_adaptation: Annotated[
            bool,
            typer.Option(
                help="Keep objective.riskAdaptation on at every point (as shipped); --no-risk-adaptation draws "
                "the fixed objective's curve (each sloRisk as given)."
            ),
        ] = True,
        set_: Annotated[
            list[str] | None,
            typer.Option(
                "--set",
                help="Override a field of the policy at every point, e.g. rampFloor.windowSeconds=0 (a dot reaches "
                "into a block); each point's setting applies on top.",
            ),
        ] = None,
    ) -> None:
        """The scaleahead policy's trade-off curves: violations vs cost as its objective, quantile and target vary."""
        from rich.console import Console
        from rich.table import Table

        from scaleahead.bench import replay as rp
        from scaleahead.policy import Objective, PolicySpec
        from scaleahead.traces import load_series

        check_output(json_path, "--json")
        check_output(plot, "--plot", ".png")
        spans = [o for o, on in (("--validation", validation), ("--long-validation", long_validation),
                                  ("--rolling-day", rolling_day is not None)) if on]  # fmt: skip
        if len(spans) > 1:
            raise UserError(f"{' and '.join(spans)} choose different spans of the history.", "Give one of them.")
        days = day_range(rolling_day) if rolling_day is not None else []
        ws = number_list("--slo-risks", slo_risks, "30,100,1000")
        qs = number_list("--quantiles", quantiles, "0.5,0.9")
        us = number_list("--utilizations", utilizations, "0.7,0.9")
        if capacity is not None and (not math.isfinite(capacity) or capacity <= 0):
            raise UserError(f"--capacity {capacity:g} is not a positive number.", "Give a positive capacity.")
        fields = PolicySpec.model_fields
        default_u = fields["target_utilization"].default
        default_w = Objective.model_fields["slo_risk"].default
        settings: list[dict[str, Any]] = [{}]
        settings += [{"objective": {"sloRisk": w}} for w in ws if w != default_w]
        settings += [{"forecastQuantile": q} for q in qs]
        settings += [{"targetUtilization": u} for u in us if u != default_u]
        if not risk_adaptation:
            off = {"riskAdaptation": {"enabled": False}}
            settings = [{**st, "objective": {**st.get("objective", {}), **off}} for st in settings]
        setup = rp.prepare(load_series(trace), capacity, startup_seconds, name=trace)
        span = None
        day_setups = []
        if spans:
            history = setup.series.between(setup.split.start, setup.split.test_start)
            if days:
                cap = rp.rolling_capacity(history, days) if len(days) > 1 else None
                day_setups = [rp.rolling_validation_setup(history, d, startup_seconds, cap) for d in days]
                setup = day_setups[0]
                span = (
                    f"day {days[0]} before the test period: fit on the history before it, replay that day"
                    if len(days) == 1
                    else f"days {days[0]}-{days[-1]} before the test period: each fitted on the history before it, "
                    "replayed at one capacity per replica, added up"
                )
            elif validation:
                setup, span = (
                    rp.validation_setup(history, startup_seconds),
                    "last 8 days of the history: fit on 6, replay 2",
                )
            else:
                setup = rp.long_validation_setup(history, startup_seconds)
                span = "whole history: fit on the first half, replay the second half"
        base = _parse_sets(set_ or [])
        check_policy(setup, base, "--set")
        for st in settings:  # before the model is fitted: a bad value must not cost minutes first
            check_policy(setup, rp.merged(base, st), "--slo-risks/--quantiles/--utilizations")
        if len(day_setups) > 1:
            pairs = zip(days, day_setups, strict=True)
            per_day = {d: rp.tradeoff(s, settings, model, bound=False, base=base) for d, s in pairs}
            doc = rp.combine_days(list(per_day.values()))
            doc["days"] = {str(d): {"points": v["points"], "references": v["references"]} for d, v in per_day.items()}
        else:
            doc = rp.tradeoff(setup, settings, model, bound=bound, base=base)
        doc["validation"] = span is not None
        doc["validation_span"] = span
        doc["trace"] = trace
        doc["defaults"] = {"objective.sloRisk": default_w, "targetUtilization": default_u}
        doc["risk_adaptation"] = risk_adaptation
        json_path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        if plot is not None:
            rp.plot_tradeoff(plot, doc, {})
        oracle = doc["references"]["oracle"]["replica_seconds"]
        table = Table(title=f"{trace}: scaleahead trade-off ({doc['params']['scaleahead_model']})")
        for col in ("setting", "violations", "replica-seconds / oracle", "/ hpa"):
            table.add_column(col, no_wrap=True)
        hpa = doc["references"]["hpa"]["replica_seconds"]
        rows = []
        for p in doc["points"]:
            key, label = rp.setting_label(p["settings"])
            rows.append((f"{key} {label}" if key else label, p))
        rows += [(name, m) for name, m in doc["references"].items()]
        rows += [(f"rate oracle, p {b['p']:g}", b) for b in doc.get("rate_oracle", [])]
        for label, m in rows:
            table.add_row(
                label,
                f"{m['violation_fraction']:.4%}",
                f"{m['replica_seconds'] / oracle:.3f}",
                f"{m['replica_seconds'] / hpa:.3f}",
            )
        out = Console()
        (out if out.is_terminal else Console(width=160)).print(table)

    @app.command("demo")
    def demo(
        trace: Annotated[
            str, typer.Option(help="Trace name or series CSV path (default: the Alibaba trace inside the wheel).")
        ] = "alibaba-cpu-10s-embedded",
        hours: Annotated[float, typer.Option(help="Hours of the test period to replay through the loop.")] = 24.0,
        model: Annotated[
            str | None,
            typer.Option(
                help="Forecaster (default: the settings' model, lstm, if registered, else the best baseline)."
            ),
        ] = None,
        column: Annotated[str | None, typer.Option(help="Value column of a series CSV.")] = None,
    ) -> None:
        """Run scaleahead on a built-in real trace: no cluster, no Prometheus, no config.

        Replays --hours of the trace's test period (default 24) through the real control loop
        (virtual clock, simulated cluster, SQLite in a temporary folder), then compares it with
        the HPA algorithm and the oracle on the same hours.
        """
        from scaleahead.demo import run_demo

        if not math.isfinite(hours) or hours <= 0:
            raise UserError(f"--hours {hours:g} must be positive.", "Use e.g. --hours 24.")
        run_demo(trace, hours, model, column)
