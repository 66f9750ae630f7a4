"""``scaleahead steers``: the pod steers the actuator recorded and what became of them.

A steer is recorded before the actuator evicts a ReplicaSet/StatefulSet pod to move it; the
admission webhook consumes it when the owner's next pod is created (docs/adr/0009). This command
shows them and marks overdue pending steers ``expired`` (as the actuator does at each plan), so an
operator can see moves whose replacement was not steered.
"""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from scaleahead.commands import DbOpt
from scaleahead.errors import UserError


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("steers")
    def steers(
        db: DbOpt = None,
        state: Annotated[
            str | None, typer.Option(help="Only steers in this state: pending, consumed, expired or cancelled.")
        ] = None,
        limit: Annotated[int, typer.Option(help="Show at most this many (newest).")] = 50,
        output: Annotated[str, typer.Option(help="text or json.")] = "text",
    ) -> None:
        """List pod steers (where moved pods' replacements were sent) and report expired ones."""
        from actuator.steering import describe
        from storage import Store
        from storage.store import STEER_STATES

        if state is not None and state not in STEER_STATES:
            raise UserError(f"--state {state!r} is not a steer state.", f"Use one of {', '.join(STEER_STATES)}.")
        if output not in ("text", "json"):
            raise UserError(f"--output {output!r} is not known.", "Use text or json.")
        if limit < 1:
            raise UserError(f"--limit {limit} must be at least 1.", "E.g. --limit 50.")
        store = Store(db, create=False)  # nothing to list in a database that does not exist
        try:
            expired = store.expire_steers(time.time())
            rows = store.steers(state=state, limit=limit)
        finally:
            store.close()
        if output == "json":
            print(
                json.dumps(
                    {
                        "newly_expired": [s.id for s in expired],
                        "steers": [
                            {
                                "id": s.id,
                                "namespace": s.namespace,
                                "owner": f"{s.owner_kind}/{s.owner_name}",
                                "evicted_pod": s.evicted_pod,
                                "node": s.node,
                                "state": s.state,
                                "consumed_by": s.consumed_by,
                                "created_at": s.created_at,
                                "expires_at": s.expires_at,
                            }
                            for s in rows
                        ],
                    },
                    indent=2,
                )
            )
            return
        for s in expired:
            typer.echo(f"expired now: {describe(s)}")
        if not rows:
            typer.echo("no pod steers recorded" + (f" in state {state}" if state else ""))
        for s in rows:
            typer.echo(describe(s))
