"""``scaleahead actuator ...`` and the one-shot ``plan --apply``: wiring the actuator to a cluster.

Builds the Kubernetes target from a kubeconfig, the journaled ``Actuator`` with the safety
settings and the kill switch, and prints what happened (or, with ``--dry-run``, the diff of what
would change). The wall clock is read here, in the composition root, and passed down.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scaleahead.commands import DbOpt, OutputOpt
from scaleahead.errors import UserError

console = Console(highlight=False)
#: Who records plans (``plans.source``, ``actuator journal --source``): the control loop, a shadow
#: rollout's challenger, ``scaleahead plan`` (also with ``--apply``), the actuator's own (a plan an
#: embedder gives ``Actuator.apply_plan``), and the release of a removed function's warm pool.
JOURNAL_SOURCES = ("loop", "shadow", "cli-plan", "actuator", "release")
#: ``actuator journal``'s table from this terminal width; a paragraph per action below it.
JOURNAL_WIDE_COLUMNS = 120
err_console = Console(stderr=True, highlight=False)


def build_actuator(
    policies: Sequence[Any],
    store: Any,
    kubeconfig: Path | None,
    context: str | None = None,
    in_cluster: bool = False,
    leader_identity: str | None = None,
    api: Any = None,
) -> Any:
    """An ``Actuator`` on the cluster of ``kubeconfig`` (or of ``api``, a client already made from it)
    with the settings from the environment."""
    from actuator.applying import Actuator
    from actuator.kubernetes import KubernetesTarget, make_api_client
    from actuator.leader import LeaderElector
    from actuator.safety import SafetyConfig
    from scaleahead.settings import Settings

    s = Settings.from_env().actuation
    api = api if api is not None else make_api_client(str(kubeconfig) if kubeconfig else None, context, in_cluster)
    target = KubernetesTarget(api, policies, timeout_s=s.request_timeout_s)
    config = SafetyConfig(
        s.max_plan_age_s, s.paused, s.human_edit_hold_s, s.max_conflict_retries, concurrent_writes=s.concurrent_writes
    )
    leader = None
    if leader_identity:
        leader = LeaderElector(api, s.namespace, leader_identity, s.lease_name, s.lease_duration_s, s.request_timeout_s)
    return Actuator(
        target,
        store,
        policies,
        config,
        kill_switch=lambda: target.kill_switch(s.namespace, s.kill_switch_configmap),
        is_leader=leader.is_leader if leader is not None else None,
        leader_error=(lambda: leader.last_error) if leader is not None else None,
        clock=time.time,  # the plan's age when each action is checked (maxPlanAge)
    )


def apply_once(
    plan: Any,
    policies: Sequence[Any],
    store: Any,
    kubeconfig: Path | None,
    dry_run: bool,
    as_json: bool,
    api: Any = None,
) -> list[Any]:
    """``scaleahead plan --apply``: reconcile the journal, then apply one plan made just now."""
    from scaleahead.types import Plan

    now = time.time()
    act = build_actuator(policies, store, kubeconfig, api=api)
    unresolved: list[int] = []
    # Only the rows of its own policies' workloads: a row another process left (the daemon's, for a
    # workload in mode floor that --policy does not name) would be read without its policy, from the
    # Deployment instead of its HPA, and closed wrongly (a review of 2026-12-07). `scaleahead
    # actuator reconcile` reads the cluster's policies and settles the rest.
    own = {p.workload.key for p in policies}
    if not dry_run:
        for aid, state, why in act.reconcile(now, owns=lambda row: row.target in own):
            # With --output json, stdout is the JSON document alone.
            (err_console if as_json else console).print(f"journal: {journal_line(aid, state, why)}", markup=False)
            if state == "planned":
                unresolved.append(aid)
    # The plan was computed now (from history up to its decision time): its age counts from now.
    fresh = Plan(now, plan.actions, plan.fallbacks, plan.notes)
    results = act.apply_plan(fresh, now, dry_run=dry_run, source="cli-plan")
    if as_json:
        doc = {"dry_run": dry_run, "results": [result_json(r) for r in results], "unresolved_actions": unresolved}
        print(json.dumps(doc, indent=2))
    else:
        title = "what would change (dry run: nothing written)" if dry_run else "outcome per action"
        table = Table(title=title)
        for col in ("kind", "target", "outcome", "detail"):
            table.add_column(col, overflow="fold")
        for r in results:
            table.add_row(r.action.kind, r.action.target, r.outcome, escape(r.detail))
        console.print(table)
    counts = {o: sum(r.outcome == o for r in results) for o in ("applied", "failed", "skipped", "dry-run")}
    unseen = [r for r in results if r.outcome == "skipped" and "cannot read ConfigMap" in r.detail]
    err_console.print(", ".join(f"{n} {o}" for o, n in counts.items() if n) or "no actions", highlight=False)
    if counts["failed"] or unseen:
        # Exit 1: a script must not go on as if the plan had been applied.
        why = f"{counts['failed']} action(s) failed" if counts["failed"] else "the kill switch could not be read"
        where = "each result's detail" if as_json else "the detail column"
        err_console.print(f"not everything was applied: {why} (see {where}; scaleahead actuator journal)")
        raise typer.Exit(1)
    if unresolved:
        # Exit 1 as `actuator reconcile`: the journal still holds actions whose outcome nobody knows.
        err_console.print(
            f"the plan was handled (outcomes above), but {len(unresolved)} earlier action(s) stay planned (ids "
            f"{', '.join(map(str, unresolved))}): their objects could not be read, so whether their writes "
            "landed is unknown. Run `scaleahead actuator reconcile` when the API server answers."
        )
        raise typer.Exit(1)
    return list(results)


def journal_line(aid: int, state: str, why: str) -> str:
    """One reconciled action, as ``reconcile`` returned it (``planned``: left unresolved)."""
    return f"action {aid} stays planned: {why}" if state == "planned" else f"action {aid} -> {state}: {why}"


def result_json(r: Any) -> dict[str, Any]:
    return {"kind": r.action.kind, "target": r.action.target, "outcome": r.outcome, "detail": r.detail}


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    actuator_app = typer.Typer(help="The actuator: journal inspection and recovery after a crash (docs/actuator.md).")
    app.add_typer(actuator_app, name="actuator")

    @actuator_app.command("reconcile")
    def reconcile(
        kubeconfig: Annotated[
            Path | None, typer.Option(help="Kubeconfig (default: $KUBECONFIG, ~/.kube/config).")
        ] = None,
        db: DbOpt = None,
        policies: Annotated[
            Path | None,
            typer.Option(
                "--policies",
                help="Policy file or folder (each workload's mode: direct or floor); default: the "
                "PredictiveScalingPolicy objects in the cluster.",
            ),
        ] = None,
    ) -> None:
        """Mark journal actions left 'planned' by a crash as applied or skipped, from the live objects."""
        from actuator.kubernetes import make_api_client, require_api_server
        from storage import Store

        # The policies and the cluster first: a bad file or kubeconfig creates no database.
        if policies is not None:
            from scaleahead.commands.run import load_policy_path

            pols: list[Any] = list(load_policy_path(policies))
        api = make_api_client(str(kubeconfig) if kubeconfig else None)
        require_api_server(api)
        if policies is None:
            from actuator.policy_resources import ClusterPolicies, PolicyLimits
            from scaleahead.settings import Settings

            # A list that fails is a UserError (HTTP status or the unreachable server, and what to do).
            settings = Settings.from_env()
            cross = settings.actuation.cross_namespace_targets
            limits = PolicyLimits.from_settings(settings)
            pols = list(ClusterPolicies(api, cross_namespace=cross, limits=limits).load())
        store = Store(db)
        done = build_actuator(pols, store, kubeconfig, api=api).reconcile(time.time())
        for aid, state, why in done:
            console.print(journal_line(aid, state, why), markup=False)
        left = sum(state == "planned" for _, state, _ in done)
        console.print(f"{len(done) - left} action(s) reconciled")
        if left:
            # Exit 1: the journal still has actions whose outcome nobody knows.
            err_console.print(
                f"{left} action(s) stay planned: their objects cannot be read now, so whether the write "
                "landed is unknown. Run `scaleahead actuator reconcile` again when the API server answers "
                "(`scaleahead actuator journal --state planned` lists them).",
                markup=False,
            )
            raise typer.Exit(1)

    @actuator_app.command("journal")
    def journal(
        db: DbOpt = None,
        limit: Annotated[int, typer.Option(help="Newest N actions.", min=1)] = 20,
        state: Annotated[
            str | None, typer.Option(help="Only this state (planned, applied, failed, skipped, dry-run).")
        ] = None,
        workload: Annotated[
            str | None,
            typer.Option(
                help="Only the actions on this workload: NAMESPACE/NAME, or the full target KIND/NAMESPACE/NAME.",
                metavar="NS/NAME",
            ),
        ] = None,
        since: Annotated[
            str | None,
            typer.Option(
                help="Only actions last updated at or after this time (ISO-8601, UTC if no zone, or epoch s)."
            ),
        ] = None,
        source: Annotated[
            str | None,
            typer.Option(
                help="Only the actions of plans from this source: loop (the control loop), shadow (a shadow "
                "rollout's challenger, never applied), cli-plan (scaleahead plan), actuator, release (a removed "
                "function's warm pool let go); another value is an error."
            ),
        ] = None,
        reasons: Annotated[bool, typer.Option("--reasons", help="Add each action's reason (the sentence).")] = False,
        output: OutputOpt = "table",
    ) -> None:
        """Show the newest journaled actions with their outcome (and, with --reasons, why)."""
        from scaleahead.cli import iso, parse_time
        from scaleahead.commands.rollout import json_text
        from scaleahead.types import endpoint_value
        from storage import Store
        from storage.store import StoredAction

        states = ("planned", "applied", "failed", "skipped", "dry-run")
        if state is not None and state not in states:
            raise UserError(f"--state {state!r} is not a journal state.", f"Use one of {', '.join(states)}.")
        if workload is not None and (workload.count("/") not in (1, 2) or "" in workload.split("/")):
            raise UserError(
                f"--workload {workload!r} is not NAMESPACE/NAME or KIND/NAMESPACE/NAME.",
                "For example --workload shop/checkout or --workload Deployment/shop/checkout.",
            )
        if source is not None and source not in JOURNAL_SOURCES:
            # a typo listed no actions and exited 0, as if there were none (newcomer audit)
            raise UserError(
                f"--source {source!r} is not a source of plans.", f"Use one of {', '.join(JOURNAL_SOURCES)}."
            )
        after = parse_time(since, "--since") if since is not None else None
        rows = Store(db, create=False).actions(state=state, limit=limit, target=workload, since=after, source=source)
        if output == "json":
            print(
                json_text(
                    [
                        {
                            "id": a.id,
                            "plan_id": a.plan_id,
                            "kind": a.kind,
                            "target": a.target,
                            "from": endpoint_value(a.kind, a.from_value),
                            "to": endpoint_value(a.kind, a.to_value),
                            "state": a.state,
                            "outcome": a.outcome,
                            "reason_code": a.reason_code,
                            "reason": a.reason,
                            "source": a.source,
                            "details": dict(a.details),
                            "updated_at": iso(a.updated_at),
                        }
                        for a in rows
                    ]
                )
            )
            return
        # A plan not the loop's says whose it is: a shadow challenger's dry run is not one of
        # `run --dry-run` (loop reasons audit: both read "dry-run").
        shown = [a.state if a.source in ("loop", "actuator", "") else f"{a.state} ({a.source})" for a in rows]

        def why(a: StoredAction) -> str:
            """The reason as ``--reasons`` prints it; a rollout challenger's decision names its arm
            and model (details ``arm``, ``model``)."""
            arm = a.details.get("arm")
            on = f"; {arm} {a.details.get('model')}" if arm else ""
            if arm and "model_version" in a.details:
                on += f" version {a.details['model_version']}"
            return f"({a.reason_code}{on}): {a.reason}"

        wide = console.width >= JOURNAL_WIDE_COLUMNS
        if wide:
            table = Table()
            # Short columns are never split mid-word; the target and the outcome fold. The reasons
            # (a sentence each) follow the table, one paragraph per action: in a column they were
            # cut into a few letters per line on an 80-column terminal.
            for col in ["id", "plan", "updated", "kind", "target", "from", "to", "state", "outcome"]:
                table.add_column(col, overflow="fold", no_wrap=col not in ("target", "outcome"))
            for a, st in zip(rows, shown, strict=True):
                cells = [str(a.id), str(a.plan_id), iso(a.updated_at), a.kind, a.target, a.from_value, a.to_value]
                table.add_row(*cells, st, escape(a.outcome))
            console.print(table)
        else:
            # Narrower (80 columns, or a pipe): the nine columns left the target and the outcome no
            # room and cut the state (a newcomer audit). An action per paragraph instead: its id,
            # plan, time and state, then the change, then the outcome, each whole on its line.
            for a, st in zip(rows, shown, strict=True):
                lines = [
                    f"{a.id}  plan {a.plan_id}  {iso(a.updated_at)}  {st}",
                    f"    {a.kind} {a.target} {a.from_value} -> {a.to_value}",
                    *([f"    {a.outcome}"] if a.outcome else []),
                    *([f"    {why(a)}"] if reasons else []),
                ]
                console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
        if reasons and wide:
            for a in rows:
                console.print(f"{a.id} {why(a)}", markup=False, highlight=False, soft_wrap=True)
        if not rows and (workload or since or state or source):
            console.print("no journaled action matches (the filters are exact; --workload shop/checkout)")
