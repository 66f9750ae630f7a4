"""Leader election with a ``coordination.k8s.io/v1`` Lease, so two replicas never act at once
(docs/actuator.md, "Editing the Lease by hand", says the few exceptions).

The rule (client-go's leaderelection, simplified): a replica acts only while it holds the Lease
and its last renewal is younger than its ``lease_duration_s``. Each cycle it renews, writing the
whole election record (its own ``leaseDurationSeconds`` too, so a duration edited by hand does not
stay); a follower takes the Lease over once the election record has not changed for a whole lease
duration (the longer of its own and the record's) *on the follower's own clock*: from when it
first saw the current record (holder, renewTime and the rest of the spec; not the
resourceVersion, which a label write changes), as client-go does, not from the ``renewTime`` the
holder wrote, so a follower whose clock runs ahead of the holder's cannot take over early. On a
process's first read only, a record renewed more than a lease duration ago counts as seen then
(``first_seen_at``). Every write carries the Lease's ``resourceVersion``, so of two replicas
racing for an expired Lease exactly one wins (the other gets 409 and follows).

A holder acts on a renewal for up to a lease duration without reading the Lease again, so a
change it did not make (a Lease deleted, its holder cleared or set to another replica by hand)
is acted on only once it has stood for a lease duration: a deleted Lease is created again, an
emptied holder taken over, a replica named holder starts acting, each that long after it first
saw the change. Only a graceful ``release`` (no holder, ``leaseDurationSeconds`` 1, as client-go's
``ReleaseOnCancel``) is taken over at once; until 2026-12-06 a deleted or emptied Lease was too.

Two clocks, as in client-go: the wall clock (``now``, epoch seconds, passed in) only stamps the
``renewTime`` and ``acquireTime`` written into the Lease; every duration (the follower's wait, the
holder's lease end) is measured on a monotonic clock (``monotonic``, ``time.monotonic`` by default,
the virtual clock in a virtual run), so a wall clock stepped by NTP or by hand neither lets a
follower take a live holder's Lease early nor lets a holder go on writing after its Lease ran out.
Until 2026-12-05 both were on the wall clock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

MERGE = "application/merge-patch+json"
Step = Literal["create", "renew", "takeover", "follow"]
#: The ``leaseDurationSeconds`` a graceful release writes with an empty holder (client-go's
#: ``ReleaseOnCancel`` writes the same): the mark that the holder stopped acting before it let go.
RELEASED_DURATION_S = 1


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    duration_s: float
    renew_time: float
    acquire_time: float
    transitions: int
    resource_version: str


def micro_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> float:
    if not text:
        return float("-inf")
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def decide(
    record: LeaseRecord | None, identity: str, now: float, observed_at: float, lease_duration_s: float = 0.0
) -> Step:
    """What ``identity`` should do with the Lease at ``now`` (pure): ``observed_at`` is when it
    first saw this election record, on the same clock as ``now`` (the replica's monotonic clock).
    ``lease_duration_s`` is the replica's own lease duration: a holder is taken over only after
    the longer of it and the record's ``leaseDurationSeconds`` (a duration shortened by hand does
    not shorten the wait: the holder acts for its own duration after each renewal).

    A Lease that is missing (``record`` None) is created, and one with no holder is taken over,
    only after the same wait (``observed_at`` is then when it was first seen missing or empty):
    its holder may have been removed by hand (``kubectl delete lease``, or ``holderIdentity``
    cleared) while it still acts on its last renewal. A Lease released the way ``release`` does it
    (no holder, ``leaseDurationSeconds`` 1) is taken over at once: its holder stopped first."""
    if record is None:
        return "create" if now >= observed_at + lease_duration_s else "follow"
    if record.holder == identity:
        return "renew"
    if released(record) or now >= observed_at + max(record.duration_s, lease_duration_s):
        return "takeover"
    return "follow"


def released(record: LeaseRecord) -> bool:
    """Whether ``record`` is a graceful release: no holder and ``leaseDurationSeconds`` 1, as
    ``release`` writes it (a holder cleared by hand keeps its duration)."""
    return not record.holder and record.duration_s == RELEASED_DURATION_S


def first_seen_at(record: LeaseRecord, now: float, first_read: bool) -> float:
    """When, on this replica's wall clock (``now``), to count ``record`` as seen: ``now``, except
    on this process's first read of the Lease, where a record whose ``renewTime`` lies more than a lease
    duration in the past counts as seen a lease duration after it. A process that reads the Lease
    once (``run --once``) or starts beside a long-dead holder could otherwise never take it over.
    Safe against clock skew up to a lease duration (a follower whose clock runs further ahead
    could take over a live holder's Lease; the default 15 s is far above NTP's skew)."""
    if not first_read:
        return now
    return min(now, record.renew_time + record.duration_s)


def _record(obj: dict[str, Any]) -> LeaseRecord:
    spec = obj.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        duration_s=float(spec.get("leaseDurationSeconds") or 15),
        renew_time=parse_time(spec.get("renewTime")),
        acquire_time=parse_time(spec.get("acquireTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
    )


class LeaderElector:
    """Holds (or follows) the Lease ``namespace/name`` as ``identity``.

    ``is_leader(now)`` renews or acquires the Lease and answers whether this replica may act now.
    Any API error, answer that is not JSON or lost race answers False: when in doubt, do not act.
    ``monotonic`` measures every duration (never the wall clock ``now``, which may step): pass
    the virtual clock's ``now`` when the caller's ``now`` is virtual time.
    """

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        identity: str,
        name: str = "scaleahead-leader",
        lease_duration_s: int = 15,
        timeout_s: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = k8s.CoordinationV1Api(api_client)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration_s = lease_duration_s
        self.timeout_s = timeout_s
        self.last_error = ""
        #: Whether the last ``is_leader`` could not read or write the Lease (the API server unreachable,
        #: refused, or answering nonsense), as opposed to another replica holding it.
        self.lease_failed = False
        self._monotonic = monotonic
        #: When this replica's hold on the Lease ends, on the monotonic clock: a lease duration
        #: after the start of its last successful renewal.
        self._held_until = float("-inf")
        #: The election record last read (holder, renewTime, acquireTime, duration, transitions:
        #: not the resourceVersion, which any label or annotation write changes) and when, on the
        #: monotonic clock, it was first seen: a follower times the holder's silence from there.
        #: An empty tuple: the Lease was missing (404). None: not read yet in this process.
        self._seen: tuple[str, float, float, float, int] | tuple[()] | None = None
        self._seen_at = float("-inf")
        #: The ``leaseDurationSeconds`` of the last record read: how long its holder may act.
        self._seen_duration_s = 0.0
        #: Whether the record names this replica although this replica did not write it (an edit
        #: by hand): it renews only once that record has been unchanged for a lease duration.
        self._named = False

    def _read(self) -> LeaseRecord | None:
        try:
            resp: Any = self.api.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=self.timeout_s
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        obj = json.loads(resp.data)  # a ValueError if not JSON (a proxy's HTML page): not the leader
        if not isinstance(obj, dict):
            raise ValueError(f"the API server's answer is a JSON {type(obj).__name__}, not a Lease")
        return _record(obj)

    def is_leader(self, now: float) -> bool:
        """Renew or acquire the Lease at ``now`` (the wall clock, written into the Lease); whether
        this replica may act for ``leaseDurationSeconds`` from the start of this call, on the
        monotonic clock (minus however long this call took: ``holds``)."""
        started = self._monotonic()
        self.lease_failed = False
        try:
            record = self._read()
            read_at = self._monotonic()
            wait_s = float(self.lease_duration_s)
            if record is not None:
                seen: tuple[str, float, float, float, int] | tuple[()] = (
                    record.holder,
                    record.renew_time,
                    record.acquire_time,
                    record.duration_s,
                    record.transitions,
                )
                if seen != self._seen:
                    # Named holder by a record this replica did not write (the last one it saw
                    # named another, or none): by hand, while that holder may still be acting.
                    self._named = record.holder == self.identity and (
                        self._named or (self._seen is not None and self._seen[:1] != (self.identity,))
                    )
                    # Seen now, or on the first read of a long-unrenewed record earlier: that
                    # offset is the one comparison with the wall clock (first_seen_at).
                    ago = now - first_seen_at(record, now, self._seen is None)
                    self._seen, self._seen_at = seen, read_at - ago
                    self._seen_duration_s = record.duration_s
            else:
                if self._seen != ():
                    # Missing since now; on this process's first read (a new cluster, `run --once`)
                    # since long ago: nothing says a holder is acting, and nothing could tell.
                    self._seen_at = float("-inf") if self._seen is None else read_at
                    self._seen = ()
                # The last holder seen may act for its own duration after its last renewal.
                wait_s = max(wait_s, self._seen_duration_s)
            step = decide(record, self.identity, read_at, self._seen_at, wait_s)
            if step == "renew" and self._named:
                assert record is not None
                wait_s = max(wait_s, record.duration_s)
                if read_at < self._seen_at + wait_s:
                    self._held_until = float("-inf")
                    self.last_error = (
                        f"lease {self.namespace}/{self.name} names this replica, which did not take it: it acts "
                        f"once the record is unchanged for {wait_s:g} s (the last holder may act until then)"
                    )
                    return False
            # The whole election record on every write, as client-go writes it: a renewal keeps
            # acquireTime and leaseTransitions and restores this replica's leaseDurationSeconds, so
            # a duration edited by hand lasts until the next renewal only.
            spec: dict[str, Any] = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.lease_duration_s,
                "renewTime": micro_time(now),
            }
            if step == "follow":
                self._held_until = float("-inf")
                if record is None:
                    self.last_error = (
                        f"lease {self.namespace}/{self.name} was deleted: it is created again once it has been "
                        f"missing for {wait_s:g} s (its last holder may act on its last renewal until then)"
                    )
                elif not record.holder:
                    self.last_error = (
                        f"lease {self.namespace}/{self.name} has no holder but was not released: it is taken "
                        f"over once unchanged for {max(wait_s, record.duration_s):g} s (its last holder may "
                        "act on its last renewal until then)"
                    )
                else:
                    self.last_error = f"lease held by {record.holder}"
                return False
            if step == "create":
                spec |= {"acquireTime": micro_time(now), "leaseTransitions": 0}
                body: Any = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": spec,
                }
                self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self.timeout_s)
            else:
                assert record is not None
                if step == "takeover":
                    spec |= {"acquireTime": micro_time(now), "leaseTransitions": record.transitions + 1}
                else:  # renew: as the holder acquired it (a record without acquireTime keeps none)
                    spec["leaseTransitions"] = record.transitions
                    if record.acquire_time != float("-inf"):
                        spec["acquireTime"] = micro_time(record.acquire_time)
                body = {"metadata": {"resourceVersion": record.resource_version}, "spec": spec}
                self.api.patch_namespaced_lease(
                    self.name, self.namespace, body, _request_timeout=self.timeout_s, _content_type=MERGE
                )
        except (ApiException, HTTPError, ValueError) as exc:  # ValueError: an answer that is not JSON
            self._held_until = float("-inf")
            self.last_error = f"lease {self.namespace}/{self.name}: {getattr(exc, 'status', '')} {exc}".strip()
            self.lease_failed = True
            return False
        # The record just written is the one seen last: a Lease missing at the next read was
        # deleted (by hand), not never made.
        written = spec.get("acquireTime")
        self._seen = (
            self.identity,
            parse_time(spec["renewTime"]),
            parse_time(written) if written else float("-inf"),
            float(self.lease_duration_s),
            int(spec.get("leaseTransitions") or 0),
        )
        self._seen_at, self._seen_duration_s = self._monotonic(), float(self.lease_duration_s)
        self._named = False
        self._held_until = started + self.lease_duration_s
        self.last_error = ""
        return True

    def holds(self, now: float, margin_s: float) -> bool:
        """Whether this replica may write now: held for more than ``margin_s`` more since the last
        renewal (no API call), else renewed now (``is_leader``) and, after the time the renewal
        itself took, still held for more than ``margin_s``.

        The actuator asks before each write; renewing before every write of a large plan would cost
        two API calls a write. ``margin_s`` covers the write's own duration (a request timeout). A
        renewal slow enough to run past the Lease's end (a read and a patch of up to a request
        timeout each) answers False: a follower may have taken the Lease meanwhile. What is left is
        measured on the monotonic clock; ``now`` (the wall clock) is only written into the Lease
        if it is renewed.
        """
        if self._monotonic() + margin_s < self._held_until:
            return True
        if not self.is_leader(now):
            return False
        return self._monotonic() + margin_s < self._held_until

    def release(self, now: float) -> None:
        """Give the Lease up (on shutdown) so a follower takes over at once: no holder and
        ``leaseDurationSeconds`` 1, as client-go's ``ReleaseOnCancel`` writes it, the mark that
        tells a follower this replica stopped acting first (``released``). Stops acting first."""
        self._held_until = float("-inf")
        try:
            record = self._read()
            if record is None or record.holder != self.identity:
                return
            body = {
                "metadata": {"resourceVersion": record.resource_version},
                "spec": {
                    "holderIdentity": "",
                    "leaseDurationSeconds": RELEASED_DURATION_S,
                    "renewTime": micro_time(now),
                    "acquireTime": micro_time(now),
                    "leaseTransitions": record.transitions,
                },
            }
            self.api.patch_namespaced_lease(
                self.name, self.namespace, body, _request_timeout=self.timeout_s, _content_type=MERGE
            )
        except (ApiException, HTTPError, ValueError):
            pass
        self._held_until = float("-inf")
