"""The ``scaleahead`` command line (composition root). Only commands that work are listed.

Errors a person can fix (``UserError``) print one paragraph and exit with code 2.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scaleahead import __version__
from scaleahead.errors import UserError


def _flag_type_rich(self: Any, ctx: Any) -> str | None:
    """An on/off flag takes no value, so ``--help`` shows no type beside it (typer 0.29 showed
    ``<bool>`` beside every flag, ``--once <bool>`` read as if it took one; its plain help does not)."""
    if self.is_flag and self.metavar is None:
        return None
    return cast(str | None, _option_type_rich(self, ctx))  # type: ignore[misc]  # (set only where it exists)


# (only where typer has the method: pyproject allows typer from 0.12, and older releases have no
# such method; an audit saw the import fail, and every command with it, on a typer without it)
_option_type_rich = getattr(typer.core.TyperOption, "display_type_rich", None)
if _option_type_rich is not None:
    typer.core.TyperOption.display_type_rich = _flag_type_rich  # type: ignore[method-assign]

app = typer.Typer(
    name="scaleahead",
    help="Forecast-driven predictive autoscaler and pre-provisioner for Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema management.", no_args_is_help=True)
app.add_typer(db_app, name="db")
bench_app = typer.Typer(
    help="Benchmarks of ../shared/EVALUATION.md: print numbers, write --json.", no_args_is_help=True
)

console = Console()
err_console = Console(stderr=True)


class Output(StrEnum):
    table = "table"
    json = "json"


def parse_time(text: str, option: str = "--at") -> float:
    """ISO-8601 (UTC if no zone) or epoch seconds, between 1900 and 9999; ``option`` names it in errors.

    NaN, infinity and times past year 9999 (an epoch in milliseconds) are a ``UserError`` here,
    before anything is read or written: they used to be stored in a plan and fail when printed.
    """
    from scaleahead.traces import time_problem

    how = "Use ISO-8601 (1995-08-20T14:00:00Z) or epoch seconds, between 1900 and 9999."
    try:
        t = float(text)
    except ValueError:
        try:
            dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise UserError(f"{option} {text!r} is not a time.", how) from exc
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        t = dt.timestamp()
    problem = time_problem(t)
    if problem is not None:
        raise UserError(f"{option} {text!r} {problem}.", how)
    return t


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@app.command()
def version() -> None:
    """Print the version of scaleahead."""
    console.print(f"scaleahead {__version__}")


@db_app.command("upgrade")
def db_upgrade(
    db: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL (default: $SCALEAHEAD_STORAGE__URL as for run, else $SCALEAHEAD_DB_URL, else "
            "SQLite; docs/storage.md)."
        ),
    ] = None,
    revision: Annotated[
        str, typer.Option(help="Target revision: head (the newest), or one of docs/storage.md's revision ids.")
    ] = "head",
) -> None:
    """Migrate the database schema (from empty or from any earlier version)."""
    from storage import Store

    if revision != "head" and revision not in Store.revisions():  # before a database file is made
        raise UserError(
            f"Unknown schema revision {revision!r}.",
            f"Use one of: head, {', '.join(Store.revisions())} (docs/storage.md).",
        )
    store = Store(db, upgrade=False)
    before = store.current_revision()
    store.upgrade(revision)
    after = store.current_revision()
    if before == after:
        console.print(f"database {store._safe_url()}: already at {after}; nothing to do")
    else:
        console.print(f"database {store._safe_url()}: {before or 'empty'} -> {after}")
    order = Store.revisions()
    if revision != "head" and after in order and order.index(after) > order.index(revision):
        console.print(f"note: {after} is newer than {revision}; nothing was changed (upgrade never goes back).")


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[
        str,
        typer.Option(
            help="Target revision, older than the database's: one of docs/storage.md's revision ids (in a "
            "rollback, the head of the version rolled back to)."
        ),
    ],
    db: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL (default: $SCALEAHEAD_STORAGE__URL as for run, else $SCALEAHEAD_DB_URL, else "
            "SQLite; docs/storage.md); never created."
        ),
    ] = None,
) -> None:
    """Migrate the database schema back to an older revision (a rollback: run it with the newer scaleahead, the
    one that migrated the database, before the older one starts)."""
    from storage import Store

    known = Store.revisions()
    if revision not in known:  # before the database is opened
        raise UserError(f"Unknown schema revision {revision!r}.", f"Use one of: {', '.join(known)} (docs/storage.md).")
    store = Store(db, upgrade=False, create=False)
    before, after = store.downgrade(revision)
    if before == after:
        console.print(f"database {store._safe_url()}: already at {after}; nothing to do")
    else:
        console.print(f"database {store._safe_url()}: {before} -> {after}")


@app.command()
def plan(
    policy: Annotated[
        list[Path],
        typer.Option(help="Policy YAML file (examples/policy.yaml); repeat it to plan the policies of several files."),
    ],
    history: Annotated[
        str | None,
        typer.Option(
            help="Trace name (nasa-10s, alibaba-cpu-10s, ...) or series CSV path, at the policy's "
            "demand.stepSeconds (not resampled: another step is an error)."
        ),
    ] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(help="Prometheus base URL, in place of --history: runs each policy's demand.query."),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            help="Decision time (ISO-8601 or epoch s); default: after the last point of --history, "
            "now with --prometheus."
        ),
    ] = None,
    output: Annotated[Output, typer.Option(help="table or json.")] = Output.table,
    db: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL where the plan is recorded (default: SCALEAHEAD_STORAGE__URL, else "
            "SCALEAHEAD_DB_URL, else SQLite; created if missing; docs/storage.md)."
        ),
    ] = None,
    model: Annotated[
        str,
        typer.Option(
            help="Forecaster to plan with, fitted on the 7 days before --at (lstm: trained for the dry run, "
            "minutes; the loop uses the registry's champion)."
        ),
    ] = "seasonal_naive",
    column: Annotated[str | None, typer.Option(help="Value column of a series CSV.")] = None,
    current: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=2**31 - 1,  # what a policy's replica counts and a Deployment's spec.replicas hold (int32)
            help="Current replicas, or a function's warm instances, 0 to 2147483647 (default: what observed "
            "demand needs; a function: 1 if called within its keep-alive).",
        ),
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Apply the plan to the cluster (safety layer + journal, docs/actuator.md).")
    ] = False,
    kubeconfig: Annotated[
        Path | None, typer.Option(help="Kubeconfig for --apply (default: $KUBECONFIG, then ~/.kube/config).")
    ] = None,
    diff_only: Annotated[
        bool, typer.Option("--dry-run", help="With --apply: print the diff of what would change; write nothing.")
    ] = False,
    capacity: Annotated[
        list[str] | None,
        typer.Option(
            help="TENANT=REPLICAS, or *=REPLICAS for all workloads together (repeatable): replicas (and warm "
            "instances) to share under shortage, by priority, then by weight as the policies' "
            "objective.fairness says (docs/planner.md)."
        ),
    ] = None,
) -> None:
    """Dry-run planning: forecast from history, plan, record the plan, print actions with reasons.

    History is a trace (--history) or a Prometheus server (--prometheus, the 2 days before --at).

    Changes nothing anywhere except the plan record in the database, unless --apply is given:
    then the plan goes through the safety layer and the journal to the cluster of --kubeconfig
    (--apply --dry-run prints the diff of what would change and writes nothing to the cluster).
    """
    from scaleahead.planning import check_history_step, dry_run
    from scaleahead.policy import load_policy_files
    from scaleahead.traces import load_series
    from storage import Store

    if (history is None) == (prometheus is None):
        raise UserError("Give exactly one of --history and --prometheus.", "See scaleahead plan --help.")
    if diff_only and not apply:
        raise UserError(
            "--dry-run only goes with --apply: without --apply, plan changes nothing in the cluster anyway.",
            "Add --apply to print the diff the plan would make, or drop --dry-run.",
        )
    if kubeconfig is not None and not apply:  # (both were ignored without a word: docs audit)
        raise UserError(
            "--kubeconfig only goes with --apply: without --apply, plan reads no cluster.",
            "Add --apply to apply the plan to that cluster, or drop --kubeconfig.",
        )
    if column is not None and history is None:
        raise UserError(
            "--column only goes with --history (a series CSV's value column); --prometheus reads each policy's "
            "demand.query.",
            "Drop --column.",
        )
    policies = load_policy_files(policy)  # several files: a workload targeted twice is an error
    shares = parse_capacity(capacity or [])
    tenants = {p.spec.tenant for p in policies}
    unknown_tenants = sorted(t for t in shares if t != "*" and t not in tenants)
    when = parse_time(at) if at is not None else None
    # The loop's interval: the replicas cover a start-up plus one interval, as the loop's would
    from forecaster.registry import available_models
    from scaleahead.settings import Settings

    interval = Settings.from_env(known_models=available_models()).loop.interval_s
    series = load_series(history, column=column) if history is not None else None
    if series is not None:  # before the store is opened: a mismatch creates no database
        check_history_step(policies, series, str(history))
        from scaleahead.planning import check_history, default_at

        check_history(series, default_at(series) if when is None else when)  # --at before the data, ...
    api = None
    if apply:  # the client is made before the store is opened: an unreadable kubeconfig creates no database
        from actuator.autoscalers import refuse_hpa_fights
        from actuator.kubernetes import make_api_client, require_api_server

        api = make_api_client(str(kubeconfig) if kubeconfig else None)
        require_api_server(api)
        refuse_hpa_fights(api, policies)  # before the store is opened and anything is read or written
    if series is None:  # read Prometheus before opening the store: a failed read writes nothing
        from scaleahead.commands.prometheus import dry_run_from_prometheus, make_config

        assert prometheus is not None
        result = dry_run_from_prometheus(make_config(prometheus), policies, when, model, current, interval)
    store = Store(db)  # opened before planning so a bad URL fails before any work
    if series is not None:
        result = dry_run(policies, series, when, model=model, current_replicas=current, interval_s=interval)
    if shares:
        from planner import share_capacity

        result = dataclasses.replace(result, plan=share_capacity(result.plan, policies, shares))
    if unknown_tenants:  # a typo would otherwise share nothing, silently
        note = (
            f"--capacity names tenant(s) {', '.join(unknown_tenants)} that no policy has (the policies' tenants: "
            f"{', '.join(sorted(tenants))}); that capacity was not applied"
        )
        err_console.print(f"[yellow]warning[/] {escape(note)}.", highlight=False, soft_wrap=True)
        result = dataclasses.replace(result, plan=dataclasses.replace(result.plan, notes=(*result.plan.notes, note)))
    if apply:  # the actuator journals the plan itself (planned -> applied/failed/skipped)
        from scaleahead.commands.actuator import apply_once

        apply_once(result.plan, policies, store, kubeconfig, dry_run=diff_only, as_json=output == Output.json, api=api)
        return
    plan_id, _ = store.record_plan(result.plan, source="cli-plan", state="dry-run")
    if output == Output.json:
        print(json.dumps(plan_to_json(result.plan, plan_id, result.model), indent=2))
        return
    table = Table(title=f"plan {plan_id} at {iso(result.at)} (dry run, model {result.model})")
    for col in ("kind", "target", "from", "to", "reason"):
        table.add_column(col, overflow="fold")
    from scaleahead.types import action_endpoints

    for a in result.plan.actions:
        frm, to = action_endpoints(a)
        table.add_row(a.kind, a.target, frm, to, escape(a.reason.message))
    console.print(table)
    for ref, mode in result.plan.fallbacks.items():
        console.print(f"[yellow]fallback[/] {escape(str(ref))}: {escape(mode)}")
    for note in result.plan.notes:
        console.print(f"note: {note}", markup=False, highlight=False)


def parse_capacity(items: list[str]) -> dict[str, int]:
    """``["shop=40", "*=200"]`` (or ``["shop=40,*=200"]``, as ``loop.capacity`` takes it) ->
    ``{"shop": 40, "*": 200}``; anything else (a tenant named twice, a name that is no tenant's) is a
    ``UserError``."""
    from scaleahead.policy import TENANT, TENANT_MAX

    tenant = re.compile(TENANT)
    out: dict[str, int] = {}
    parts: list[str] = []
    for given in items:  # (an option with nothing in it is still refused below)
        parts += [part.strip() for part in given.split(",") if part.strip()] or [given.strip()]
    for item in parts:
        name, sep, count = item.partition("=")
        try:
            value = int(count.strip())
        except ValueError:
            value = -1
        if not sep or not name.strip() or value < 0:
            raise UserError(
                f"--capacity {item!r} is not TENANT=REPLICAS with a whole number of replicas of at least 0.",
                "For example --capacity shop=40 --capacity '*=200' ('*': all services together).",
            )
        if name.strip() != "*" and (len(name.strip()) > TENANT_MAX or not tenant.match(name.strip())):
            raise UserError(
                f"--capacity {item!r} does not name a tenant: a tenant is letters, digits, '-', '_' and '.', "
                f"starting and ending with a letter or digit, at most {TENANT_MAX} characters ('*': all "
                "services together).",
                "For example --capacity shop=40 --capacity '*=200', or --capacity 'shop=40,*=200'.",
            )
        if name.strip() in out:
            raise UserError(
                f"--capacity names tenant {name.strip()!r} twice ({out[name.strip()]} and {value}).",
                "Give each tenant once.",
            )
        out[name.strip()] = value
    return out


def plan_to_json(plan_obj: Any, plan_id: int | None = None, model: str = "") -> dict[str, Any]:
    from scaleahead.types import action_endpoint_values
    from storage.store import json_safe

    actions = []
    for a in plan_obj.actions:
        frm, to = action_endpoint_values(a)
        actions.append(
            {
                "kind": a.kind,
                "target": a.target,
                "from": frm,
                "to": to,
                "noop": a.is_noop,
                "reason": a.reason.message,
                "reason_code": a.reason.code,
                "reason_details": json_safe(dict(a.reason.details)),
            }
        )
    return {
        "plan_id": plan_id,
        "created_at": iso(plan_obj.created_at),
        "model": model,
        "fallbacks": {k.key: v for k, v in plan_obj.fallbacks.items()},
        "notes": list(plan_obj.notes),
        "actions": actions,
    }


def _register_commands() -> None:
    from scaleahead.commands import register_all

    register_all(app, bench_app)
    if bench_app.registered_commands or bench_app.registered_groups:
        app.add_typer(bench_app, name="bench")


_register_commands()


def main() -> None:
    """Entry point: run the app, turning ``UserError`` into one paragraph and exit code 2."""
    try:
        if any(k.startswith("SCALEAHEAD_") for k in os.environ):
            # Every command, also one that needs no setting (--db given, demo, crd): a typo or a
            # wrong value in a SCALEAHEAD_GROUP__FIELD variable is an error, never ignored.
            from forecaster.registry import available_models  # no torch: the LSTMs register lazily
            from scaleahead.settings import Settings

            Settings.from_env(known_models=available_models())
        rc = app(standalone_mode=False)
        sys.stdout.flush()  # now, not at exit: a full disk under `> file` is reported below, not ignored
        if isinstance(rc, int) and rc:
            # Click returns, not raises, an exit code in this mode: Ctrl-C (130) must not end in 0.
            if rc == 130:
                err_console.print("interrupted")
            sys.exit(rc)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except UserError as exc:
        # The message is text, not markup: "[a-z_]*" or "[0, 1]" in it must print as written.
        err_console.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(1)
    except _usage_errors() as exc:  # an unknown option or command, a missing or malformed value
        exc.show()
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in _WRITE_ERRNOS:
            raise
        # The output could not be written (stdout redirected to a full disk, an --output file): one
        # paragraph, never a traceback. A closed pipe (EPIPE) is Click's: exit 1, silently.
        what = f"{exc.filename}" if exc.filename else "the output (stdout or the output file)"
        _quiet_stdout()
        err_console.print(
            f"[bold red]error:[/] {escape(f'could not write {what}: {exc.strerror or exc}.')} Free space "
            "(or write somewhere else: another --output, another redirection) and run the command again; "
            "what was written so far may be incomplete.",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(2)
    except Exception as exc:
        sa_exc = sys.modules.get("sqlalchemy.exc")
        if sa_exc is not None and isinstance(exc, sa_exc.OperationalError):
            # Outside the store's own checks (a write while another process holds the SQLite lock):
            # still one paragraph, never a traceback.
            readonly = "readonly database" in str(exc.orig)
            err_console.print(
                f"[bold red]error:[/] {escape(f'the database could not be read or written: {exc.orig}.')} "
                + (
                    # SQLite's file or folder: retrying never helps (a review of 2026-12-07)
                    "The SQLite file or its folder is read-only for this user (SQLite also writes -wal and -shm "
                    "beside it): make both writable, or give --db a writable path."
                    if readonly
                    else "Another writer may hold it (the control loop), or its server is down: try again, or "
                    "check --db."
                ),
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(2)
        if sa_exc is not None and isinstance(exc, sa_exc.DataError | sa_exc.IntegrityError):
            # A value the command did not check against the database's columns and constraints (a text
            # longer than its column on PostgreSQL): one paragraph, never a traceback.
            first = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else type(exc.orig).__name__
            err_console.print(
                f"[bold red]error:[/] {escape(f'the database refused the write: {first}.')} A value given "
                "to the command is longer than the database keeps, or breaks one of its rules: shorten it "
                "(the command should have said so itself: please report it).",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(2)
        # A value a command passed on to a schema without checking it first: still one clear
        # paragraph (the fields and what is wrong with them), never a traceback. (pydantic is not
        # imported for the CLI itself; if it was never imported, this cannot be its error.)
        pydantic = sys.modules.get("pydantic")
        if pydantic is None or not isinstance(exc, pydantic.ValidationError):
            raise
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
        err_console.print(
            f"[bold red]error:[/] {escape(f'invalid {exc.title}: {problems}.')} See docs/configuration.md for "
            "fields and bounds.",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(2)


#: Errors of a write that a person fixes by freeing space or writing elsewhere (a full disk, a quota,
#: a file too large for the filesystem).
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for a full disk would fail again at exit
    ("Exception ignored ... OSError")."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # captured (tests) or already closed
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _usage_errors() -> tuple[type[Any], ...]:
    """Click's usage-error classes.

    Newer typer releases (0.29 here) vendor click as ``typer._click``; older ones use click itself.
    Without the vendored class an unknown option printed a Python traceback instead of one line.
    """
    import click

    found: list[type[Any]] = [click.exceptions.ClickException]
    try:
        from typer._click.exceptions import ClickException as VendoredClickException
    except ImportError:
        return tuple(found)
    return (*found, VendoredClickException)


if __name__ == "__main__":
    main()
