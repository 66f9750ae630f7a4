"""Applying plans safely: journal, safety check, optimistic concurrency, human edits, recovery.

For each action of a plan the ``Actuator``:

1. journals it as ``planned`` (all of the plan's rows in one transaction, before any API call);
2. reads the live object and checks for a human edit of the field we manage (someone else
   changed it since our last write): the edit is respected for ``human_edit_hold_s`` and reported;
3. runs the safety check (``actuator.safety.check``) against the policy and the live object, with
   the plan's age at that moment (the actuator's ``clock``): a slow cycle or a slow plan skips what
   is left once the plan is older than ``max_plan_age_s`` (asked before the live read too: an action
   of a plan already too old makes no request);
4. writes with the live ``resourceVersion`` as precondition; on 409 reads again and re-checks;
5. journals ``applied`` / ``failed`` / ``skipped`` / ``dry-run`` with the reason: committed with the
   next write's intent (or at the plan's end), see ``apply_plan``.

A no-op makes no API call at all. After a crash, ``reconcile(now)`` checks every action left
``planned`` against the live object and marks it ``applied`` or ``skipped``.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime

from actuator.base import FIELD_MANAGER, PDB_FACT, ActionResult, ActuationError, LiveObject, LiveTarget
from actuator.safety import SafetyConfig, check, desired_value, too_old
from actuator.steering import STEERABLE_OWNERS
from scaleahead.policy import Policy
from scaleahead.types import Action, MovePod, Plan, Reason, ScaleTo, SetWarmPool, WorkloadRef
from storage import Store
from storage.store import FieldWrite, ManagedField, StoredAction, StoredSteer

log = logging.getLogger("scaleahead.actuator")


#: How a drain fence's taint is named in outcomes (``actuator.kubernetes.DRAIN_FENCE_TAINT``).
FENCE_SHOWN = "scaleahead.io/draining:NoSchedule"


def _pod_left(live: LiveObject) -> bool:
    """Whether a moved pod's live read shows no pod of its name on its from node any more (or one
    terminating): its drain is not kept from freeing the node by it. A pod re-created under the
    name on the same node (a StatefulSet's) is not the planned one, but it still holds the node. A
    target without the fact: by ``live.value`` alone."""
    on = live.fact("name_on_from_node")
    return not live.value and (on is None or not on)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _whole(text: str) -> int | None:
    """A journaled count (``"3"``, ``"3.0"``) as an int; None if it is not one."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return int(value) if value.is_integer() else None


def action_from_journal(row: StoredAction) -> Action:
    """Rebuild the action a journal row describes (for reconciliation)."""
    reason = Reason(row.reason_code, row.reason)
    if row.kind == "MovePod":
        _, namespace, pod = row.target.split("/", 2)
        uid = row.details.get("pod_uid") if row.details else None
        return MovePod(namespace, pod, row.from_value, row.to_value, reason, pod_uid=str(uid or ""))
    ref = WorkloadRef.parse(row.target)
    if row.kind == "SetWarmPool":
        return SetWarmPool(ref, int(row.from_value), int(row.to_value), 0.0, reason)
    return ScaleTo(ref, int(row.from_value), int(row.to_value), reason)


#: Prefix of a managed field's version while a write is pending: ``intent:<value>:<version before>``.
INTENT = "intent:"
#: How ``reconcile`` starts the reason of an action it could not resolve (left ``planned``).
UNRESOLVED = "unresolved"

#: Rows ``Actuator.reconcile`` settles per transaction.
RECONCILE_BATCH = 200
#: How a skip for the kill switch (or ``actuation.paused``) starts (its result's cause: ``paused``).
PAUSED = "actuation is paused"
#: What a human edit's hold says of a writer that keeps undoing scaleahead's writes (cause ``co_writer``).
CO_WRITER = "a persistent co-writer"


def intent_version(value: int, before_version: str) -> str:
    """The version recorded with a pending write of ``value`` over a field at ``before_version``."""
    return f"{INTENT}{value}:{before_version}"[:64]  # the column's width (a longer version is cut)


def parse_intent(version: str) -> tuple[int, str] | None:
    """``(value being written, version before the write)`` of a pending write's record, else None."""
    if not version.startswith(INTENT):
        return None
    value, _, before = version[len(INTENT) :].partition(":")
    try:
        return int(value), before
    except ValueError:
        return None


def drained_node(move: MovePod) -> str:
    """The node ``move`` helps free when it moves one of that node's pods as part of its drain, else
    "". A drain step's other moves (``frees_node`` set, from another node: "so that freeing n3 adds
    no interfering pair") free nothing by themselves; a reason without ``frees_node`` (older plans,
    hand-made ones) counts as the drain of its ``from`` node when its step is a drain."""
    details = move.reason.details
    node = str(details.get("frees_node") or (move.from_node if details.get("step") == "drain" else ""))
    return node if node == move.from_node else ""


def drain_step_node(move: MovePod) -> str:
    """The node the drain step of ``move`` frees ("" for no drain): its own moves' and also the
    moves of other nodes' pods made for it (``frees_node``), which are not to be made without it."""
    return str(move.reason.details.get("frees_node") or "") or drained_node(move)


def _drain_left(res: ActionResult, done: Sequence[ActionResult | None]) -> ActionResult:
    """A drain's move not made: its outcome says the node stays, naming the drain's moves this plan
    already made (loop reasons audit: a refused last move left the applied ones' "frees n3" standing,
    with nothing saying n3 kept a pod). Moves are applied one at a time, so ``done`` holds those."""
    move = res.action
    assert isinstance(move, MovePod)
    node = drained_node(move)
    if not node:
        return res
    made = [
        f"{r.action.namespace}/{r.action.pod}"
        for r in done
        if r is not None and r.outcome == "applied" and isinstance(r.action, MovePod) and drained_node(r.action) == node
    ]
    if not made:
        return res
    return replace(
        res,
        detail=f"{res.detail}; so {move.from_node} is not freed by this plan, though {len(made)} other move"
        f"{'s' if len(made) != 1 else ''} of its drain {'were' if len(made) != 1 else 'was'} made ({', '.join(made)})",
    )


#: What reconciliation cannot tell of a pod move found done: pod moves are journaled with no
#: write-ahead intent (a field write has one), so whether scaleahead's eviction did it is unknown.
_NO_MOVE_INTENT = "scaleahead's eviction before the restart or someone else's (pod moves record no write-ahead intent)"


def _where_now(action: MovePod, live: LiveObject) -> str:
    """Where a moved pod is, from its live read's facts (``spec.nodeName`` reads 1/0: on the from node)."""
    if live.fact("recreated"):
        return "a pod re-created under its name is not the planned one"
    if live.fact("terminating"):
        return "terminating"
    return f"on {action.to_node}, the planned node" if live.fact("on_to_node") else "on another node than planned"


class Actuator:
    """Applies plans to a ``LiveTarget`` with the safety layer and the journal.

    Args:
        target: the cluster (``KubernetesTarget``) or anything with ``live``/``write``.
        store: where the journal and managed fields live (None: no journal, no human-edit memory).
        policies: per-workload bounds and step limits.
        config: plan age, kill switch, human-edit hold, conflict retries.
        kill_switch: asked before each plan; a non-empty answer pauses all actuation (the reason).
        is_leader: asked before each plan with ``now``; False skips every action.
        leader_error: why ``is_leader`` said no (the elector's ``last_error``: "lease held by B", or
            the API server's 500 on the Lease), for the skipped actions' reason; "" or None: another
            replica holds it.
        steer_ttl_s: when set (the steering webhook runs), a move of a ReplicaSet/StatefulSet pod
            first records a steer for its replacement, valid this long (``actuator.steering``).
        clock: the time now, read as each action is checked: the plan's age is this minus
            ``plan.created_at`` (when its data was read), so a slow history read, database or
            plan skips the actions checked after ``max_plan_age_s``. The daemon passes its clock
            (virtual in replays: no time passes within a cycle). None: the ``now`` given to
            ``apply_plan``, for every action of the plan.
        drain_fence_s: before a plan's first write, each node it drains is fenced for this long (a
            ``NoSchedule`` taint, ``KubernetesTarget.fence_node``), so that no new pod is scheduled
            onto the node being freed; a drain the plan does not complete is unfenced at once, and
            fences whose time is over are lifted after each plan's writes. 0: no fences.
        lift_fences: lift fences whose time is over even with ``drain_fence_s`` 0 (the daemon:
            rebalancing turned off since they were set).
        fence_clock: the wall clock the fences' times are on (default ``time.time``): a fence is a
            real object in the cluster, whatever clock plans are made on.
    """

    def __init__(
        self,
        target: LiveTarget,
        store: Store | None,
        policies: Sequence[Policy] = (),
        config: SafetyConfig | None = None,
        kill_switch: Callable[[], str] | None = None,
        is_leader: Callable[[float], bool] | None = None,
        steer_ttl_s: float | None = None,
        clock: Callable[[], float] | None = None,
        leader_error: Callable[[], str] | None = None,
        drain_fence_s: float = 0.0,
        lift_fences: bool = False,
        fence_clock: Callable[[], float] | None = None,
    ) -> None:
        self.target = target
        self.drain_fence_s = float(drain_fence_s)
        self.lift_fences = lift_fences
        self.fence_clock: Callable[[], float] = fence_clock if fence_clock is not None else time.time
        self.leader_error = leader_error
        self.clock = clock
        self.store = store
        self.policies = {p.workload: p for p in policies}
        self.config = config or SafetyConfig()
        self.kill_switch = kill_switch
        self.is_leader = is_leader
        self.steer_ttl_s = steer_ttl_s
        #: Action targets (``Kind/namespace/name``) whose actions are held back this cycle: the
        #: daemon's workloads backing off after errors (skipped, not written).
        self.held: frozenset[str] = frozenset()
        #: Workload key -> why its field is left to another writer now (``human_edit``, or
        #: ``co_writer``: a writer that undid scaleahead's writes twice or more in a row), as the
        #: last action evaluated for it found: the daemon's gauge ``scaleahead_workload_held``.
        self.held_for: dict[str, str] = {}
        #: Journal rows of the plan being applied that are still ``planned``: each leaves once its
        #: outcome is recorded. What is left after ``apply_plan`` raised (the database failed in the
        #: middle of the plan, possibly after a write landed) is what the caller must reconcile:
        #: the daemon counts them as unresolved and reconciles them at its next tick.
        self.unsettled: set[int] = set()
        # The journal writes of the plan being applied not committed yet (see ``apply_plan``):
        # outcomes ``(action id, state, detail)`` and confirmed managed fields; and the managed-field
        # records of the plan's targets read in one query up front (each used once, then read anew).
        self._outcomes: list[tuple[int, str, str]] = []
        self._confirmed: list[FieldWrite] = []
        self._known: dict[str, ManagedField | None] = {}
        self._journal_now = 0.0
        # Held by the worker running an action while a plan's writes run concurrently, released
        # only around its API requests (``_io``) and, with a store whose writes may overlap, its
        # group commits (``_commit``); None when applying one action at a time.
        self._lock: threading.Lock | None = None
        # Group commit (``_commit``, concurrent writes on PostgreSQL): the intents waiting for the
        # next journal transaction, how many transactions were started and finished in this plan,
        # whether one is in flight, the errors of those that failed (by number), and the condition
        # on ``_lock`` the waiting workers sleep on.
        self._intents: list[FieldWrite] = []
        self._groups_started = 0
        self._groups_finished = 0
        self._group_in_flight = False
        self._group_errors: dict[int, BaseException] = {}
        self._group_done: threading.Condition | None = None
        #: Journal transactions of the last plan applied (``apply_plan``): fewer than its writes when
        #: the writes of several workers were committed together.
        self.journal_transactions = 0

    # -- plans ----------------------------------------------------------------------------------
    def apply_plan(
        self,
        plan: Plan,
        now: float,
        dry_run: bool = False,
        action_ids: Sequence[int] | None = None,
        source: str = "actuator",
    ) -> list[ActionResult]:
        """Apply every change of ``plan`` (no-ops make no calls); one failure never stops the rest.

        ``action_ids`` are journal rows of ``plan.changes`` already recorded as ``planned``; without
        them (and with a store) the plan is recorded here first.
        """
        changes = plan.changes
        self.unsettled = set()
        ids: list[int | None] = list(action_ids) if action_ids is not None else [None] * len(changes)
        if action_ids is None and self.store is not None and changes:
            _, new_ids = self.store.record_plan(
                Plan(plan.created_at, changes, plan.fallbacks, plan.notes),
                source=source,
                state="dry-run" if dry_run else "planned",
            )
            ids = list(new_ids)
        if action_ids is not None or not dry_run:  # a dry run recorded here is never 'planned'
            self.unsettled = {aid for aid in ids if aid is not None}
        self.report_steers(now)
        stop = self._stop_reason(now)
        results: list[ActionResult] = []
        by_action = dict(zip(range(len(changes)), ids, strict=True))
        # The journal's invariant, in one transaction per API write instead of four per action
        # (until 2026-12-06: the managed-field read, the intent, the confirmed field and the outcome,
        # each its own): every row of the plan is ``planned`` before its first write (above, or the
        # caller's ``record_plan``); an action's write-ahead intent commits BEFORE its API write, in
        # the same transaction as the outcomes (journal rows and confirmed managed fields) of every
        # action of the plan finished before it; the last ones commit when the plan ends. So the
        # outcome of each write is durable before the next write of the plan (to the same object or
        # any other), and a crash at any point leaves every action whose write may have landed either
        # with its outcome or ``planned`` with its intent on the field's record: reconciliation
        # settles it. An action finished but not committed yet stays in ``unsettled``. With writes in
        # flight at once (``concurrent_writes``), another namespace's write may be made before the
        # outcome of one that just landed is committed (up to ``concurrent_writes`` - 1 of them):
        # each write's own intent still commits before it, so the same reconciliation settles them.
        self._outcomes, self._confirmed, self._journal_now = [], [], now
        self._intents, self._group_errors, self.journal_transactions = [], {}, 0
        self._groups_started = self._groups_finished = 0
        self._known = {}
        if self.store is not None and not stop:
            # Keyed as ``_managed`` looks them up: by the object whose field is written (mode floor:
            # the HPA; until 2026-12-06 by the workload, so every floor action missed its record here
            # and paid a commit and a read of its own).
            field_target = getattr(self.target, "field_target", None)
            self._known = self.store.managed_fields_of(
                {
                    field_target(a) if field_target is not None else a.target
                    for a in changes
                    if not isinstance(a, MovePod) and a.target not in self.held
                }
            )
        # Within one plan the target reads each namespace's ResourceQuotas and LimitRanges once, and
        # counts the room this plan's earlier scale-ups take (``KubernetesTarget.plan_reads``).
        scope = getattr(self.target, "plan_reads", None)
        change_index: dict[int, int] = {}
        for k, action in enumerate(plan.actions):
            if not action.is_noop:
                change_index[k] = len(change_index)
        done: list[ActionResult | None] = [None] * len(plan.actions)
        drains: dict[str, str] = {}  # a drained node -> why its drain is refused ("": it may go on)
        cut_short: dict[str, str] = {}  # a drained node -> which of its drain's own moves was not made
        fences: dict[str, bool] = {}  # a drained node -> whether this plan fenced it (``_fence_drains``)
        fence_notes: dict[str, str] = {}  # a drained node -> what its first move's outcome adds

        def one(k: int) -> None:
            action = plan.actions[k]
            if action.is_noop:
                done[k] = ActionResult(action, "skipped", "no change", "noop")
                if not isinstance(action, MovePod):  # nothing to write: no one's edit is in the way
                    self.held_for.pop(action.workload.key, None)
                return
            aid = by_action[change_index[k]]
            if stop:
                res = ActionResult(action, "skipped", stop, "paused" if stop.startswith(PAUSED) else "not_leader")
            elif action.target in self.held:
                res = ActionResult(action, "skipped", "backing off after errors", "backing_off")
            elif isinstance(action, MovePod) and (refused := self._drain_refusal(plan, action, now, drains, cut_short)):
                res = ActionResult(action, "skipped", refused)
            else:
                res = self._apply_one(action, plan.created_at, now, dry_run)
                # said with the drain's first eviction made (a move not made says nothing of a fence)
                fenced = (
                    fence_notes.pop(drained_node(action), "")
                    if isinstance(action, MovePod) and res.outcome == "applied"
                    else ""
                )
                if fenced:
                    res = replace(res, detail=f"{res.detail}; {fenced}")
            # a pod gone from its node since the plan leaves its drain whole (nothing to evict)
            if isinstance(action, MovePod) and res.outcome in ("skipped", "failed") and res.cause != "gone":
                res = _drain_left(res, done)
                node = drained_node(action)
                if node and not cut_short.get(node):  # the moves made for this drain are not to be made
                    cut_short[node] = f"its move of {action.namespace}/{action.pod} was not made ({res.detail})"
            done[k] = res
            if self.store is not None and aid is not None:
                self._outcomes.append((aid, res.outcome, res.detail))  # committed by the next write's intent
            log.info("%s %s: %s %s", action.kind, action.target, res.outcome, res.detail)

        order, urgency = self._apply_order(plan.actions)
        lanes = self._lanes(plan.actions, order) if not stop else None
        with scope() if scope is not None else nullcontext():
            try:
                if not stop and not dry_run:  # before the plan's first write
                    self._fence_drains(plan, now, fences, fence_notes)
                if lanes is None:
                    for k in order:
                        one(k)
                else:
                    quiet, busy = lanes
                    for k in quiet:  # no request to make: settled before the others start
                        one(k)
                    settled = set(quiet)
                    moves = [k for k in order if isinstance(plan.actions[k], MovePod)]
                    rest = [k for k in order if k not in settled and not isinstance(plan.actions[k], MovePod)]
                    self._apply_concurrently(one, rest, [urgency[k] for k in rest], busy)
                    for k in moves:  # one at a time, after the rest
                        one(k)
            finally:  # also when the plan fails midway: a drain not completed leaves no fence
                self._unfence_unfinished(plan, done, fences, cut_short)
        if not stop and not dry_run:  # after the plan's writes: a slow node read delays none of them
            self._lift_fences()
        results.extend(r for r in done if r is not None)  # in the plan's order
        try:
            self._commit()
        finally:
            self._known = {}
        return results

    def _lanes(self, actions: Sequence[Action], order: Sequence[int]) -> tuple[list[int], list[list[int]]] | None:
        """The actions that make no request (no-ops and held targets, on objects with no other
        action), and the rest of the plan's actions other than pod moves, in ``order``, split into one
        lane per namespace; None: applied one at a time (``concurrent_writes`` 1, a target that does
        not declare ``concurrent_io``, a journal in an in-memory SQLite database, or fewer than two
        namespaces with a write to make). The quiet ones are settled first: left in a lane, one queued
        behind a slow write held back every less urgent action of the plan (a review found it)."""
        workers = max(1, int(self.config.concurrent_writes))
        if workers < 2 or not getattr(self.target, "concurrent_io", False):
            return None
        if self.store is not None and not self.store.shared_by_threads:
            return None  # an in-memory SQLite journal: another thread would see an empty database
        loud = {a.target for a in actions if not (a.is_noop or a.target in self.held)}
        quiet: list[int] = []
        lanes: dict[str, list[int]] = {}
        for k in order:
            action = actions[k]
            if isinstance(action, MovePod):
                continue
            if action.target not in loud:
                quiet.append(k)
            else:
                lanes.setdefault(action.workload.namespace, []).append(k)
        return (quiet, list(lanes.values())) if len(lanes) >= 2 else None

    def _apply_concurrently(
        self,
        one: Callable[[int], None],
        order: Sequence[int],
        tiers: Sequence[tuple[int, float]],
        lanes: list[list[int]],
    ) -> None:
        """Apply the lanes' actions (``order``: all of them, most urgent first; ``tiers``: the urgency
        of each, ``_apply_order``) with up to ``concurrent_writes`` of them in flight, at most one per
        namespace.

        Only the API requests overlap: every worker holds ``self._lock`` except while its request is on
        the wire (``_io``) and, on a store whose writes may overlap (PostgreSQL), while it writes a
        group of journal writes (``_commit``), so the journal, the safety checks, the Lease and the
        kill switch see one action at a time, and each action's write-ahead intent still commits
        before its own write. One
        namespace's actions are applied in order, one at a time, so its quota room is taken by each
        scale-up before the next is checked (``KubernetesTarget.plan_reads``). The next action started
        is always the most urgent one waiting (``_apply_order``) in a namespace with none in flight, and
        only if no action still waiting anywhere is more urgent (a scale-down waits while any scale-up,
        and a scale-up while any of a higher priority, is still to start): so a plan cut short by
        ``max_plan_age_s`` still skips the least urgent ones, and actions overlap only with equally
        urgent ones of other namespaces. If an action raises (a ``BaseException``: the actuator journals
        every ``Exception`` as the action's failure), no new one starts, those in flight finish (their
        writes included), and the error is raised: what is not committed stays in ``unsettled``, as when
        a plan applied one at a time fails."""
        workers = max(1, int(self.config.concurrent_writes))
        rank = {k: r for r, k in enumerate(order)}
        heads = [(rank[lane[0]], i, 0) for i, lane in enumerate(lanes) if lane]
        heapq.heapify(heads)
        # The first rank not started yet: a head starts only if it is as urgent as every action still
        # waiting, so no scale-down (or lower priority) starts while a more urgent action waits behind
        # a busy namespace (a review found one namespace's 40 scale-ups skipped as too old while other
        # namespaces' scale-downs were written).
        started = [False] * len(order)
        lowest = [0]

        def next_waiting() -> int:
            while lowest[0] < len(order) and started[lowest[0]]:
                lowest[0] += 1
            return lowest[0]

        lock = threading.Lock()
        error: list[BaseException] = []

        def run(k: int) -> None:
            with lock:
                one(k)

        self._lock = lock
        if self.store is not None and self.store.overlapping_writes:
            self._group_done = threading.Condition(lock)
        try:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scaleahead-write") as pool:
                running: dict[Future[None], tuple[int, int]] = {}
                while heads or running:
                    while heads and len(running) < workers and not error:
                        if running and tiers[heads[0][0]] != tiers[next_waiting()]:
                            break  # a more urgent action waits in a namespace with one in flight
                        r, i, pos = heapq.heappop(heads)
                        started[r] = True
                        running[pool.submit(run, lanes[i][pos])] = (i, pos)
                    if not running:
                        break
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        i, pos = running.pop(future)
                        exc = future.exception()
                        if exc is not None:
                            error.append(exc)
                        elif pos + 1 < len(lanes[i]):
                            heapq.heappush(heads, (rank[lanes[i][pos + 1]], i, pos + 1))
        finally:
            self._lock = self._group_done = None
        if error:
            raise error[0]

    @contextmanager
    def _io(self) -> Iterator[None]:
        """Around an API request: lets the other workers of ``_apply_concurrently`` run meanwhile."""
        lock = self._lock
        if lock is None:
            yield
            return
        lock.release()
        try:
            yield
        finally:
            lock.acquire()

    def _apply_order(self, actions: Sequence[Action]) -> tuple[list[int], list[tuple[int, float]]]:
        """The order (indices into ``actions``) in which a plan is applied: what protects the SLO
        first, so that when a large plan outlasts ``max_plan_age_s`` the actions skipped as too old
        are the ones that only save cost. Scale-ups first (replicas or warm instances; the policy's
        higher ``priority`` first, as the planner shares a shortage), then other changes, then
        scale-downs, then pod moves; ties keep the plan's order (the policies' order), so the room
        a quota leaves goes to the same scale-ups as before. Actions on one object keep their
        order among themselves: each object sorts by its most urgent action. Until 2026-12-06 a plan
        was applied in policy order, so its tail, whatever it held, was skipped. Also returned: each
        action's urgency (its object's most urgent action's), by index into ``actions``."""

        def urgency(action: Action) -> tuple[int, float]:
            if isinstance(action, MovePod):
                return (3, 0.0)
            before, after = (
                (action.from_replicas, action.to_replicas)
                if isinstance(action, ScaleTo)
                else (action.from_instances, action.to_instances)
            )
            if after > before:
                policy = self.policies.get(action.workload)
                return (0, -float(policy.spec.priority) if policy is not None else 0.0)
            return (2, 0.0) if after < before else (1, 0.0)

        first: dict[str, tuple[tuple[int, float], int]] = {}
        for k, action in enumerate(actions):
            key = (urgency(action), k)
            first[action.target] = min(first.get(action.target, key), key)
        order = sorted(range(len(actions)), key=lambda k: (first[actions[k].target], k))
        return order, [first[a.target][0] for a in actions]

    def _commit(self, intent: FieldWrite | None = None) -> None:
        """Commit the plan's pending outcomes and confirmed fields, with ``intent`` (a write-ahead
        intent: committed before its write), in one transaction; the rows leave ``unsettled``.
        If it fails, nothing of it is recorded: the rows stay ``planned`` (and in ``unsettled``),
        the outcomes and confirmed fields are kept for the next commit, and the error is raised (the
        intent's write is not made).

        Writes in flight at once on a store whose transactions may overlap (PostgreSQL:
        ``Store.overlapping_writes``): a group commit. The transaction is written with the lock
        released, so the other workers go on meanwhile, and the intents that arrive while it is in
        flight wait and go together in the next one, with every outcome and confirmed field pending
        by then; one transaction at a time, so a target's records are written in order. On return
        (or raise), every journal write pending when it was called is committed (or its transaction
        failed), so a read of the store after it sees them. Until 2026-12-06 each worker's
        transaction was written under the lock, one after the other: on PostgreSQL the journal was
        then most of a large plan's time (docs/benchmarks.md, "The journal on PostgreSQL")."""
        if self.store is None:
            return
        cond = self._group_done
        if cond is None:
            if self._outcomes or self._confirmed or intent is not None:
                self._write_journal([intent] if intent is not None else [])
            return
        if intent is not None:
            self._intents.append(intent)
        for again in (False, True):
            pending = bool(self._outcomes or self._confirmed or self._intents)
            # The transaction that takes what is pending now: the next one to start (one in flight
            # took its own before this call). With nothing pending, only the one in flight is waited for.
            mine = self._groups_started + (1 if pending else 0)
            if self._groups_finished >= mine:
                return  # nothing pending, none in flight
            self._await_group(mine, cond)
            failed = self._group_errors.get(mine)
            if failed is None:
                return
            if intent is not None or pending or again:
                raise failed  # this call's own writes were in it (or in the one tried again)
            # A read's wait for another worker's transaction, which failed: that transaction's
            # outcomes and confirmed records are pending again (its own workers raise its error);
            # commit them now, so the read after this sees them (an audit found this read's action
            # failed on the other one's error, though nothing of its own was lost).

    def _await_group(self, mine: int, cond: threading.Condition) -> None:
        """Until journal transaction number ``mine`` has finished: wait while one is in flight,
        else write the next one (with the lock released), taking every journal write pending."""
        while self._groups_finished < mine:
            if self._group_in_flight:
                cond.wait()
                continue
            self._groups_started += 1
            number, intents = self._groups_started, self._intents
            self._intents, self._group_in_flight = [], True
            try:
                self._write_journal(intents, cond)
            except BaseException as exc:  # noqa: BLE001 - raised by every worker whose writes it held
                self._group_errors[number] = exc
            finally:
                self._group_in_flight = False
                self._groups_finished = number
                cond.notify_all()

    def _write_journal(self, intents: list[FieldWrite], cond: threading.Condition | None = None) -> None:
        """One journal transaction: the pending outcomes and confirmed fields, then ``intents``;
        written with ``cond``'s lock released when given. On failure the outcomes and confirmed
        fields go back in front of those pending since, and the error is raised."""
        assert self.store is not None
        outcomes, fields = self._outcomes, self._confirmed
        self._outcomes, self._confirmed = [], []
        self.journal_transactions += 1
        try:
            if cond is None:
                self.store.journal(outcomes, [*fields, *intents], self._journal_now)
            else:
                cond.release()
                try:
                    self.store.journal(outcomes, [*fields, *intents], self._journal_now)
                finally:
                    cond.acquire()
        except BaseException:
            # Kept for the next commit (the intents' actions fail without their writes, and the plan
            # goes on): an outcome is never dropped while its row is still ``planned``.
            self._outcomes[:0], self._confirmed[:0] = outcomes, fields
            raise
        self.unsettled.difference_update(aid for aid, _, _ in outcomes)  # (a dry run's: never in it)

    def _managed(self, target: str) -> ManagedField | None:
        """The record of ``target``'s field: read with the plan's others up front, once; else (a
        second action on it, outside a plan) from the store, after committing what is pending."""
        if target in self._known:
            return self._known.pop(target)
        self._commit()
        assert self.store is not None
        return self.store.managed_field(target)

    def _stop_reason(self, now: float) -> str:
        if self.config.paused:
            return f"{PAUSED} (kill switch: settings actuation.paused)"
        if self.kill_switch is not None:
            why = self.kill_switch()
            if why:
                return f"{PAUSED} (kill switch: {why})"
        if self.is_leader is not None and not self.is_leader(now):
            return f"not the leader: {self._not_leader()}"
        return ""

    def _not_leader(self) -> str:
        """Why this replica may not write: the elector's last error (a 500 on the Lease is not
        another replica holding it: a review of 2026-12-07), else another replica holds it."""
        why = self.leader_error() if self.leader_error is not None else ""
        return f"the lease could not be held ({why})" if why else "another scaleahead replica holds the lease"

    def _apply_one(self, action: Action, created_at: float, now: float, dry_run: bool) -> ActionResult:
        policy = None if isinstance(action, MovePod) else self.policies.get(action.workload)
        attempts = self.config.max_conflict_retries + 1
        first_uid = ""  # a moved pod's UID as first read: a re-read after a 409 must find that pod
        for _ in range(attempts):
            # A plan already too old skips the action before any read (before 2026-12-06 its object
            # and the namespace's quotas were read first, only to skip it after).
            old = too_old(created_at, self.clock() if self.clock is not None else now, self.config)
            if old:
                return ActionResult(action, "skipped", old)
            try:
                with self._io():
                    live = self.target.live(action)
                if isinstance(action, MovePod) and live.uid:
                    if first_uid and live.uid != first_uid:
                        return ActionResult(
                            action,
                            "skipped",
                            f"pod {action.namespace}/{action.pod} was re-created since it was read (a new pod "
                            f"of that name, UID {live.uid}); it is not the pod the plan moves: the next plan decides",
                            "gone" if _pod_left(live) else "",
                        )
                    first_uid = live.uid
                if not isinstance(action, MovePod):
                    self.held_for.pop(action.workload.key, None)
                held = self._human_edit(action, live, now, record=not dry_run)
                if held:
                    return ActionResult(action, "skipped", held, "co_writer" if CO_WRITER in held else "human_edit")
                # The plan's age as of now, after the live read: the check sees what the write will.
                checked_at = self.clock() if self.clock is not None else now
                verdict = check(action, live, policy, created_at, checked_at, self.config)
                notes = ("; " + "; ".join(verdict.notes)) if verdict.notes else ""
                if verdict.decision == "skip":
                    # a pod no longer on its node (``check`` looks at the plan's age first)
                    gone = (
                        isinstance(action, MovePod)
                        and _pod_left(live)
                        and not too_old(created_at, checked_at, self.config)
                    )
                    return ActionResult(action, "skipped", verdict.reason + notes, "gone" if gone else "")
                written = None if isinstance(action, MovePod) else verdict.value
                if verdict.decision == "noop":
                    return ActionResult(action, "skipped", verdict.reason + notes, "noop", written)
                diff = f"{live.target} {live.field}: {live.value} -> {verdict.value}"
                if isinstance(action, MovePod):
                    diff = f"{live.target}: evict from {action.from_node} (planned node {action.to_node})"
                if dry_run:
                    take_room = getattr(self.target, "take_room", None)
                    if take_room is not None:  # the plan's later scale-ups see the room this one would take
                        take_room(action, verdict.value, live)
                    return ActionResult(action, "dry-run", diff + notes, written=written)
                if self.is_leader is not None and not self.is_leader(now):
                    # Renewed just before each write: no other replica can hold the Lease until
                    # a whole lease duration after this renewal.
                    return ActionResult(action, "skipped", f"lost the lease: {self._not_leader()}", "not_leader")
                if self.store is not None:
                    # Write-ahead intent: the value about to be written, with the field's value and
                    # version now. A write that times out but lands must not look like someone else's
                    # edit next cycle; one that does not land (a 409, a 500) must not hide one. It
                    # commits before the write, with the outcomes of the plan's actions before it
                    # (a pod move has no field: those outcomes alone).
                    self._commit(
                        None
                        if isinstance(action, MovePod)
                        else FieldWrite(
                            live.target,
                            live.field,
                            live.value,
                            intent_version(verdict.value, live.resource_version),
                            now,
                            original=None if live.fact("unset") else live.value,  # kept only by a first write
                            uid=live.uid,
                        )
                    )
                    if self.is_leader is not None and not self.is_leader(now):
                        # The commit can take a while (a slow database, a group commit waiting for
                        # another): the Lease is asked again between it and the write. The intent
                        # stays as recorded; the next read finds it did not land (``_human_edit``).
                        return ActionResult(
                            action,
                            "skipped",
                            f"lost the lease while the intent was journaled: {self._not_leader()}",
                            "not_leader",
                        )
                # After that commit: a commit failing between the steer and the eviction would leave an
                # armed steer for an eviction never made (found by a review on 2026-12-06).
                steer = self._record_steer(action, live, now)
                if steer:
                    diff += f"; {steer[1]}"
                try:
                    with self._io():
                        new = self.target.write(action, verdict.value, live)
                except ActuationError as exc:
                    with self._io():
                        landed = self._landed(action, verdict.value, exc)
                    if landed is None:
                        if steer and self.store is not None:  # not evicted: no replacement to steer
                            self.store.set_steer_state(steer[0], "cancelled", now)
                        raise
                    new = landed
                    notes += (
                        f"; the write's answer was lost ({exc.message.removesuffix('; retried next cycle')}), "
                        f"but a read right after shows {new.field}={new.value}"
                    )
            except ActuationError as exc:
                if exc.outcome == "conflict":
                    continue  # read again and re-check
                if isinstance(action, MovePod) and exc.status == 404:
                    # its move's aim holds; the 404's advice ("create it, or fix the policy's
                    # spec.target") is a workload's, not a pod's (second review)
                    return ActionResult(
                        action,
                        "skipped",
                        f"pod {action.namespace}/{action.pod} is no longer on {action.from_node} "
                        "(deleted since the plan)",
                        "gone",
                    )
                return ActionResult(
                    action,
                    "failed" if exc.outcome == "failed" else "skipped",
                    exc.message,
                    retry_after_s=exc.retry_after_s,
                )
            except Exception as exc:  # noqa: BLE001 - one action's surprise must not stop the plan
                # A last resort (a bug, an answer no one foresaw): this action is journaled failed and
                # the plan goes on. A write-ahead intent stays as recorded: the next read settles it
                # like a write whose outcome is unknown. A steer stays pending (expires if unused).
                log.warning("%s %s: unexpected %s", action.kind, action.target, type(exc).__name__, exc_info=True)
                return ActionResult(
                    action, "failed", f"{action.target}: unexpected {type(exc).__name__}: {exc}; retried next cycle"
                )
            if self.store is not None and not isinstance(action, MovePod):
                # committed with the next write's intent (or at the plan's end), with the outcome
                self._confirmed.append(
                    FieldWrite(
                        new.target,
                        new.field,
                        new.value,
                        new.resource_version,
                        now,
                        written=True,
                        uid=new.uid or live.uid,
                    )
                )
            return ActionResult(action, "applied", diff + notes, written=written)
        return ActionResult(
            action, "failed", f"{action.target} kept changing (409 {attempts} times); retried next cycle"
        )

    def _drain_refusal(
        self, plan: Plan, move: MovePod, now: float, drains: dict[str, str], cut_short: Mapping[str, str]
    ) -> str:
        """Why none of the pods of ``move``'s drain is to be evicted, or "" (checked once a plan per
        drained node, before its first eviction; ``drains`` keeps the answers; ``drained_node``).

        A drain frees its node only if every one of its moves is made. The planner checks each
        PodDisruptionBudget on the state it read, but a budget may allow fewer disruptions when the
        plan is applied; each move's own check then refuses a later move after earlier ones were
        made, and the pods moved so far were disrupted for nothing (loop reasons audit part 2). So
        the drain's pods still on the node are read first and counted per budget that covers them
        (the live facts ``PDB_FACT`` + name, from targets that read budgets): when some budget
        allows fewer disruptions than it covers pods of the drain, or a pod is covered by more than
        one budget (the Eviction API refuses to evict it), no pod of the drain is evicted. A read
        that fails, or a plan already too old (each move says so itself), leaves the drain to each
        move's own checks. The moves of other nodes' pods made for a drain (``frees_node``) are not
        made when it is refused, nor when one of its own moves was not made (``cut_short``): the
        node is not freed, and they were chosen for the state after it."""
        node = drain_step_node(move)
        if not node:
            return ""
        if node not in drains:
            drains[node] = self._drain_check(plan, node, now)
        refused = drains[node]
        if drained_node(move) == node:
            return refused and f"the drain of {node} {refused}, so none of its pods is evicted this plan"
        # a move of another node's pod, made for this drain (so that freeing it adds no pair)
        if refused:
            return (
                f"the drain of {node} this move is made for {refused}, so none of its pods, nor this one, is "
                "evicted this plan"
            )
        if cut_short.get(node):
            return (
                f"this move is made for the drain of {node}, which this plan does not complete: {cut_short[node]}; "
                f"so {node} is not freed and this pod stays"
            )
        return ""

    # -- drain fences ---------------------------------------------------------------------------
    def _fence_drains(self, plan: Plan, now: float, fences: dict[str, bool], notes: dict[str, str]) -> None:
        """Before the plan's first write (the leader, not a dry run, fences on): fence each node the
        plan drains whose drain may start now (``_drain_check``, also for a drain of one pod), for
        ``drain_fence_s`` on the wall clock (targets with ``fence_node``). The plan's scale-ups are
        written before its moves, so a fence set at the first eviction let the plan's own new pods
        land on the node being freed (a review of 2026-12-07). The drain is checked again at its
        first eviction, as without fences: the budgets may change while the plan's other writes are
        made (a second review). ``notes`` gets what the first move made of each drain adds to its
        outcome; a fence that cannot be set is said there and in the log, and the drain goes on
        without it. Nothing is fenced for a plan already too old (each move is skipped as such), nor
        after the Lease is found lost (asked again right before the first fence)."""
        fence = getattr(self.target, "fence_node", None)
        if fence is None or self.drain_fence_s <= 0:
            return
        if too_old(plan.created_at, self.clock() if self.clock is not None else now, self.config):
            return
        nodes = dict.fromkeys(
            node
            for a in plan.actions
            if isinstance(a, MovePod) and not a.is_noop and a.target not in self.held and (node := drained_node(a))
        )
        asked = False
        for node in nodes:
            if self._drain_check(plan, node, now, single=True):
                continue  # refused now: none of its pods is evicted (said by its moves)
            if not asked:
                asked = True
                if self.is_leader is not None and not self.is_leader(now):
                    return  # each move says so
            until = self.fence_clock() + self.drain_fence_s
            try:
                with self._io():
                    fence(node, until)
            except Exception as exc:  # noqa: BLE001 - a fence not set never stops the plan
                # An unclear failure (no answer, a 5xx) may have landed: tried to lift like a fence set
                # if the drain is not completed (``unfence_node`` finds none when it did not land).
                fences[node] = not (isinstance(exc, ActuationError) and exc.status is not None and exc.status < 500)
                log.warning(
                    "drain_fence_failed: node %s is drained without a fence: %s",
                    node,
                    exc,
                    extra={"event": "drain_fence_failed", "node": node},
                )
                notes[node] = f"{node} is not fenced ({exc}), so new pods may still be scheduled there"
                continue
            fences[node] = True
            log.info(
                "drain_fence_set: node %s until %s",
                node,
                _iso(until),
                extra={"event": "drain_fence_set", "node": node, "until": _iso(until)},
            )
            notes[node] = (
                f"{node} fenced until {_iso(until)} (taint {FENCE_SHOWN}), so that no new pod is scheduled there"
            )

    def _unfence_unfinished(
        self, plan: Plan, done: Sequence[ActionResult | None], fences: Mapping[str, bool], cut_short: Mapping[str, str]
    ) -> None:
        """After a plan's moves: lift the fence of each node this plan fenced whose drain was not
        completed (the node stays; its fence would only keep pods off it). A drain is completed when
        each of its own moves was applied or its pod is no longer on the node (deleted since the
        plan, a scale-down of the same plan: read again). A lift that fails is tried again after the
        plan's writes and at each plan after (``KubernetesTarget.unfence_node``)."""
        unfence = getattr(self.target, "unfence_node", None)
        for node in [n for n, ok in fences.items() if ok]:
            left = [
                a
                for a, r in zip(plan.actions, done, strict=True)
                if isinstance(a, MovePod)
                and drained_node(a) == node
                and not (r is not None and (r.outcome == "applied" or r.cause == "gone"))
            ]
            if unfence is None or all(self._pod_gone(a) for a in left):
                continue
            why = cut_short.get(node) or "the plan stopped before its moves were made"
            try:
                with self._io():
                    lifted = unfence(node)
            except Exception as exc:  # noqa: BLE001 - tried again (``unfence_node``, ``_lift_fences``)
                log.warning(
                    "drain_fence_lift_failed: node %s stays fenced for now, tried again (%s); its drain was "
                    "not completed: %s",
                    node,
                    exc,
                    why,
                    extra={"event": "drain_fence_lift_failed", "node": node},
                )
                continue
            if not lifted:  # the node is gone, or someone lifted it already
                continue
            log.info(
                "drain_fence_lifted: node %s, its drain was not completed: %s",
                node,
                why,
                extra={"event": "drain_fence_lifted", "node": node},
            )

    def _pod_gone(self, move: MovePod) -> bool:
        """Whether the pod of ``move`` is no longer on its node (deleted: 404, moved, terminating);
        False when it is there or cannot be read."""
        try:
            with self._io():
                return _pod_left(self.target.live(move))
        except ActuationError as exc:
            return exc.status == 404
        except Exception:  # noqa: BLE001 - not known: the node is taken to stay
            return False

    def _lift_fences(self) -> None:
        """After a plan's writes (the leader, not a dry run; ``lift_fences`` or fences on): the
        fences whose time is over are lifted, and those whose lift failed before
        (``KubernetesTarget.lift_expired_fences``; it logs each)."""
        lift = getattr(self.target, "lift_expired_fences", None)
        if lift is not None and self._handles_fences:
            try:
                lift(self.fence_clock())
            except Exception as exc:  # noqa: BLE001 - the plan is applied; tried again at the next one
                log.warning(
                    "drain_fence_lift_failed: lifting the fences whose time is over failed: %s",
                    exc,
                    extra={"event": "drain_fence_lift_failed"},
                )

    @property
    def _handles_fences(self) -> bool:
        """Whether this actuator sets drain fences or lifts them (the daemon): else it neither lifts
        nor reports any (``run --once``/``--ticks``, shards other than 0)."""
        return self.lift_fences or self.drain_fence_s > 0

    def lift_fences_without_a_plan(self, now: float) -> bool:
        """A tick whose cycle failed before its plan's writes (a database gone, an error): the fences
        whose time is over are lifted all the same, as after a plan's writes (``_lift_fences``).
        Until 2026-12-07 a fence stayed for as long as the cycles failed. Not while nothing may be
        written (``stop_reason``: the kill switch, paused, not the leader). Returns whether it tried.
        """
        if not self._handles_fences:
            return False
        due = getattr(self.target, "fence_work_due", None)
        # nothing to lift: no request at all (not even the kill switch's), as during an outage
        if not callable(due) or not due(self.fence_clock()) or self._stop_reason(now):
            return False
        self._lift_fences()
        return True

    def known_fences(self) -> dict[str, float]:
        """The drain fences the target knows (node -> until, wall clock), for the metric; none when
        this actuator neither sets nor lifts fences (``run --once``/``--ticks``, shards other than 0)."""
        fences = getattr(self.target, "fences", None)
        if not self._handles_fences or not callable(fences):
            return {}
        known = fences(self.fence_clock())
        return dict(known) if isinstance(known, dict) else {}

    def _drain_check(self, plan: Plan, node: str, now: float, single: bool = False) -> str:
        """``_drain_refusal``'s check of the drain of ``node``: "" when it may go on, else why not
        ("(2 moves) is not started: ...", the rest of the sentence told by the caller). A drain of
        one move is left to that move's own check, unless ``single`` (whether to fence its node)."""
        # its own moves and the moves of other nodes' pods made for it: every eviction of the step counts
        group = [a for a in plan.actions if isinstance(a, MovePod) and not a.is_noop and drain_step_node(a) == node]
        if len(group) < (1 if single else 2) or too_old(
            plan.created_at, self.clock() if self.clock is not None else now, self.config
        ):
            return ""
        covered: dict[str, list[str]] = {}
        allowed: dict[str, int] = {}
        shared: list[str] = []  # pods more than one budget covers
        for m in group:
            try:
                with self._io():
                    live = self.target.live(m)
            except Exception as exc:  # noqa: BLE001 - each move's own read and checks decide then
                if isinstance(exc, ActuationError) and exc.status == 404:
                    continue  # deleted since the plan: nothing to evict, the node may still be freed
                log.warning(
                    "drain of %s: reading %s/%s before its first eviction failed: %s", node, m.namespace, m.pod, exc
                )
                return ""
            if not live.value:  # no longer on the node: nothing to evict
                continue
            budgets = [k for k in (live.facts or {}) if k.startswith(PDB_FACT)]
            if len(budgets) > 1:
                shared.append(f"{m.namespace}/{m.pod} ({', '.join(sorted(k[len(PDB_FACT) :] for k in budgets))})")
            for key in budgets:
                budget = f"{m.namespace}/{key[len(PDB_FACT) :]}"
                covered.setdefault(budget, []).append(f"{m.namespace}/{m.pod}")
                allowed[budget] = (live.facts or {})[key]
        short = sorted(b for b, pods in covered.items() if len(pods) > allowed[b])
        if not short and not shared:
            return ""
        why = "; ".join(
            [
                f"PodDisruptionBudget {b} allows {allowed[b]} disruption{'s' if allowed[b] != 1 else ''} now and "
                f"covers {len(covered[b])} of its pods ({', '.join(covered[b])})"
                for b in short
            ]
            + [
                f"pod {p} is covered by more than one PodDisruptionBudget, which the Eviction API refuses"
                for p in shared
            ]
        )
        return f"({len(group)} moves) is not started: {why}; evicting only some would not free {node}"

    def _landed(self, action: Action, value: int, exc: ActuationError) -> LiveObject | None:
        """After a write that got no answer (a timeout: it may have landed), the object read again if
        it shows ``value``; None otherwise (another error, a read that fails, another value). Pod
        moves are settled by their own re-read (``actuator.kubernetes``)."""
        if isinstance(action, MovePod) or exc.outcome != "failed" or exc.status is not None:
            return None
        try:
            again = self.target.live(action)
        except (ActuationError, ValueError):
            return None
        return again if again.value == value else None

    # -- steering -------------------------------------------------------------------------------
    def _record_steer(self, action: Action, live: LiveObject, now: float) -> tuple[int, str] | None:
        """Before evicting a controller-owned pod: record where its replacement should go."""
        if not isinstance(action, MovePod) or self.store is None or not self.steer_ttl_s or live.owner is None:
            return None
        kind, name = live.owner
        if kind not in STEERABLE_OWNERS:
            return None
        sid = self.store.add_steer(action.namespace, kind, name, action.pod, action.to_node, now, self.steer_ttl_s)
        return sid, (
            f"the replacement from {kind} {name} is steered to {action.to_node} "
            f"(steer {sid}, until {_iso(now + self.steer_ttl_s)})"
        )

    def report_steers(self, now: float) -> list[StoredSteer]:
        """Expire steers no new pod consumed in time, log each (a move that did not land), return them."""
        if self.store is None or not self.steer_ttl_s:
            return []
        expired = self.store.expire_steers(now)
        for st in expired:
            log.warning(
                "pod steer %d expired unused: no new pod of %s %s/%s was created by %s, so the move of %s "
                "to %s was not steered (the controller may not have replaced it yet, or the webhook is not "
                "reached: see docs/actuator.md#steering)",
                st.id,
                st.owner_kind,
                st.namespace,
                st.owner_name,
                _iso(st.expires_at),
                st.evicted_pod,
                st.node,
                extra={"event": "steer_expired", "steer_id": st.id},
            )
        return expired

    def _human_edit(self, action: Action, live: LiveObject, now: float, record: bool) -> str:
        """A non-empty reason while a human edit of the field is respected."""
        if self.store is None or isinstance(action, MovePod):
            return ""
        mf = self._managed(live.target)
        if mf is not None and mf.uid and live.uid and mf.uid != live.uid:
            # Deleted and created again under the same name (a re-install, a GitOps prune and sync):
            # a new object, whose value is its own, not an edit of scaleahead's. The record starts
            # anew: the next write records this value as the field's original.
            if record:
                self.store.forget_managed_field(live.target)
                log.info(
                    "%s was re-created (UID %s, was %s): its %s %s is its own, not an edit; managed from it",
                    live.target,
                    live.uid,
                    mf.uid,
                    live.field,
                    "unset" if live.fact("unset") else live.value,
                    extra={"event": "target_recreated", "target": live.target},
                )
            return ""
        if mf is not None and not mf.uid and live.uid and record:
            self.store.set_managed_uid(live.target, live.uid)
        if mf is not None and mf.resource_version == "":
            # An intent written before intents carried the field's previous value: its outcome is
            # unknown (timeout, crash), so no claim about anyone's edit. If the live object shows
            # it, it landed: confirm it with the live version.
            if live.value == mf.value and record:
                self.store.set_managed_field(
                    live.target, live.field, live.value, live.resource_version, mf.written_at, written=True
                )
            return ""
        pending = parse_intent(mf.resource_version) if mf is not None else None
        if mf is not None and pending is not None:
            intended, before_version = pending
            if live.value == intended:  # it landed: confirm it with the live version
                if record:
                    version = live.resource_version
                    self.store.set_managed_field(
                        live.target, live.field, intended, version, mf.written_at, written=True
                    )
                return ""
            # It did not land (or was changed since): the field as it was before the write is the
            # baseline, and a value other than that is someone else's edit.
            if record:
                self.store.set_managed_field(live.target, live.field, mf.value, before_version, mf.written_at)
            mf = replace(mf, resource_version=before_version, human_value=None, human_seen_at=None)
        if mf is None:
            return ""
        hold_s = self.config.human_edit_hold_s
        if live.value == mf.value or live.resource_version == mf.resource_version:
            if record and mf.editor_reverts and pending is None and now - mf.written_at >= hold_s:
                # scaleahead's write has stood a whole hold: whoever undid it before stopped doing so
                self.store.reset_editor(live.target)
            return ""
        seen = mf.human_seen_at
        editor, reverts = mf.editor, mf.editor_reverts
        if seen is None or mf.human_value != live.value:
            if record:
                with self._io():  # a GET of the whole object: the other namespaces' workers go on
                    named = self._field_manager(action)
                if seen is None:  # the first edit since scaleahead's write: it undid that write
                    reverts = reverts + 1 if named and named == editor else 1
                elif named != (editor or ""):
                    reverts = 1
                editor = named or None
                self.store.set_human_edit(live.target, live.value, now, editor, reverts)
                log.warning(
                    "human edit: %s %s set to %d by %s (scaleahead had set %d); respected for %.0f s",
                    live.target,
                    live.field,
                    live.value,
                    editor or "someone else",
                    mf.value,
                    self._hold_s(editor, reverts),
                    extra={
                        "event": "human_edit",
                        "target": live.target,
                        "field_manager": editor or "",
                        "hold_s": self._hold_s(editor, reverts),
                    },
                )
                if editor and reverts == 2:
                    self._warn_co_writer(live, mf.value, editor, now + self._hold_s(editor, reverts))
            seen = now
        until = seen + self._hold_s(editor, reverts)
        if now < until:
            co = ""
            self.held_for[action.workload.key] = "co_writer" if editor and reverts >= 2 else "human_edit"
            if editor and reverts >= 2:
                co = (
                    f"; {editor} has undone {reverts} of scaleahead's writes in a row: {CO_WRITER}, "
                    "left alone for twice as long after each (at most a day; docs/actuator.md, "
                    '"GitOps tools and other writers")'
                )
            return (
                f"human edit: {live.target} {live.field} was set to {live.value} by {editor or 'someone else'} "
                f"(scaleahead had set {mf.value}){co}; respected until {_iso(until)}, the plan wanted "
                f"{desired_value(action)}"
            )
        return ""

    #: The longest a persistent co-writer's field is left alone before scaleahead writes it again.
    CO_WRITER_MAX_HOLD_S = 86_400.0

    def _hold_s(self, editor: str | None, reverts: int) -> float:
        """How long an edit is respected: ``human_edit_hold_s``; a writer named by the object's
        managedFields that undid scaleahead's writes ``reverts`` >= 2 times in a row (a persistent
        co-writer), twice as long after each, up to a day (or the hold, if longer)."""
        hold = self.config.human_edit_hold_s
        if not editor or reverts < 2:
            return hold
        return min(hold * 2.0 ** (reverts - 1), max(hold, self.CO_WRITER_MAX_HOLD_S))

    def _field_manager(self, action: Action) -> str:
        """The writer of the field as the object's managedFields name it (``""``: not known, or scaleahead)."""
        ask = getattr(self.target, "field_manager", None)
        name = ask(action) if ask is not None else ""
        return "" if not isinstance(name, str) or name == FIELD_MANAGER else name

    def _warn_co_writer(self, live: LiveObject, ours: int, editor: str, until: float) -> None:
        """Say once, with what to do, that ``editor`` keeps undoing scaleahead's writes to the field."""
        pointer = {"spec.replicas": "/spec/replicas", "spec.minReplicas": "/spec/minReplicas"}.get(live.field, "")
        if not pointer:  # a Knative annotation, in the spelling the Service uses: "...annotations[KEY]"
            key = live.field.partition("[")[2].rstrip("]") or "autoscaling.knative.dev/min-scale"
            pointer = "/spec/template/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
        log.warning(
            "%s %s: %s has undone scaleahead's write twice in a row (it sets %d, scaleahead had set %d): a "
            "persistent co-writer, such as a GitOps tool's self-heal or an operator (KEDA). scaleahead leaves "
            "the field to it and writes again only at %s, then after twice as long each time it is undone (at "
            "most a day). To let scaleahead manage the field, stop the other writer from setting it: Argo CD: "
            "ignoreDifferences on %s with syncOptions RespectIgnoreDifferences=true; Flux: remove %s from the "
            "manifest in Git; KEDA: set the ScaledObject's minReplicaCount instead of a floor on KEDA's HPA (or "
            "drop the ScaledObject and let scaleahead use mode floor on your own HPA); else remove this policy "
            '(docs/actuator.md, "GitOps tools and other writers")',
            live.target,
            live.field,
            editor,
            live.value,
            ours,
            _iso(until),
            pointer,
            live.field,
            extra={"event": "co_writer", "target": live.target, "field_manager": editor},
        )

    # -- removed policies -----------------------------------------------------------------------
    #: Kinds whose managed field holds capacity only scaleahead asked for: a Knative Service's
    #: ``min-scale`` (warm instances kept while nothing calls). A Deployment's replicas are its own:
    #: they stay as they are when its policy goes. (Headroom placeholders are no policy's target:
    #: they are released by a plan that scales them, ``scaleahead plan --apply``.)
    RELEASED_KINDS = ("KnativeService",)

    def release(
        self, targets: Sequence[str], now: float, dry_run: bool = False, budget_s: float | None = None
    ) -> list[ActionResult]:
        """Give back the warm instances scaleahead holds for functions that no longer have a policy
        (``targets``: ``KnativeService/namespace/name``; other kinds are ignored): their min-scale
        goes back to what it was before scaleahead first wrote it (the record's original; a Service
        that had none loses the annotation, so the platform's default applies; a record from before
        migration ``0008_original``, whose original is unknown: 0). One plan through the journal and
        the safety layer like any action (reason ``policy_removed``, source ``release``), and only
        where the live value is the one scaleahead last *confirmed* writing (``written_value``, or a
        pending write seen landed). A value someone else set since, a write that never landed (the
        record then holds the value from before it), or a Service that is gone: left as it is. The
        record is dropped once the Service is released or left (not in a dry run): the function is no
        longer scaleahead's. Needs a store; without one, nothing is released. ``budget_s``: once that
        much time went on reading, the targets not read yet are left for a later call. Returns the
        results of the targets looked at.

        A record from before migration ``0007_written`` has no confirmed write: the journal's last
        applied action on the Service stands for it when it set the value the Service holds."""
        if self.store is None:
            return []
        results: list[ActionResult] = []
        actions: list[Action] = []
        started = time.monotonic()
        for key in targets:
            if budget_s is not None and time.monotonic() - started > budget_s:
                break
            mf = self.store.managed_field(key)
            ref = WorkloadRef.parse(key)
            if mf is None or ref.kind not in self.RELEASED_KINDS:
                continue
            restore = mf.original_value if mf.original_recorded else 0
            back = (
                "its value before scaleahead managed it"
                if mf.original_recorded
                else "0 (its value before scaleahead managed it was not recorded)"
            )
            to_text = f"{restore}, {back}" if restore is not None else "unset (it had no min-scale before scaleahead)"
            why = (
                f"release {ref.namespace}/{ref.name}: its policy was removed, so nothing plans it any more; "
                "its min-scale goes back from {live} (the value scaleahead set) to " + to_text
            )
            probe = SetWarmPool(ref, mf.value, restore or 0, 0.0, Reason("policy_removed", why.format(live=mf.value)))
            try:
                live = self.target.live(probe)
            except ActuationError as exc:
                if exc.status != 404:
                    failed = ActionResult(probe, "skipped" if exc.outcome == "skipped" else "failed", exc.message)
                    results.append(failed)
                    continue  # tried again at a later check
                live = LiveObject(key, mf.field, 0, "", {"missing": 1})
            ours = mf.written_value
            if ours is None:  # recorded before 0007_written: the journal's last applied write, if it set this
                last = self.store.actions(state="applied", limit=1, target=key)
                if last and _whole(last[0].to_value) == live.value:
                    ours = live.value
            pending = parse_intent(mf.resource_version)
            if pending is not None and live.value == pending[0]:
                ours = pending[0]  # the write whose answer was lost did land
            if live.fact("missing") or ours is None or live.value != ours:
                if live.fact("missing"):
                    detail = f"{key} no longer exists"
                elif ours is None:
                    detail = f"{key} {mf.field} is {live.value}, a value scaleahead has no confirmed write of"
                else:
                    detail = f"{key} {mf.field} is {live.value}, not the {ours} scaleahead set: someone else set it"
                if not dry_run:
                    self.store.forget_managed_field(key)
                log.info("not released: %s; left as it is", detail, extra={"event": "release_skipped", "target": key})
                results.append(ActionResult(probe, "skipped", detail + "; left as it is"))
                continue
            if restore is None and not live.fact("unset"):
                actions.append(
                    SetWarmPool(
                        ref,
                        live.value,
                        0,
                        0.0,
                        Reason("policy_removed", why.format(live=live.value)),
                        restore_default=True,
                    )
                )
            elif restore is not None and live.value != restore:
                actions.append(
                    SetWarmPool(ref, live.value, restore, 0.0, Reason("policy_removed", why.format(live=live.value)))
                )
            elif not dry_run:  # already as it was before scaleahead: nothing to write
                self.store.forget_managed_field(key)
        if actions:
            done = self.apply_plan(Plan(now, tuple(actions)), now, dry_run=dry_run, source="release")
            for res in done:
                if res.outcome == "applied":
                    self.store.forget_managed_field(res.action.target)
            results.extend(done)
        return results

    def _written_after(self, row: StoredAction) -> StoredAction | None:
        """The newest action on ``row``'s workload journaled after it that may have written
        (``applied``, or ``failed``: a write whose answer was lost may have landed), if any; the
        caller checks that a write was recorded on the object since."""
        assert self.store is not None
        newest = [
            found[0]
            for state in ("applied", "failed")
            if (found := self.store.actions(state=state, target=row.target, limit=1)) and found[0].id > row.id
        ]
        return max(newest, key=lambda a: a.id) if newest else None

    def stop_reason(self, now: float) -> str:
        """Why nothing may be written now (kill switch, paused, not the leader), or ``""``."""
        return self._stop_reason(now)

    # -- recovery -------------------------------------------------------------------------------
    def reconcile(
        self, now: float, owns: Callable[[StoredAction], bool] | None = None, budget_s: float | None = None
    ) -> list[tuple[int, str, str]]:
        """Mark actions left ``planned`` (a crash between journal and API call) from the live objects.

        Only the Lease holder may call this (a standby would rewrite what the leader is applying);
        ``owns`` keeps it to this process's actions (its shard's), and a row another process
        journaled meanwhile is left as that process wrote it. Returns ``(action id, new state,
        reason)`` per action reconciled; an action whose object cannot be read now (a 5xx, a
        timeout, a proxy's answer) is returned as ``"planned"`` with a reason starting with
        ``UNRESOLVED`` and its row is left planned, for the next reconcile. So are the rows not
        reached: once ``budget_s`` seconds have gone by (each read may wait a request timeout; at
        least one row is read), or once this replica no longer holds the Lease (``is_leader``,
        asked before each row).
        """
        if self.store is None:
            return []
        store = self.store
        done: list[tuple[int, str, str]] = []
        rows = [r for r in store.actions(state="planned", limit=100_000) if owns is None or owns(r)]
        # A row's new state is written with the next few hundred rows' in one transaction (each
        # row's was a transaction of its own until 2026-12-06). Its field record is still read
        # when the row is decided: `actuator reconcile` and `plan --apply` run without the Lease
        # and may write records meanwhile (an audit found a record read 200 rows ahead stale).
        pending: list[tuple[int, str, str]] = []

        def flush() -> None:
            if pending:
                written = store.set_action_states_from(pending, now, only_from="planned")
                lost = {aid for aid, _, _ in pending if aid not in written}  # journaled meanwhile by another
                pending.clear()
                if lost:
                    done[:] = [d for d in done if d[0] not in lost]

        def settle(aid: int, state: str, reason: str) -> None:
            pending.append((aid, state, reason))
            done.append((aid, state, reason))
            if len(pending) >= RECONCILE_BATCH:
                flush()

        started = time.monotonic()
        try:
            self._reconcile_rows(rows, now, budget_s, started, done, settle, flush)
        except BaseException:
            # the states decided before the error are still written; if that fails too, the error
            # raised is the first one (the rows stay planned, for the next reconcile)
            try:
                flush()
            except Exception:  # noqa: BLE001 - the first error is the one to report
                log.warning("journal: the states of %d reconciled action(s) were not written", len(pending))
            raise
        flush()
        return done

    def _reconcile_rows(
        self,
        rows: list[StoredAction],
        now: float,
        budget_s: float | None,
        started: float,
        done: list[tuple[int, str, str]],
        settle: Callable[[int, str, str], None],
        flush: Callable[[], None],
    ) -> None:
        """``reconcile``'s loop over ``rows``: each row's new state goes to ``settle`` (written in
        batches by ``flush``), an unresolved one straight to ``done``. With ``concurrent_writes``
        of N >= 2 and a target that declares ``concurrent_io``, the objects of the next N rows are
        read at once (a read changes nothing; the rows are still decided one by one, in order):
        until 2026-12-06 one at a time, 65 s for 10,000 rows with answers taking 5 ms."""
        workers = max(1, int(self.config.concurrent_writes))
        pool = None
        if workers >= 2 and getattr(self.target, "concurrent_io", False):
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scaleahead-reconcile")
        try:
            assert self.store is not None
            reads: dict[int, Future[tuple[Action, LiveObject]]] = {}
            for k, row in enumerate(rows):
                stop = ""
                if k and budget_s is not None and time.monotonic() - started >= budget_s:
                    stop = f"not reached within this reconcile's {budget_s:g} s (slow reads); tried again"
                elif self.is_leader is not None and not self.is_leader(now):
                    stop = "not reached: this replica no longer holds the lease; the leader reconciles it"
                if stop:
                    done.extend((r.id, "planned", f"{UNRESOLVED}: {stop}") for r in rows[k:])
                    break
                if pool is not None:  # this row's read and the next ones', ``workers`` at a time
                    for j in range(k, min(k + workers, len(rows))):
                        if j not in reads:
                            reads[j] = pool.submit(self._read_live, rows[j])
                try:
                    action, live = reads.pop(k).result() if pool is not None else self._read_live(row)
                except (ActuationError, ValueError) as exc:
                    msg = exc.message if isinstance(exc, ActuationError) else str(exc)
                    state, reason = "skipped", f"reconciled after restart: cannot read the object ({msg})"
                    if row.kind == "MovePod" and isinstance(exc, ActuationError) and exc.status == 404:
                        # The move's aim holds; who removed the pod is not known (loop reasons audit:
                        # "evicted before the restart" was said of a pod someone else deleted).
                        state, reason = "applied", f"reconciled after restart: the pod is gone; {_NO_MOVE_INTENT}"
                    elif (
                        isinstance(exc, ActuationError)
                        and exc.outcome == "failed"
                        and (exc.status is None or exc.status == 429 or exc.status >= 500)
                    ):
                        # No answer about the object (a 5xx, a 429, a timeout, a proxy's page): the write
                        # may have landed or not, and nothing looks again at a row closed now. It stays
                        # planned. A 4xx (the object is gone, no permission) still closes it.
                        msg = msg.removesuffix("; retried next cycle")
                        done.append((row.id, "planned", f"{UNRESOLVED}: cannot read the object ({msg})"))
                        continue
                else:
                    mf = None
                    if not isinstance(action, MovePod):
                        mf = self.store.managed_field(live.target)
                    # A write to this object recorded after the row's own cycle (its intent is stamped with
                    # the row's journal time), by a later action (the row stayed unresolved while the
                    # leader went on): the field's record and the live value are that action's.
                    later = None
                    if mf is not None and mf.written_at > row.updated_at:
                        flush()  # the newer rows' states decided so far, which it reads
                        later = self._written_after(row)
                    if later is not None:
                        state = "skipped"
                        reason = (
                            f"reconciled: superseded by action {later.id} ({later.from_value} -> {later.to_value}, "
                            f"{later.state}) on the same workload since; {live.target} shows {live.field}="
                            f"{live.value} now, which says nothing about this action's own write"
                        )
                        settle(row.id, state, reason)
                        continue
                    # What was written may be less than the plan's value (a step limit, a bound): the
                    # actuator's record of the field says what it wrote since the action was journaled.
                    written = {desired_value(action)}
                    # Every write is preceded by a write-ahead intent on the field's record, stamped at
                    # or after the row's journal time. With none since, this process never got to the
                    # write: a live value equal to the plan's is someone else's (or was there already).
                    since = mf is not None and mf.written_at >= row.updated_at
                    attempted = isinstance(action, MovePod) or since
                    if mf is not None and since:
                        pending = parse_intent(mf.resource_version)
                        written.add(pending[0] if pending is not None else mf.value)
                    # A pod move journaled with its pod's UID: a pod re-created under the same name (a
                    # StatefulSet's) reads as not on the from node (the planned pod is gone: applied).
                    # Journaled without one (an older row, a pod without a UID): such a pod back on the
                    # from node counts as not moved; skipped, the next plan decides.
                    moved = not live.value if isinstance(action, MovePod) else live.value in written
                    if moved and not attempted:
                        state = "skipped"
                        reason = (
                            f"reconciled after restart: the live object shows {live.field}={live.value}, but "
                            "scaleahead recorded no write of it before the restart (someone else's change, or "
                            "the value was there already); the next plan decides again"
                        )
                    elif moved and isinstance(action, MovePod):
                        state = "applied"
                        reason = (
                            f"reconciled after restart: pod {action.namespace}/{action.pod} is no longer on "
                            f"{action.from_node} ({_where_now(action, live)}); {_NO_MOVE_INTENT}"
                        )
                    elif moved:
                        state = "applied"
                        reason = (
                            f"reconciled after restart: the live object shows the change ({live.field}={live.value})"
                        )
                        if not isinstance(action, MovePod):
                            self.store.set_managed_field(
                                live.target, live.field, live.value, live.resource_version, now, written=True
                            )
                    else:
                        state = "skipped"
                        was = (
                            f"pod {action.namespace}/{action.pod} is still on {action.from_node}"
                            if isinstance(action, MovePod)
                            else f"{live.field}={live.value}"
                        )
                        reason = (
                            f"reconciled after restart: not applied before the restart ({was}); "
                            "the next plan decides again"
                        )
                settle(row.id, state, reason)
        finally:
            if pool is not None:  # reads not started are dropped; one in flight is waited for (its timeout)
                pool.shutdown(wait=True, cancel_futures=True)

    def _read_live(self, row: StoredAction) -> tuple[Action, LiveObject]:
        """The row's action and its object's field as it is now (``reconcile``): only the field's
        value decides here, no quota room (before 2026-12-06 each row's scale-up listed its
        namespace's ResourceQuotas and LimitRanges too)."""
        action = action_from_journal(row)
        return action, self.target.live(action, quota_room=False)
