"""``scaleahead rollout ...``: canary, A/B and shadow rollouts of a challenger model or policy.

State lives in storage (the ``rollouts`` table), so a rollout survives restarts; the decision
logic is ``actuator.rollouts`` (pure). ``rollout evaluate`` feeds measured per-workload outcomes
(a CSV) to the running rollout: a canary advances, promotes or rolls back; A/B and shadow report
differences with confidence intervals.
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from scaleahead.commands import DbOpt, OutputOpt, check_fits, check_output, share_steps
from scaleahead.errors import DataError, UserError

console = Console(highlight=False)

GroupOption = Annotated[str, typer.Option(help="Rollout group (policies' spec.rolloutGroup).")]


#: The canary's rollback margins (option, lowest, highest, what it is): finite, in these ranges.
MARGINS = (
    ("--max-violation-increase", 0.0, 1.0, "an added share of violating steps"),
    ("--max-cost-increase", 0.0, 1.0, "a relative increase (0.05 = 5 %)"),
    ("--max-error-increase", 0.0, 1.0, "a relative increase (0.05 = 5 %)"),
)


def _book(db: str | None, create: bool = False) -> Any:
    """The rollouts of ``db``; only ``rollout start`` creates a database that does not exist."""
    from actuator.rollouts import RolloutBook
    from storage import Store

    return RolloutBook(Store(db, create=create))


def check_margins(*values: float) -> None:
    """A ``UserError`` unless every rollback margin is a finite number in its range (``MARGINS``):
    a NaN margin never triggers a rollback, and a negative one rolls back a challenger that is better."""
    for (option, low, high, what), value in zip(MARGINS, values, strict=True):
        if not (math.isfinite(value) and low <= value <= high):
            raise UserError(
                f"{option} {value:g} is not {what} between {low:g} and {high:g}.",
                f"Give a number from {low:g} to {high:g} (see scaleahead rollout start --help); nothing was started.",
            )


def _version_by_name(models: Sequence[Any], option: str, name: str) -> str:
    """``name`` itself, or the id of the one model version named ``name`` (a note on stderr says
    so); a ``UserError`` when several versions have that name."""
    if name.isdigit():
        return name
    same = [m for m in models if m.name == name]
    if not same:
        return name
    if len(same) > 1:
        ids = ", ".join(str(m.id) for m in same)
        raise UserError(
            f"{option} {name!r} is the name of {len(same)} model versions ({ids}).",
            f"Give the one you mean by its id ({option} {same[-1].id}; scaleahead models list). Nothing was started.",
        )
    typer.echo(f"note: {option} {name!r} is model version {same[0].id}", err=True)
    return str(same[0].id)


def loadable_challenger(store: Any, challenger: str, refused: str, fix: str) -> str:
    """Refuse (``UserError``: ``refused``, why, then ``fix``) a challenger that is a learned model
    version (lstm, lstm_clock) whose checkpoint the daemon could not load: the same check as
    `scaleahead models promote` (``_promotable_checkpoint``: a checkpoint, intact, that loads).
    Returns its note (a damaged or missing file beside an intact stored copy), else ""."""
    from forecaster.registry import LEARNED

    if not challenger.isdigit():
        return ""  # a policy variant: no checkpoint
    try:
        m = store.model(int(challenger))
    except UserError:
        return ""  # not in the registry (any more): the promotion says so
    if m.family not in LEARNED:
        return ""  # a baseline is fitted on the loop's history: nothing to load
    from scaleahead.commands.forecasting import _promotable_checkpoint

    try:
        return _promotable_checkpoint(store, m)
    except UserError as exc:
        raise UserError(f"{refused}: {exc.what}", fix) from exc


def promotion_check(store: Any, evaluating: bool = False, note: Callable[[str], None] | None = None) -> Any:
    """``RolloutBook.promote`` / ``evaluate``'s ``check``: a learned challenger is promoted only
    when its checkpoint loads (``loadable_challenger``); a note is printed on stderr (or given to
    ``note``: the daemon logs it)."""

    def check(r: Any) -> None:
        why = "the canary held up at its last step, but " if evaluating else ""
        text = loadable_challenger(
            store,
            r.challenger,
            f"Rollout {r.id} (group {r.group}) is not promoted: {why}its challenger cannot be the champion",
            f"Abort it (scaleahead rollout abort --group {r.group}) and roll out a version whose checkpoint "
            "loads (scaleahead models list); nothing was recorded"
            + (" (nor this evaluation)" if evaluating else "")
            + ": the rollout is still running as it was.",
        )
        if text and note is not None:
            note(text)
        elif text:  # on stderr: --output json stays JSON
            typer.echo(f"note: {text}", err=True)

    return check


def json_text(doc: Any) -> str:
    """``doc`` as indented JSON; NaN and infinities (not JSON) become null (``json_safe``, as the
    database's JSON columns store them)."""
    from storage.store import json_safe

    return json.dumps(json_safe(doc), indent=2, default=str, allow_nan=False)


def _show(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "group": r.group,
        "mode": r.mode,
        "state": r.state,
        "champion": r.champion,
        "challenger": r.challenger,
        "share": r.share,
        "started_at": r.started_at,
        "updated_at": r.updated_at,
        "params": r.params,
        "last": r.results.get("last"),
    }


def _print(r: Any, as_json: bool) -> None:
    doc = _show(r)
    if as_json:
        print(json_text(doc))
        return
    console.print(
        f"rollout {r.id} [{r.state}] group {r.group}: {r.mode}, champion {r.champion} vs challenger "
        f"{r.challenger}, challenger share {r.share:.0%}",
        markup=False,
    )
    last = doc["last"]
    if last:
        if "decision" in last:
            console.print(f"last decision: {last['decision']}: {last['reason']}", markup=False)
        for d in last.get("differences", []):
            console.print(
                f"  {d['metric']}: challenger - champion = {d['difference']:+.4g} "
                f"[{d['low']:+.4g}, {d['high']:+.4g}] (95% CI){' significant' if d['significant'] else ''}",
                markup=False,
            )


#: The outcomes CSV's optional baseline columns: the workload's outcome under the champion in a
#: window before the rollout; a canary then compares each workload's change from it.
BASELINES = ("baseline_violation_fraction", "baseline_cost_per_demand", "baseline_forecast_error")


def read_outcomes(path: Path) -> list[dict[str, Any]]:
    """Rows of ``workload,arm,violation_fraction,cost_per_demand[,forecast_error]`` and the optional
    ``baseline_<metric>`` columns, each with its ``line`` in the file (for messages)."""
    need = {"workload", "violation_fraction", "cost_per_demand"}
    header = "workload,arm,violation_fraction,cost_per_demand[,forecast_error]"
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            fields = reader.fieldnames or []
            rows = list(reader)
    except OSError as exc:
        raise DataError(f"Cannot read outcomes file {path}: {exc.strerror}.", "Check the path.") from exc
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path} is not a text CSV file: it is not UTF-8 (a binary file, or another encoding?).",
            f"Give a UTF-8 CSV of {header}; nothing was recorded.",
        ) from exc
    except csv.Error as exc:
        raise DataError(f"{path} is not a CSV file ({exc}).", f"Give a CSV of {header}; nothing was recorded.") from exc
    if not need <= set(fields):
        raise DataError(
            f"{path} needs a header with {', '.join(sorted(need))} (and optionally arm, forecast_error, "
            f"{', '.join(BASELINES)})"
            + (f"; its first line has {', '.join(fields)}." if fields else "; the file is empty."),
            "See docs/actuator.md, 'Rollouts'.",
        )
    if not rows:
        raise DataError(
            f"{path} has its header but no rows: there are no outcomes to evaluate.",
            "Add one row per workload and arm measured; nothing was recorded.",
        )
    out = []
    for i, row in enumerate(rows, start=2):
        # csv puts the cells beyond the header under None; empty ones (a trailing comma, as
        # spreadsheets export) say nothing
        extra = [c for c in row.get(None) or [] if c and c.strip()]
        if extra:
            raise DataError(
                f"{path}:{i}: the row has more cells than the header ({len(fields) + len(row[None])} cells; "
                f"the header has {len(fields)}): {','.join(extra)} would be ignored.",
                f"Give every row {header} (a comma in a value?); nothing was recorded.",
            )
        try:
            # an empty cell: not measured (`rollout outcomes` writes one where the window had no scored
            # step, no demand, or, for a shadow challenger, only its forecasts)
            if row["violation_fraction"] is None or row["cost_per_demand"] is None:
                raise TypeError("a short row")  # csv gives None for the cells a row lacks
            vc, cc = row["violation_fraction"].strip(), row["cost_per_demand"].strip()
            v = float(vc) if vc else math.nan
            c = float(cc) if cc else math.nan
            err = (row.get("forecast_error") or "").strip()  # an empty cell: not measured
            e = float(err) if err else math.nan
            # optional: the workload's outcome under the champion before the rollout (empty: none)
            base = {b: (row.get(b) or "").strip() for b in BASELINES}
            bv = {b: float(x) if x else math.nan for b, x in base.items()}
        except ValueError as exc:
            raise DataError(f"{path}:{i}: {exc}.", "Numbers must be plain decimals.") from exc
        except TypeError as exc:  # a short row: csv gives None for its missing cells
            raise DataError(
                f"{path}:{i}: the row has fewer cells than the header.", f"Give every row {header}."
            ) from exc
        # A rollout promotes or rolls back on these: a value no measurement can give is refused.
        wrong = (
            f"violation_fraction {v:g} is not a share between 0 and 1" if vc and not 0.0 <= v <= 1.0 else
            f"cost_per_demand {c:g} is not a finite number >= 0" if cc and not (math.isfinite(c) and c >= 0) else
            f"forecast_error {err} is not a finite number >= 0" if err and not (math.isfinite(e) and e >= 0) else
            next((
                f"{b} {x} is not a share between 0 and 1" if b == "baseline_violation_fraction"
                else f"{b} {x} is not a finite number >= 0"
                for b, x in base.items()
                if x and not (
                    math.isfinite(bv[b]) and bv[b] >= 0 and (b != "baseline_violation_fraction" or bv[b] <= 1)
                )
            ), "")
        )  # fmt: skip
        if wrong:
            # (only a forecast error may be left out: it said so for every column)
            unknown = "; leave forecast_error empty if unknown" if wrong.startswith("forecast_error") else ""
            raise DataError(f"{path}:{i}: {wrong}.", f"Fix the measurement{unknown}.")
        # Trimmed, as the arm: "web0 " is web0 (else it would be another workload, listed once per arm).
        workload = row["workload"].strip()
        if not workload:
            raise DataError(
                f"{path}:{i}: the workload cell is empty.",
                "Give the workload each row measures (Kind/namespace/name); nothing was recorded.",
            )
        out.append(
            {
                "line": i,
                "workload": workload,
                "arm": (row.get("arm") or "").strip(),
                "violation_fraction": v,
                "cost_per_demand": c,
                "forecast_error": e,
                **bv,
            }
        )
    return out


METRIC_COLUMNS = ("violation_fraction", "cost_per_demand", "forecast_error")

#: `evaluate --measured` waits this long after a window's last bucket ends (s): the daemon's first
#: cycle after it writes it.
WRITE_MARGIN_S = 60.0


def _cell(v: float, missing: str = "-") -> str:
    return f"{v:.6g}" if math.isfinite(v) else missing


def _outcome_doc(arm: str, o: Any) -> dict[str, Any]:
    return {"workload": o.workload, "arm": arm, **{m: getattr(o, m) for m in (*METRIC_COLUMNS, *BASELINES)}}


def _measured(db: str | None, group: str, baseline_s: float | None = None) -> tuple[Any, Any, Any]:
    """GROUP's running rollout and its measured outcomes (``scaleahead.outcomes.measured_outcomes``)."""
    from scaleahead.outcomes import measured_outcomes

    if baseline_s is not None and not (math.isfinite(baseline_s) and baseline_s > 0):
        raise UserError(f"--baseline-s {baseline_s:g} is not a positive number of seconds.", "Use e.g. 3600.")
    book = _book(db)
    r = book.running(group)
    if r is None:
        raise UserError(f"No running rollout in group {group!r}.", "Start one with `scaleahead rollout start`.")
    arms, measured = measured_outcomes(book.store, r, time.time(), baseline_s)
    return r, arms, measured


def _print_window(r: Any, measured: Any, arms: Any) -> None:
    from actuator.rollouts import iso_utc as iso
    from scaleahead.outcomes import BUCKET_S

    n = {a: len(arms.get(a, [])) for a in ("champion", "challenger")}
    window = (
        f"{iso(measured.start)} - {iso(measured.end)}"
        if measured.end > measured.start  # (an empty window read as a start after its end)
        else f"none yet (the first whole 5-minute bucket ends at {iso(measured.start + BUCKET_S)})"
    )
    console.print(
        f"rollout {r.id} ({r.mode}, group {r.group}): outcomes measured {window}, "
        f"{n['champion']} champion and {n['challenger']} challenger workload(s) measured (of "
        f"{measured.assigned.get('champion', 0)} and {measured.assigned.get('challenger', 0)}); baselines: "
        + (
            f"the same hours of an earlier day ({iso(measured.day_before_start)} - {iso(measured.day_before_end)})"
            if measured.baseline == "day_before"
            else f"the window before the start ({iso(measured.baseline_start)} - {iso(measured.baseline_end)})"
        )
        + f", {measured.baselines} workload(s) with one; steps without the arm's own forecast: "
        + ", ".join(f"{a} {v:.1%}" for a, v in measured.fallback_share.items() if math.isfinite(v)),
        markup=False,
    )
    if measured.under_measured:
        console.print(
            f"note: {len(measured.under_measured)} workload(s) measured for less than 80 % of the window (the loop, "
            "Prometheus or the database down, a workload backing off): left out",
            markup=False,
        )
    if measured.other_arm:
        console.print(
            f"note: {len(measured.other_arm)} workload(s) have rows of another arm than the current share assigns "
            "(recorded before the loop followed the new share): those rows are left out",
            markup=False,
        )


def _print_entry(entry: dict[str, Any]) -> None:
    """An A/B or shadow evaluation's note and differences (a canary's decision is in ``_print``)."""
    if entry.get("note"):
        console.print(f"note: {entry['note']}", markup=False)
    if entry.get("differences"):
        table = Table(title="challenger - champion")
        for col in ("metric", "champion", "challenger", "difference", "95% CI"):
            table.add_column(col)
        for d in entry["differences"]:
            table.add_row(
                d["metric"],
                f"{d['champion']:.4g}",
                f"{d['challenger']:.4g}",
                f"{d['difference']:+.4g}",
                f"[{d['low']:+.4g}, {d['high']:+.4g}]",
            )
        console.print(table)


def _evaluate_measured(db: str | None, group: str, output: str) -> None:
    """``rollout evaluate --measured``: the recorded outcomes of GROUP's running rollout, decided on."""
    from actuator.rollouts import CanaryParams, TooLargeToCompare
    from actuator.rollouts import iso_utc as iso
    from scaleahead.outcomes import decide_on_measured, window_start

    r, arms, measured = _measured(db, group)
    params = CanaryParams.from_stored(r.params)
    now = time.time()
    if r.mode == "canary":
        since = window_start(r)
        if since + params.window_s <= now < measured.end + WRITE_MARGIN_S:
            raise UserError(
                f"Rollout {r.id}'s window ({params.window_s:.0f} s since {iso(since)}) has passed, but its last "
                "5-minute bucket of outcomes may not be written yet (the first control cycle after it ends writes it).",
                f"Run it again after {iso(measured.end + WRITE_MARGIN_S)}; nothing was recorded.",
            )
    if not any(arms.values()) and not any(measured.assigned.values()) and not r.challenger.isdigit():
        # (it blamed the daemon, which was running: docs audit)
        raise UserError(
            f"Rollout {r.id} (group {group}) has no measured outcomes: its challenger {r.challenger!r} is a policy "
            "label, not a model version, and the daemon plans only with model versions, so it measures no arm of it.",
            "Evaluate a policy variant with --outcomes FILE.csv (outcomes you measured); to roll out a model, give "
            "its version id or name (scaleahead models list). Nothing was recorded.",
        )
    if not any(arms.values()) and not any(measured.assigned.values()):
        span = _book(db).store.outcome_span(r.id)
        if span is not None:
            # rows of it there are, outside its window: a run on another clock (an operator audit:
            # a `run --virtual` records the trace's time, and this said the daemon was not running)
            raise UserError(
                f"Rollout {r.id} (group {group}) has no measured outcomes in its window (since "
                f"{iso(window_start(r))}, on the wall clock), but {span[0]} outcome row(s) of it are recorded, "
                f"for buckets from {iso(span[1])} to {iso(span[2])}: written by a run on another clock "
                "(`scaleahead run --virtual` records the trace's time).",
                "A virtual run evaluates its canaries itself (SCALEAHEAD_JOBS__EVALUATE_CANARIES=true, "
                "docs/actuator.md, Measured outcomes); `scaleahead rollout outcomes` shows the rows. Nothing was "
                "recorded.",
            )
        raise UserError(
            f"Rollout {r.id} (group {group}) has no measured outcomes yet "
            "(since the share was set, in whole 5-minute buckets).",
            "Is `scaleahead run` (the leader) running with this database and jobs.record_outcomes true? Wait for a "
            "bucket to end; nothing was recorded.",
        )
    book = _book(db)
    try:
        entry = decide_on_measured(book, r, arms, measured, now, promotion_check(book.store, evaluating=True))
    except TooLargeToCompare as exc:
        raise DataError(
            f"The measured outcomes of rollout {r.id} are too large to compare for {', '.join(exc.metrics)}.",
            "See `scaleahead rollout outcomes`; nothing was recorded.",
        ) from exc
    if output == "json":
        print(json_text({**entry, "measured": measured.__dict__}))
        return
    _print_window(r, measured, arms)
    _print(book.get(group, r.id), False)
    _print_entry(entry)


def too_large(path: Path, rows: list[dict[str, Any]], metrics: list[str]) -> DataError:
    """The error of a comparison of ``metrics`` that is not finite, naming each column's largest
    values and their lines."""
    parts = []
    for m in metrics:
        values = sorted(((row[m], row["line"]) for row in rows if math.isfinite(row[m])), reverse=True)
        top = sorted(line for value, line in values if value == values[0][0]) if values else []
        if values:
            lines = ", ".join(map(str, top[:5])) + (f" and {len(top) - 5} more" if len(top) > 5 else "")
            parts.append(f"{m} (largest {values[0][0]:g}, on line{'s' if len(top) > 1 else ''} {lines})")
        else:
            parts.append(m)
    return DataError(
        f"{path}: the outcomes are too large to compare: the difference of the arms' means or its 95% "
        f"confidence interval is beyond the largest float (1.8e308) for {'; '.join(parts)}.",
        "Check those measurements (a unit mix-up?); nothing was recorded.",
    )


def check_arms(path: Path, rows: list[dict[str, Any]], mode: str) -> None:
    """A ``DataError`` (nothing recorded) when a workload is listed twice in one arm (its outcome
    would count twice: an arm of one workload would pass "two per arm" with a zero-width,
    "significant" interval), or, outside shadow mode (where every workload has an outcome in both
    arms), in both arms (a workload runs in one arm only). ``rows`` carry their resolved ``arm``."""
    lines: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        lines.setdefault((row["workload"], row["arm"]), []).append(row["line"])
    twice = [(wl, arm, at) for (wl, arm), at in lines.items() if len(at) > 1]
    if twice:
        listed = "; ".join(f"{wl} in the {arm} arm on lines {', '.join(map(str, at))}" for wl, arm, at in twice[:5])
        raise DataError(
            f"{path}: a workload is listed more than once in one arm: {listed}.",
            "Give one outcome per workload and arm (merge the windows before); nothing was recorded.",
        )
    if mode == "shadow":
        return
    both = sorted(
        (wl, lines[(wl, "champion")][0], lines[(wl, "challenger")][0])
        for wl, arm in lines
        if arm == "champion" and (wl, "challenger") in lines
    )
    if both:
        listed = "; ".join(f"{wl} (lines {a} and {b})" for wl, a, b in both[:5])
        raise DataError(
            f"{path}: a workload is listed in both arms, but in {'a canary' if mode == 'canary' else 'an A/B'} "
            f"rollout it runs in one: {listed}.",
            "Keep the row of the arm it ran in (or leave the arm column empty to use the assignment); "
            "nothing was recorded.",
        )


def contradicting_arms(rows: list[dict[str, Any]], rollout: Any, book: Any) -> list[tuple[dict[str, Any], str]]:
    """Rows whose ``arm`` column names another arm than the rollout's assignment gives the workload
    (canary and A/B; a shadow rollout has both arms for every workload), with the assigned arm.
    They are warned about, not refused: the column is how outcomes of arms measured elsewhere
    (another labelling, a policy variant) are given."""
    if rollout.mode == "shadow":
        return []
    assigned = [(row, book.arm(rollout, row["workload"])) for row in rows]
    return [(row, arm) for row, arm in assigned if row["arm"] != arm]


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    rollout_app = typer.Typer(
        help="Canary, A/B and shadow rollouts of a challenger model or policy (docs/actuator.md).",
        no_args_is_help=True,
    )
    app.add_typer(rollout_app, name="rollout")

    @rollout_app.command("start")
    def start(
        challenger: Annotated[
            str,
            typer.Option(
                help="Challenger: a model version's id, or its name when one version has it (scaleahead models "
                "list); any other name labels a policy variant."
            ),
        ],
        mode: Annotated[str, typer.Option(help="canary (growing share), ab (fixed split) or shadow (plan only).")],
        group: GroupOption = "default",
        champion: Annotated[
            str | None,
            typer.Option(
                help="Current model/policy the challenger is measured against (default: the registry's champion of "
                "the challenger's family, else the one champion; with several families' champions and none of its "
                "own, required). Retired at the promotion when it is of the challenger's family."
            ),
        ] = None,
        split: Annotated[float, typer.Option(help="Challenger share in mode ab.")] = 0.5,
        steps: Annotated[str, typer.Option(help="Canary share steps, comma-separated.")] = "0.1,0.25,0.5,1.0",
        max_violation_increase: Annotated[
            float, typer.Option(help="Canary: margin, the added share of violating steps still no worse (0 to 1).")
        ] = 0.02,
        max_cost_increase: Annotated[
            float,
            typer.Option(
                help="Canary: most relative extra cost per unit of demand before rollback (0 to 1; 0.05 = 5 %)."
            ),
        ] = 0.05,
        max_error_increase: Annotated[
            float, typer.Option(help="Canary: most relative extra forecast error before rollback (0 to 1; 0.05 = 5 %).")
        ] = 0.05,
        db: DbOpt = None,
        output: OutputOpt = "table",
    ) -> None:
        """Start a rollout of CHALLENGER against the champion in GROUP."""
        from actuator.rollouts import CanaryParams

        shares = share_steps("--steps", steps, "0.1,0.25,0.5,1.0")
        if mode not in ("canary", "ab", "shadow"):
            raise UserError(f"--mode {mode!r} is unknown.", "Use canary, ab or shadow.")
        if not (math.isfinite(split) and 0.0 < split < 1.0):
            raise UserError(f"--split {split:g} is not a share strictly between 0 and 1.", "Use e.g. --split 0.5.")
        check_margins(max_violation_increase, max_cost_increase, max_error_increase)
        # Checked before the database is opened (or created): on PostgreSQL a longer value fails the write.
        hint = "Use a shorter one; nothing was started."
        if not group.strip():  # as a policy's spec.rolloutGroup: no policy could be in it
            raise UserError("--group is empty.", "Give the policies' spec.rolloutGroup (default: default).")
        check_fits("--group", group, "RolloutRow", "group", hint)
        check_fits("--challenger", challenger, "RolloutRow", "challenger", hint)
        if champion is not None:
            check_fits("--champion", champion, "RolloutRow", "champion", hint)
        named = [("--challenger", challenger)] + ([("--champion", champion)] if champion is not None else [])
        for option, name in named:
            if re.fullmatch(r"\s*[+-]\s*\d+\s*", name):
                raise UserError(
                    f"{option} {name} is not a model version id (ids are positive whole numbers).",
                    "See `scaleahead models list`; a policy challenger is given by its name. Nothing was started.",
                )
        numbered = [(option, name) for option, name in named if name.isdigit()]
        try:
            # A numbered version is looked up in the registry: a database that does not exist has
            # none, and is not created just to say so.
            book = _book(db, create=not numbered)
        except UserError as exc:
            if not numbered or not exc.what.startswith("No scaleahead database"):
                raise
            option, name = numbered[0]
            raise UserError(
                f"{option} {name}: there is no model version {name} in the registry: {exc.what}",
                "Check --db (or register models first: `scaleahead retrain`); nothing was created.",
            ) from exc
        models = book.store.models()
        # A version's name (`models list`'s name column) names that version, as its id does; until
        # 2026-12-06 it was taken as a policy label, and its rollout promoted nothing (docs audit).
        challenger = _version_by_name(models, "--challenger", challenger)
        if champion is not None:
            champion = _version_by_name(models, "--champion", champion)
        by_id = {str(m.id): m for m in models}
        if challenger in by_id and by_id[challenger].status in ("champion", "production"):
            # its promotion would only retire the other arm (an operator audit: a champion of one
            # family "rolled out" against another's retired the model production ran)
            raise UserError(
                f"--challenger {challenger} is already a {by_id[challenger].status} (of {by_id[challenger].family}).",
                "Roll out a candidate version (scaleahead models list); to go back to an older version, "
                "`scaleahead models promote ID`. Nothing was started.",
            )
        if champion is None:
            # the champion of the challenger's family: until 2026-12-07 the newest champion of any
            # family, so an lstm challenger's promotion could retire a baseline's champion, or a
            # baseline challenger's the LSTM that production ran (operator audit)
            prod = [m for m in models if m.status in ("champion", "production")]
            family = by_id[challenger].family if challenger in by_id else None
            own = [m for m in prod if m.family == family]
            if own:
                champion = f"{own[-1].id}"
            elif len({m.family for m in prod}) > 1:
                raise UserError(
                    f"--champion is needed: the challenger's family ({family or 'a policy label'}) has no champion "
                    f"and several families do ({', '.join(f'{m.id} ({m.family})' for m in prod)}), so which one the "
                    "challenger is measured against is not clear.",
                    "Name the version production runs with --champion ID (scaleahead models list); nothing was "
                    "started.",
                )
            else:
                champion = f"{prod[-1].id}" if prod else "default"
        # A number names a model version: one the registry does not have is a typo, and promoting
        # it would record a champion that does not exist. Other names label policies (free-form).
        known = {str(m.id) for m in models}
        for option, name in (("--challenger", challenger), ("--champion", champion)):
            if name.isdigit() and name not in known:
                raise UserError(
                    f"{option} {name}: there is no model version {name} in the registry.",
                    "See `scaleahead models list`; a policy challenger is given by its name.",
                )
        # A learned version whose checkpoint does not load could never be promoted (nor planned with).
        note = loadable_challenger(
            book.store,
            challenger,
            f"--challenger {challenger} cannot be rolled out",
            "Roll out a version whose checkpoint loads (scaleahead models list, scaleahead models show ID); "
            "nothing was started.",
        )
        if note:  # on stderr: --output json stays JSON
            typer.echo(f"note: {note}", err=True)
        if not challenger.isdigit():
            typer.echo(
                f"note: --challenger {challenger!r} is no model version, so it labels a policy variant: the daemon "
                "does not plan with it; evaluate it with --outcomes FILE.csv (scaleahead models list has the versions)",
                err=True,
            )
        groups = {r.group for r in book.store.rollouts()}
        if groups and group not in groups:
            # a typo makes a group no policy is in: its rollout plans nothing, yet its promotion
            # changes the champion of every workload (an operator audit)
            typer.echo(
                f"note: group {group!r} has had no rollout before (groups with rollouts: "
                f"{', '.join(sorted(groups)[:20])}): check it is a policy's spec.rolloutGroup; a rollout whose "
                "group no policy is in measures nothing, and its promotion still changes the champion",
                err=True,
            )
        params = CanaryParams(shares, max_violation_increase, max_cost_increase, max_error_increase)
        rid = book.start(group, mode, champion, challenger, time.time(), canary=params, split=split)  # type: ignore[arg-type]
        _print(book.get(group, rid), output == "json")

    @rollout_app.command("status")
    def status(
        group: GroupOption = "default",
        db: DbOpt = None,
        output: OutputOpt = "table",
    ) -> None:
        """Show the newest rollout of GROUP: mode, state, share and the last comparison."""
        _print(_book(db).get(group), output == "json")

    @rollout_app.command("promote")
    def promote(group: GroupOption = "default", db: DbOpt = None) -> None:
        """Make the challenger of GROUP's running rollout the champion for every workload."""
        book = _book(db)
        _print(book.promote(group, time.time(), check=promotion_check(book.store)), False)

    @rollout_app.command("abort")
    def abort(group: GroupOption = "default", db: DbOpt = None) -> None:
        """Stop GROUP's running rollout; every workload goes back to the champion."""
        _print(_book(db).abort(group, time.time()), False)

    @bench_app.command("rollout")
    def bench_rollout(
        json_path: Annotated[Path, typer.Option("--json", help="Write the rollout results (JSON) here.")],
        traces: Annotated[
            str | None, typer.Option(help="Comma-separated traces, one workload each (default: 15 NAB traces).")
        ] = None,
        champion: Annotated[str, typer.Option(help="Champion forecaster.")] = "seasonal_naive",
        challenger: Annotated[str, typer.Option(help="Challenger forecaster.")] = "window_mean",
        steps: Annotated[str, typer.Option(help="Canary share steps, comma-separated.")] = "0.25,0.5,1.0",
        split: Annotated[float, typer.Option(help="A/B challenger share.")] = 0.5,
        aa: Annotated[
            bool,
            typer.Option(
                "--aa",
                help="A/A check: allow --challenger equal to --champion and print how often the canary and A/B "
                "decide anything over 200 assignments.",
            ),
        ] = False,
    ) -> None:
        """A rollout end to end on the simulated cluster: canary, A/B and shadow of two forecasters."""
        from actuator.rollouts import CanaryParams
        from scaleahead.bench.rollout import DEFAULT_TRACES, run_rollout_bench

        check_output(json_path, "--json")
        names = [t.strip() for t in traces.split(",") if t.strip()] if traces else list(DEFAULT_TRACES)
        shares = share_steps("--steps", steps)
        if not (math.isfinite(split) and 0.0 < split < 1.0):
            raise UserError(f"--split {split:g} is not a share strictly between 0 and 1.", "Use e.g. --split 0.5.")
        doc = run_rollout_bench(names, champion, challenger, CanaryParams(steps=shares), split=split, aa=aa)
        json_path.write_text(json.dumps(doc, indent=2, default=str))
        if "aa" in doc:
            a = doc["aa"]
            console.print(
                f"A/A check ({champion} against itself, {a['assignments']} assignments of {len(doc['per_workload'])} "
                f"workloads): canary rolled back {a['canary_rolled_back']:.1%} (shown worse "
                f"{a['canary_shown_worse']:.1%}, not shown no worse {a['canary_not_shown_no_worse']:.1%}), "
                f"promoted {a['canary_promoted']:.1%}; A/B 'significant' for some metric {a['ab_significant']:.1%}",
                markup=False,
            )
        c = doc["canary"]
        console.print(f"canary {challenger} vs {champion}: {c['state']} at share {c['final_share']:.0%}", markup=False)
        for h in c["history"]:
            console.print(
                f"  window {h['window']}: share {h['share']:.0%} ({h['challenger_workloads']} of "
                f"{h['champion_workloads'] + h['challenger_workloads']} workloads): {h['decision']}: {h['reason']}",
                markup=False,
            )
        for mode in ("ab", "shadow"):
            for d in doc[mode]["differences"]:
                console.print(
                    f"{mode} {d['metric']}: challenger - champion = {d['difference']:+.4g} "
                    f"[{d['low']:+.4g}, {d['high']:+.4g}] (95% CI, n={d['n_champion']}/{d['n_challenger']})",
                    markup=False,
                )

    @rollout_app.command("outcomes")
    def outcomes_cmd(
        group: GroupOption = "default",
        db: DbOpt = None,
        output: Annotated[
            str, typer.Option(help="csv (what `evaluate --outcomes` reads, with baselines), table or json.")
        ] = "csv",
        baseline_s: Annotated[
            float | None,
            typer.Option(
                "--baseline-s",
                help="Length of the baseline window before the rollout started (s); default the canary window "
                "(3600 s).",
            ),
        ] = None,
    ) -> None:
        """Each workload's outcome in GROUP's running rollout as the daemon measured it (docs/actuator.md)."""
        r, arms, measured = _measured(db, group, baseline_s)
        rows = [(arm, o) for arm in ("champion", "challenger") for o in arms.get(arm, [])]
        if output == "json":
            print(
                json_text(
                    {"rollout": r.id, "window": measured.__dict__, "outcomes": [_outcome_doc(a, o) for a, o in rows]}
                )
            )
            return
        if output == "table":
            _print_window(r, measured, arms)
            table = Table()
            for col in ("workload", "arm", "violation_fraction", "cost_per_demand", "forecast_error", "baselines"):
                table.add_column(col)
            for arm, o in rows:
                base = ", ".join(_cell(getattr(o, b)) for b in BASELINES)
                table.add_row(
                    o.workload,
                    arm,
                    _cell(o.violation_fraction),
                    _cell(o.cost_per_demand),
                    _cell(o.forecast_error),
                    base,
                )
            console.print(table)
            return
        if output != "csv":
            raise UserError(f"--output {output!r} is not csv, table or json.", "Use one of them.")
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["workload", "arm", "violation_fraction", "cost_per_demand", "forecast_error", *BASELINES])
        for arm, o in rows:
            w.writerow(
                [
                    o.workload,
                    arm,
                    *(_cell(getattr(o, m), "") for m in METRIC_COLUMNS),
                    *(_cell(getattr(o, b), "") for b in BASELINES),
                ]
            )

    @rollout_app.command("evaluate")
    def evaluate(
        outcomes: Annotated[
            Path | None,
            typer.Option(help="CSV: workload,arm,violation_fraction,cost_per_demand[,forecast_error]."),
        ] = None,
        measured: Annotated[
            bool,
            typer.Option(
                "--measured",
                help="Compare the outcomes the daemon measured and recorded (`scaleahead rollout outcomes`), with "
                "baselines, instead of a CSV.",
            ),
        ] = False,
        group: GroupOption = "default",
        db: DbOpt = None,
        output: OutputOpt = "table",
    ) -> None:
        """Compare measured outcomes of the two arms; a canary advances, promotes or rolls back."""
        from actuator.rollouts import Outcome, TooLargeToCompare

        if (outcomes is None) == (not measured):
            raise UserError(
                "Give either --outcomes FILE.csv or --measured (not both, not neither).",
                "--measured compares what the daemon recorded (scaleahead rollout outcomes); --outcomes a CSV of "
                "your own.",
            )
        if outcomes is None:
            _evaluate_measured(db, group, output)
            return
        rows = read_outcomes(outcomes)
        book = _book(db)
        r = book.running(group)
        if r is None:
            raise UserError(f"No running rollout in group {group!r}.", "Start one with `scaleahead rollout start`.")
        arms: dict[str, list[Outcome]] = {"champion": [], "challenger": []}
        for row in rows:
            arm = row["arm"] or book.arm(r, row["workload"])
            if arm not in arms:
                raise DataError(f"{outcomes}: arm {arm!r} is neither champion nor challenger.", "Fix the arm column.")
            row["arm"] = arm
            arms[arm].append(
                Outcome(
                    row["workload"],
                    row["violation_fraction"],
                    row["cost_per_demand"],
                    row["forecast_error"],
                    *(row[b] for b in BASELINES),
                )
            )
        check_arms(outcomes, rows, r.mode)
        contradicting = contradicting_arms(rows, r, book)
        if contradicting:
            listed = ", ".join(f"{row['workload']} (line {row['line']}: {row['arm']})" for row, _ in contradicting[:5])
            more = f" and {len(contradicting) - 5} more" if len(contradicting) > 5 else ""
            typer.echo(
                f"warning: {outcomes}: {len(contradicting)} row(s) name another arm than the rollout assigns the "
                f"workload to: {listed}{more}; they are compared in the arm the file names (leave the arm column "
                "empty to use the assignment)",
                err=True,
            )
        try:
            entry = book.evaluate(r, arms, time.time(), check_promotion=promotion_check(book.store, evaluating=True))  # type: ignore[arg-type]
        except TooLargeToCompare as exc:
            raise too_large(outcomes, rows, exc.metrics) from exc
        if output == "json":
            print(json_text(entry))
            return
        _print(book.get(group, r.id), False)
        _print_entry(entry)
