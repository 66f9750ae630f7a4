"""Steering the replacement of an evicted controller-owned pod to the node the plan chose.

Evicting a pod of a ReplicaSet or StatefulSet makes its controller create a new pod, which the
scheduler places wherever it scores best: often back on the node the move meant to free. So,
just before the eviction, the actuator records a *steer* in storage (owner, planned node, expiry;
``Store.add_steer``), and this module's mutating admission webhook, served by the daemon, adds a
nodeAffinity for the planned node to the first new pod of that owner and consumes the steer
(``Store.consume_steer``, atomic across replicas). docs/adr/0009-steering-evicted-pods.md says
why this mechanism and not another.

The webhook never blocks a pod: whatever goes wrong (a malformed review, the database down, an
unexpected pod shape) it answers ``allowed: true`` without a patch and logs why. The
MutatingWebhookConfiguration (deploy/components/rebalance/webhook.yaml) has ``failurePolicy: Ignore`` too, so a
webhook that is down or slow does not block pods either.

A review's namespace, owner and ``userInfo`` are whatever its sender wrote: only the connection
says who sent it. With a client CA (``serve_webhook(client_ca_file=...)``, the setting
``webhook.client_ca_file``) the server requires a client certificate signed by it, the one the API
server presents from its admission configuration's kubeConfigFile; without one, anyone who can
reach the port can consume another namespace's steer with a forged review (docs/actuator.md,
Steering).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from scaleahead.listen import listen_host, server_class
from storage import Store
from storage.store import StoredSteer

log = logging.getLogger("scaleahead.steering")

Affinity = Literal["required", "preferred"]
#: Annotations the webhook puts on a steered pod (so ``kubectl describe`` shows why it is pinned).
STEERED_TO = "scaleahead.io/steered-to"
STEER_ID = "scaleahead.io/steer-id"
#: The controllers whose pods are steered (a bare pod is re-created bound to the node instead).
STEERABLE_OWNERS = frozenset({"ReplicaSet", "StatefulSet"})
#: The largest AdmissionReview body read (the API server caps objects at about 1.5 MiB).
MAX_BODY = 4 * 1024 * 1024
WEBHOOK_PATH = "/mutate-pods"


def controller_owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, name)`` of the object's controller ownerReference, or None."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("kind") and ref.get("name"):
            return str(ref["kind"]), str(ref["name"])
    return None


def _escape(key: str) -> str:
    """A map key as a JSON Pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _add(ops: list[dict[str, Any]], root: Mapping[str, Any], path: list[str], value: Any) -> None:
    """Add ``value`` at ``path`` under ``root``, creating the missing maps in one operation."""
    node: Any = root
    for i, key in enumerate(path[:-1]):
        child = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(child, Mapping):
            nested: Any = value
            for k in reversed(path[i + 1 :]):
                nested = {k: nested}
            ops.append({"op": "add", "path": "/" + "/".join(_escape(p) for p in path[: i + 1]), "value": nested})
            return
        node = child
    ops.append({"op": "add", "path": "/" + "/".join(_escape(p) for p in path), "value": value})


def affinity_patch(pod: Mapping[str, Any], node: str, affinity: Affinity = "required") -> list[dict[str, Any]]:
    """JSONPatch operations that make ``pod`` run on ``node`` (by node name, ``matchFields``).

    ``required``: the pod's required node affinity must also hold, so the node requirement is
    ANDed into each existing ``nodeSelectorTerm`` (terms are ORed: adding a term would widen the
    choice, not narrow it); with no terms, one term is added. ``preferred``: a preference of
    weight 100 is appended; the scheduler may still place the pod elsewhere.
    """
    field = {"key": "metadata.name", "operator": "In", "values": [node]}
    spec = pod.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    na_path = ["spec", "affinity", "nodeAffinity"]
    na = (spec.get("affinity") or {}).get("nodeAffinity") if isinstance(spec.get("affinity"), Mapping) else None
    na = na if isinstance(na, Mapping) else {}
    ops: list[dict[str, Any]] = []
    if affinity == "preferred":
        key = "preferredDuringSchedulingIgnoredDuringExecution"
        term = {"weight": 100, "preference": {"matchFields": [field]}}
        if isinstance(na.get(key), list):
            ops.append({"op": "add", "path": "/" + "/".join([*na_path, key, "-"]), "value": term})
        else:
            _add(ops, pod, [*na_path, key], [term])
        return ops
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    required = na.get(key) if isinstance(na.get(key), Mapping) else None
    terms = required.get("nodeSelectorTerms") if required is not None else None
    if not isinstance(terms, list) or not terms:
        _add(ops, pod, [*na_path, key, "nodeSelectorTerms"], [{"matchFields": [field]}])
        return ops
    for i, term in enumerate(terms):
        base = "/" + "/".join([*na_path, key, "nodeSelectorTerms", str(i), "matchFields"])
        if isinstance(term, Mapping) and isinstance(term.get("matchFields"), list):
            ops.append({"op": "add", "path": base + "/-", "value": field})
        else:
            ops.append({"op": "add", "path": base, "value": [field]})
    return ops


def _annotation_patch(pod: Mapping[str, Any], values: Mapping[str, str]) -> list[dict[str, Any]]:
    meta = pod.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(ann, Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(values)}]
    return [{"op": "add", "path": f"/metadata/annotations/{_escape(k)}", "value": v} for k, v in values.items()]


def _allowed(uid: str, patch: list[dict[str, Any]] | None = None, warning: str = "") -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warning:
        response["warnings"] = [warning]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class SteeringWebhook:
    """Answers AdmissionReview v1 requests for pod creations: steered pods get a nodeAffinity.

    Args:
        store: where the actuator's steers are (the same database as the actuator's).
        now: the clock (epoch seconds), injected so tests drive expiry.
        affinity: ``required`` (default) or ``preferred`` node affinity (docs/adr/0009).
    """

    #: Seconds an answer may take before the steer it would use is left pending (the
    #: MutatingWebhookConfiguration's timeoutSeconds is 2: a later answer is dropped, and the pod
    #: created unsteered; Store.consume_steer rolls back past this).
    budget_s = 1.5

    def __init__(
        self,
        store: Store,
        now: Callable[[], float],
        affinity: Affinity = "required",
        on_review: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.now = now
        self.affinity: Affinity = affinity
        self.counts: dict[str, int] = {"steered": 0, "passed": 0, "errors": 0}
        #: Told each review's result (``steered``, ``passed``, ``errors``): the daemon's counter
        #: ``scaleahead_webhook_reviews_total{result}``.
        self.on_review = on_review
        self._lock = threading.Lock()

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1
        if self.on_review is not None:
            self.on_review(what)

    def refuse(self, why: str) -> dict[str, Any]:
        """The answer to a request whose body is not read (its length refused): the pod is allowed
        unchanged, counted under ``errors`` like any review that could not be read."""
        self._count("errors")
        log.warning(
            "pod steering webhook: %s; the pod is allowed unchanged", why, extra={"event": "webhook_error", "uid": ""}
        )
        return _allowed("")

    def review(self, body: bytes) -> dict[str, Any]:
        """The AdmissionReview answer to ``body``; never raises, never refuses a pod."""
        uid = ""
        started = time.monotonic()  # per review: the server answers each on its own thread
        try:
            review = json.loads(body)
            request = review.get("request") if isinstance(review, dict) else None
            if not isinstance(request, dict):
                raise ValueError("the body is not an AdmissionReview with a request")
            uid = str(request.get("uid") or "")
            if not uid:
                raise ValueError("the AdmissionReview request has no uid")
            answer = self._review(request, uid, started + self.budget_s)
        except Exception as exc:  # noqa: BLE001 - the webhook must never block pod creation
            self._count("errors")
            log.warning(
                "pod steering webhook: %s: %s; the pod is allowed unchanged",
                type(exc).__name__,
                exc,
                extra={"event": "webhook_error", "uid": uid},
            )
            return _allowed(uid)
        return answer

    def _review(self, request: Mapping[str, Any], uid: str, deadline: float) -> dict[str, Any]:
        resource = request.get("resource") or {}
        if request.get("operation") != "CREATE" or resource.get("resource") != "pods" or resource.get("group"):
            self._count("passed")
            return _allowed(uid)
        pod = request.get("object")
        if not isinstance(pod, Mapping):
            raise ValueError("the request has no pod object")
        owner = controller_owner(pod)
        spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
        if owner is None or owner[0] not in STEERABLE_OWNERS or (spec or {}).get("nodeName"):
            self._count("passed")
            return _allowed(uid)
        if request.get("dryRun"):  # sideEffects: NoneOnDryRun - a dry run must not consume a steer
            self._count("passed")
            return _allowed(uid)
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        namespace = str(request.get("namespace") or (meta or {}).get("namespace") or "")
        name = str((meta or {}).get("name") or request.get("name") or "")
        pod_id = name or f"{(meta or {}).get('generateName') or ''}* (request {uid})"
        steer = self.store.consume_steer(namespace, owner[0], owner[1], pod_id, self.now(), deadline=deadline)
        if steer is None:
            self._count("passed")
            return _allowed(uid)
        patch = affinity_patch(pod, steer.node, self.affinity)
        patch += _annotation_patch(pod, {STEERED_TO: steer.node, STEER_ID: str(steer.id)})
        self._count("steered")
        log.info(
            "steered new pod %s of %s/%s/%s to node %s (%s affinity; steer %d, evicted %s)",
            pod_id,
            owner[0],
            namespace,
            owner[1],
            steer.node,
            self.affinity,
            steer.id,
            steer.evicted_pod,
            extra={"event": "pod_steered", "steer_id": steer.id, "node": steer.node},
        )
        return _allowed(uid, patch)


def describe(steer: StoredSteer) -> str:
    """One line about a steer for reports and logs."""
    return (
        f"steer {steer.id}: next pod of {steer.owner_kind} {steer.namespace}/{steer.owner_name} "
        f"(replacing {steer.evicted_pod}) to node {steer.node}: {steer.state}"
        + (f" by {steer.consumed_by}" if steer.consumed_by else "")
    )


class _Handler(BaseHTTPRequestHandler):
    webhook: SteeringWebhook
    timeout = 10.0  # seconds per connection: a stuck client must not hold a worker thread

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        if self.path.split("?", 1)[0] != WEBHOOK_PATH:
            self._send(404, b'{"error": "not found"}')
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            shown = self.headers.get("Content-Length")
            self.close_connection = True  # the body is not read: the connection cannot be reused
            self._send(200, json.dumps(self.webhook.refuse(f"body length {shown!r} refused")).encode())
            return
        body = self.rfile.read(length)
        self._send(200, json.dumps(self.webhook.review(body)).encode())

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        if self.path == "/healthz":
            self._send(200, b'{"ok": true}')
        else:
            self._send(404, b'{"error": "not found"}')

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the http.server API
        return None


class ReloadingTLS:
    """The webhook's TLS context, reloaded when its certificate or key file changes.

    cert-manager renews the certificate (and the kubelet updates the mounted Secret) while the pod
    runs; a context loaded once would serve the old one until it expires, and pods would then be
    created unsteered (failurePolicy Ignore). ``reload_if_changed`` re-reads both files when their
    modification time or size changed; new connections use the new pair, open ones finish as they
    are. A pair that cannot be loaded (half written) keeps the old one and is tried again.
    """

    def __init__(
        self, cert_file: str, key_file: str | None, client_ca_file: str | None = None, client_name: str | None = None
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file or cert_file
        #: With a client CA, a client must present a certificate it signed (``ssl.CERT_REQUIRED``);
        #: it is reloaded with the pair when it changes.
        self.client_ca_file = client_ca_file or None
        #: With a name, the client certificate's subject CN or a DNS name must be it.
        self.client_name = client_name or None
        if self.client_name and not self.client_ca_file:
            raise ValueError("a client name is only checked with a client CA (client_ca_file)")
        self._stamp = self._files_stamp()
        self.context = self._load()
        self.reloads = 0

    def _load(self) -> ssl.SSLContext:
        """A new context with the files' pair. Loaded into a fresh context and swapped in only once
        it loaded: ``load_cert_chain`` on the live context with a renewed certificate but the old
        key installs the certificate, then fails on the key, and leaves no usable pair."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        if self.client_ca_file:
            context.load_verify_locations(cafile=self.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def _files(self) -> tuple[str, ...]:
        return (self.cert_file, self.key_file) + ((self.client_ca_file,) if self.client_ca_file else ())

    def _files_stamp(self) -> tuple[tuple[int, int], ...]:
        return tuple((st.st_mtime_ns, st.st_size) for st in (os.stat(f) for f in self._files()))

    def client_refusal(self, peer: Mapping[str, Any] | None) -> str:
        """Why a verified client certificate (``SSLSocket.getpeercert()``) is refused, or ``""``.

        Only the name is checked here (the chain was verified in the handshake): the subject's
        commonName or a DNS subjectAltName must be ``client_name`` when one is set.
        """
        if not self.client_name:
            return ""
        names = certificate_names(peer or {})
        if self.client_name in names:
            return ""
        return f"its certificate names {sorted(names) or 'nothing'}, not {self.client_name!r} (webhook.client_name)"

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed since the last load; True if a new pair is in use."""
        try:
            stamp = self._files_stamp()
            if stamp == self._stamp:
                return False
            self.context = self._load()
        except (OSError, ssl.SSLError, ValueError) as exc:
            log.warning("webhook certificate not reloaded: %s", exc, extra={"event": "webhook_cert_error"})
            return False
        self._stamp = stamp
        self.reloads += 1
        log.info("webhook certificate reloaded", extra={"event": "webhook_cert_reloaded"})
        return True


def certificate_names(peer: Mapping[str, Any]) -> set[str]:
    """The subject commonNames and DNS subjectAltNames of a certificate as ``getpeercert()`` gives it."""
    names = {str(value) for rdn in peer.get("subject") or () for key, value in rdn if key == "commonName"}
    names.update(str(value) for kind, value in peer.get("subjectAltName") or () if kind == "DNS")
    return names


#: The handshake errors of a client that presented no certificate, or one the client CA did not sign.
_CLIENT_CERT_REASONS = frozenset(
    {"PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_VERIFY_FAILED", "TLSV13_ALERT_CERTIFICATE_REQUIRED"}
)


#: Seconds a client has for its TLS handshake (the API server's call times out after 2 s anyway).
HANDSHAKE_TIMEOUT_S = 5.0


class WebhookServer(ThreadingHTTPServer):
    """The webhook's server; ``shutdown`` also stops its certificate watcher.

    With TLS, each connection's handshake runs on that connection's own thread, with a timeout,
    and with the context in use at that moment (``ReloadingTLS``). A listening socket wrapped in
    TLS would run every handshake inside ``accept()`` on the one serving thread, with no timeout:
    one client that connects and sends nothing (a dead node's half-open connection, any pod in
    the cluster) would stop the webhook for every pod created after it.
    """

    tls: ReloadingTLS | None = None
    stopped: threading.Event
    #: At most one ``webhook_client_refused`` warning per this many seconds (each refused
    #: connection is one pod created unsteered: a wrong CA meant one warning per pod). The next
    #: warning says how many were refused in between; every one is counted (``on_refused``).
    REFUSED_WARN_EVERY_S = 60.0
    #: The clock of that limit (monotonic; a test may set another).
    monotonic: Callable[[], float] = staticmethod(time.monotonic)
    #: Told each refused connection: the daemon's counter ``scaleahead_webhook_clients_refused_total``.
    on_refused: Callable[[], None] | None = None
    _refused_lock: threading.Lock
    _refused_warned_at: float | None = None
    _refused_unwarned = 0

    def shutdown(self) -> None:
        self.stopped.set()
        super().shutdown()

    def _refused(self, client_address: Any, why: str) -> None:
        t = self.monotonic()
        with self._refused_lock:
            quiet = self._refused_warned_at is not None and t - self._refused_warned_at < self.REFUSED_WARN_EVERY_S
            if quiet:
                self._refused_unwarned += 1
            else:
                self._refused_warned_at, since, self._refused_unwarned = t, self._refused_unwarned, 0
        if not quiet:
            more = f" ({since} more refused since the last such warning, not logged one by one)" if since else ""
            log.warning(
                "webhook client %s refused: %s%s; see docs/actuator.md#steering",
                client_address[0] if isinstance(client_address, tuple) else client_address,
                why,
                more,
                extra={"event": "webhook_client_refused", "refused_since_last": since},
            )
        if self.on_refused is not None:
            self.on_refused()

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        tls = self.tls
        try:
            request.settimeout(HANDSHAKE_TIMEOUT_S)
            conn = tls.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as exc:  # a timeout, a client that is not TLS, a reset
            if tls.client_ca_file and getattr(exc, "reason", None) in _CLIENT_CERT_REASONS:
                self._refused(client_address, f"no client certificate signed by {tls.client_ca_file} ({exc})")
            else:
                log.debug("webhook TLS handshake failed from %s: %s", client_address, exc)
            return
        try:
            why = tls.client_refusal(conn.getpeercert()) if tls.client_ca_file else ""
            if why:
                self._refused(client_address, why)  # closed unread: nothing of the review is used
                return
            super().finish_request(conn, client_address)
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_WR)
            conn.close()


def serve_webhook(
    webhook: SteeringWebhook,
    host: str,
    port: int,
    cert_file: str | None = None,
    key_file: str | None = None,
    reload_s: float = 60.0,
    client_ca_file: str | None = None,
    client_name: str | None = None,
    on_refused: Callable[[], None] | None = None,
) -> WebhookServer:
    """Serve ``POST /mutate-pods`` on a background thread: HTTPS with ``cert_file``/``key_file``.

    The API server only calls webhooks over HTTPS; plain HTTP (no certificate) is for tests and
    for a TLS-terminating sidecar. ``port`` 0 picks a free port (``server.server_address[1]``).
    With a certificate, a thread checks the files every ``reload_s`` seconds and reloads a renewed
    pair (``ReloadingTLS``; ``server.tls``).

    With ``client_ca_file`` (HTTPS only), a client must present a certificate that CA signed, and
    with ``client_name`` one that names it (subject CN or DNS subjectAltName); any other client's
    connection is closed before its request is read, told to ``on_refused`` and logged
    (``webhook_client_refused``, at most once per ``WebhookServer.REFUSED_WARN_EVERY_S``).
    """
    if client_ca_file and not cert_file:
        raise ValueError("client certificates are only checked over HTTPS: give cert_file with client_ca_file")
    # The files are loaded before the port is bound: a pair or CA that does not load yet leaves
    # nothing listening (run tries again later) and never a server that answers without them.
    tls = ReloadingTLS(cert_file, key_file, client_ca_file, client_name) if cert_file else None
    handler = type("SteeringHandler", (_Handler,), {"webhook": webhook})
    server = server_class(WebhookServer, host)((listen_host(host), port), handler)
    server.daemon_threads = True
    server.stopped = threading.Event()
    server._refused_lock = threading.Lock()
    server.on_refused = on_refused
    if tls is not None:
        server.tls = tls  # each connection is wrapped on its own thread (WebhookServer.finish_request)

        def watch() -> None:
            while not server.stopped.wait(reload_s):
                tls.reload_if_changed()

        threading.Thread(target=watch, name="scaleahead-webhook-cert", daemon=True).start()
    threading.Thread(target=server.serve_forever, name="scaleahead-webhook", daemon=True).start()
    return server
