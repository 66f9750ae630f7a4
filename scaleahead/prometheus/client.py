"""Range queries against the Prometheus HTTP API: the one place where scaleahead speaks HTTP to it.

Why direct HTTP (urllib3) and not prometheus-api-client: see docs/adr/0001-prometheus-http.md.
In short, on loopback the server spends more time gzip-compressing a large range than sending it,
so every request says ``Accept-Encoding: identity`` (``compress=False``), and a thin client keeps
per-request overhead low enough for an incremental cycle of 1,000 workloads.

What this module guarantees:
- a range ``[start, end]`` at ``step`` is evaluated on the grid ``k * step`` (aligned, so incremental
  reads and chunks meet exactly) and split into chunks of at most ``max_points`` points per series
  (Prometheus refuses more than 11,000): consecutive chunks share no point and skip none;
- points Prometheus did not return stay NaN (missing, never zero); NaN/±Inf and negative values
  it did return are dropped (made missing) with a warning naming the series (demand is never
  negative);
- a query that returns several series where one is expected is an error naming the workload and
  the query; so is an empty result;
- every range query is sent Prometheus' own ``timeout`` just under the client's
  (``server_timeout_s``), so the server stops an expensive query rather than finishing it for nobody;
- 5xx, 429, timeouts and refused/reset connections are retried with exponential back-off, except a
  timeout in ``fetch_many`` (the same query would time out again); 4xx (bad query, 401, 403) and TLS
  failures are not;
- a URL's ``USER:PASSWORD@`` is sent as basic auth and never shown (``base`` is the URL without it);
- every error is a ``PrometheusError`` (a ``UserError``) naming the workload, the query and what
  to check.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import numpy as np
import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

from scaleahead.errors import UserError, hide_password
from scaleahead.types import F32_MAX, FloatArray, Series

log = logging.getLogger("scaleahead.prometheus")

#: Prometheus refuses a range query with more than this many points per series.
PROMETHEUS_MAX_POINTS = 11_000
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: Reads a query that timed out alone is then read alone, without retries, before it is batched again.
SLOW_READS = 30
#: Label that tags each query's series in a batched request.
BATCH_TAG = "scaleahead_batch_index"


class PrometheusError(UserError):
    """A range query that failed, with the workload, the query and what to check.

    ``kind`` says what failed: ``connect``, ``tls``, ``auth``, ``url`` (the server as a whole: the
    other workloads' reads are not attempted), ``timeout``, ``server``, ``broken``, ``partial`` (an
    answer warned to be partial; maybe transient), ``query`` (the PromQL itself) or ``data`` (the
    result: empty, several series).
    """

    #: Kinds that hold for every query to this server: stop reading the others.
    SERVER_WIDE = frozenset({"connect", "tls", "auth", "url"})

    def __init__(
        self,
        reason: str,
        fix: str = "",
        *,
        workload: str = "",
        query: str = "",
        kind: str = "server",
        retryable: bool = False,
        empty: bool = False,
        no_answer: bool = False,
    ) -> None:
        self.reason = reason
        #: No answer at all within the request timeout (not the server stopping an expensive query):
        #: a reader that gets only these gives up on the server for the rest of its reads.
        self.no_answer = no_answer
        #: The query answered, with no series in the range (a new workload, a metric not scraped yet):
        #: no data rather than a failed read (``scaleahead.retraining`` tells them apart).
        self.empty = empty
        self.workload = workload
        self.query = query
        self.kind = kind
        self.retryable = retryable
        where = f"Workload {workload}, query {query!r}: " if workload else (f"Query {query!r}: " if query else "")
        super().__init__(where + reason, fix)

    def for_request(self, workload: str, query: str) -> PrometheusError:
        """The same failure, told for another workload and query."""
        return PrometheusError(
            self.reason,
            self.fix,
            workload=workload,
            query=query,
            kind=self.kind,
            empty=self.empty,
            no_answer=self.no_answer,
        )


@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """How to reach Prometheus: URL, credentials, TLS, timeouts, retries and parallelism.

    ``batch_size`` short reads (at most ``batch_points`` points each, e.g. an incremental cycle)
    share one request; ``batch_size=1`` turns batching off.
    ``bearer_token_file`` is re-read on every request (rotated service-account tokens keep
    working). ``ca_file`` verifies the server; ``cert_file``/``key_file`` are the client
    certificate for mutual TLS.
    """

    url: str
    bearer_token: str | None = None
    bearer_token_file: str | None = None
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    retries: int = 3
    backoff_s: float = 0.5
    max_concurrency: int = 8
    max_points: int = PROMETHEUS_MAX_POINTS
    compress: bool = False
    batch_size: int = 50
    batch_points: int = 360
    accept_partial: bool = False

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise UserError(
                f"Prometheus URL {hide_password(self.url)!r} is not an http:// or https:// URL.",
                "Give the base URL, e.g. http://prometheus.monitoring:9090.",
            )
        _, url_user, _ = split_credentials(self.url)
        if url_user is not None and (
            self.bearer_token or self.bearer_token_file or self.username is not None or self.password is not None
        ):
            raise UserError(
                f"The Prometheus URL {hide_password(self.url)!r} holds a username and password, and other "
                "credentials are given too (a bearer token, a username or a password).",
                "Give the credentials once: drop USER:PASSWORD@ from the URL (better: the password in a file, "
                "SCALEAHEAD_PROMETHEUS__PASSWORD_FILE or --password-file), or the other credentials.",
            )
        if not 1 <= self.max_points <= PROMETHEUS_MAX_POINTS:
            raise UserError(f"max_points must be in 1..{PROMETHEUS_MAX_POINTS}, got {self.max_points}.")
        if self.bearer_token and (self.username or self.password):
            raise UserError("Give either a bearer token or basic auth for Prometheus, not both.")
        if self.key_file and not self.cert_file:
            raise UserError("A client key needs its certificate (cert_file).")
        if not math.isfinite(self.timeout_s) or self.timeout_s <= 0:
            raise UserError(
                f"The Prometheus request timeout {self.timeout_s:g} s is not a positive, finite number.",
                "Give a timeout in seconds above 0, e.g. 30.",
            )
        if self.max_concurrency < 1:
            raise UserError(f"The Prometheus concurrency {self.max_concurrency} must be at least 1.", "E.g. 8.")


@dataclass(frozen=True, slots=True)
class RangeRequest:
    """One series to read: ``query`` at ``step_s`` over the grid points in ``[start, end]``.

    ``label`` names the workload in errors and warnings. With ``allow_empty`` an empty result is
    an all-missing series (incremental reads), not an error.
    """

    label: str
    query: str
    start: float
    end: float
    step_s: float
    allow_empty: bool = False


@dataclass
class FetchStats:
    """Counters since the client was made (thread-safe): requests, retries, points, bytes."""

    requests: int = 0
    retries: int = 0
    points: int = 0
    bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, requests: int = 0, retries: int = 0, points: int = 0, nbytes: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.retries += retries
            self.points += points
            self.bytes += nbytes


#: Clocks further apart than this (s) are warned about at start-up (``check_clock``).
CLOCK_TOLERANCE_S = 5.0


def check_clock(client: PrometheusClient, now: Callable[[], float] = time.time) -> float | None:
    """Warn (event ``prometheus_clock_skew``) when Prometheus's clock is more than
    ``CLOCK_TOLERANCE_S`` from this one's; returns the offset (s, Prometheus minus here), or None
    when the server did not answer (the history reads report that themselves).

    Ahead, its newest samples look fresher than they are (a sample scraped 5 minutes ago is stamped
    now), which no staleness check can see; behind, the newest points look missing, as if it lagged."""
    try:
        offset = client.clock_offset(now)
    except PrometheusError as exc:
        log.debug("clock check of %s failed: %s", client.base, exc)
        return None
    if abs(offset) > CLOCK_TOLERANCE_S:
        side = (
            "ahead of this one: its newest samples look fresher than they are, and stale history is not seen"
            if offset > 0
            else "behind this one: its newest points look missing, as if it lagged"
        )
        log.warning(
            "Prometheus at %s has a clock %.0f s %s; synchronize the clocks (NTP) of both",
            client.base,
            abs(offset),
            side,
            extra={"event": "prometheus_clock_skew", "offset_s": round(offset, 3)},
        )
    return offset


def grid(start: float, end: float, step_s: float) -> tuple[float, int]:
    """The aligned grid in ``[start, end]``: first point (a multiple of ``step_s``) and count.

    A millionth of a step is the tolerance: ``start / step_s`` of an epoch time carries float error
    of about 1e-7 steps, so at a step that is not a whole second (1.2 s) the 1e-9 used until
    2026-12-07 took a point at ``start`` for one just after it and dropped it (a review)."""
    first = math.ceil(start / step_s - 1e-6) * step_s
    last = math.floor(end / step_s + 1e-6) * step_s
    n = int(round((last - first) / step_s)) + 1
    return first, max(0, n)


def chunks(first: float, n: int, step_s: float, max_points: int) -> list[tuple[float, float]]:
    """Split ``n`` grid points from ``first`` into ``(start, end)`` ranges of at most ``max_points``.

    Chunk ``k`` covers points ``k*max_points .. min(n, (k+1)*max_points) - 1``; both ends are
    inclusive in Prometheus, so consecutive chunks neither share nor skip a point.
    """
    out = []
    for i in range(0, n, max_points):
        j = min(n, i + max_points) - 1
        out.append((first + i * step_s, first + j * step_s))
    return out


class PrometheusClient:
    """A thread-safe client for ``/api/v1/query_range`` with chunking, retries, auth and TLS.

    Args:
        config: where and how to connect.
        sleep: back-off between retries (replaceable in tests; it never decides anything).
    """

    def __init__(self, config: PrometheusConfig, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        # The URL without USER:PASSWORD@ (which become basic auth): it is what messages and logs show.
        base, self._url_user, self._url_password = split_credentials(config.url)
        self.base = base.rstrip("/")
        self.stats = FetchStats()
        self._sleep = sleep
        #: Queries read alone, and for how many more reads: 1 after their batch timed out (batched
        #: again once read fine alone), ``SLOW_READS`` after they timed out alone too.
        self._alone: dict[str, int] = {}
        #: Queries per batch: ``config.batch_size``, halved when a batch times out, one more after
        #: each batch of that size that goes through.
        self.batch_limit = config.batch_size
        self._lock = threading.Lock()
        kwargs: dict[str, Any] = {"maxsize": max(1, config.max_concurrency), "block": True, "retries": False}
        if self.base.startswith("https://"):
            if config.insecure_skip_verify:
                kwargs["cert_reqs"] = "CERT_NONE"
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            else:
                kwargs["cert_reqs"] = "CERT_REQUIRED"
                if config.ca_file:
                    kwargs["ca_certs"] = config.ca_file
            if config.cert_file:
                kwargs["cert_file"] = config.cert_file
                kwargs["key_file"] = config.key_file
        self._pool = urllib3.PoolManager(**kwargs)

    @property
    def alone(self) -> dict[str, int]:
        """Queries read alone (not batched), and for how many more reads (a copy)."""
        with self._lock:
            return dict(self._alone)

    def close(self) -> None:
        self._pool.clear()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP -----------------------------------------------------------------------------------

    def _headers(self, label: str = "", query: str = "") -> dict[str, str]:
        cfg = self.config
        headers = {"Accept-Encoding": "gzip" if cfg.compress else "identity", "Accept": "application/json"}
        token = cfg.bearer_token
        if cfg.bearer_token_file:
            try:
                token = Path(cfg.bearer_token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise PrometheusError(
                    f"cannot read the bearer token file {cfg.bearer_token_file}: {exc.strerror}.",
                    "Check the path (in a pod: the mounted service-account token).",
                    workload=label,
                    query=query,
                    kind="auth",
                ) from exc
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif cfg.username is not None:
            headers.update(urllib3.util.make_headers(basic_auth=f"{cfg.username}:{cfg.password or ''}"))
        elif self._url_user is not None:  # http://USER:PASSWORD@host: urllib3 would send neither
            headers.update(urllib3.util.make_headers(basic_auth=f"{self._url_user}:{self._url_password or ''}"))
        headers.update(cfg.headers)
        return headers

    def _post(
        self,
        path: str,
        fields: Mapping[str, str],
        label: str,
        query: str,
        retries: int | None = None,
        retry_timeout: bool = True,
    ) -> dict[str, Any]:
        """One API call with retries (``config.retries`` unless given; a timeout only if
        ``retry_timeout``); returns the decoded ``data`` object."""
        url = f"{self.base}{path}"
        attempts = max(0, self.config.retries if retries is None else retries) + 1
        last: PrometheusError | None = None
        for attempt in range(attempts):
            if attempt:
                self.stats.add(retries=1)
                self._sleep(self.config.backoff_s * 2 ** (attempt - 1))
            try:
                return self._post_once(url, fields, label, query)
            except PrometheusError as exc:
                if not exc.retryable or (exc.kind == "timeout" and not retry_timeout):
                    raise
                last = exc
                log.info("retrying %s (attempt %d of %d): %s", label, attempt + 1, attempts, exc.reason)
        assert last is not None
        raise PrometheusError(
            f"{last.reason} (gave up after {attempts} attempts)",
            last.fix,
            workload=label,
            query=query,
            kind=last.kind,
        ) from last

    def _post_once(self, url: str, fields: Mapping[str, str], label: str, query: str) -> dict[str, Any]:
        timeout = self.config.timeout_s
        headers = self._headers(label, query)
        try:
            resp = self._pool.request(
                "POST",
                url,
                fields=dict(fields),
                encode_multipart=False,
                headers=headers,
                timeout=urllib3.Timeout(connect=min(timeout, 10.0), read=timeout),
                retries=False,
                redirect=False,
            )
        except SSLError as exc:
            plain = "WRONG_VERSION_NUMBER" in str(exc) or "wrong version number" in str(exc)
            raise PrometheusError(
                f"TLS handshake with {self.base} failed ({_short(exc)}).",
                # https to a server that speaks plain HTTP answers no TLS at all (a review of 2026-12-07)
                "The server does not speak TLS on that port: use http:// in the URL."
                if plain
                else "Check the CA bundle (--ca-file), the client certificate and key (--cert-file, --key-file) "
                "and that the server name matches its certificate.",
                workload=label,
                query=query,
                kind="tls",
            ) from exc
        except ConnectTimeoutError as exc:  # NewConnectionError is one too
            raise PrometheusError(
                f"cannot connect to Prometheus at {self.base} ({_short(exc)}).",
                "Check the URL and port, that Prometheus is running, and network policies between them.",
                workload=label,
                query=query,
                kind="connect",
                retryable=True,
            ) from exc
        except ReadTimeoutError as exc:
            raise PrometheusError(
                f"Prometheus at {self.base} did not answer within {timeout:g} s.",
                "Check the server's load, narrow the query, or raise the timeout.",
                workload=label,
                query=query,
                kind="timeout",
                retryable=True,
                no_answer=True,
            ) from exc
        except (ProtocolError, HTTPError) as exc:
            raise PrometheusError(
                f"the connection to {self.base} broke ({_short(exc)}).",
                "Check that Prometheus is running and not restarting (its logs, OOM kills).",
                workload=label,
                query=query,
                kind="broken",
                retryable=True,
            ) from exc
        body = resp.data
        self.stats.add(requests=1, nbytes=len(body))
        status = resp.status
        if status == 200:
            try:
                doc = json.loads(body)
            except ValueError as exc:
                raise PrometheusError(
                    f"{self.base} answered with something that is not JSON.",
                    "Check that the URL is the Prometheus API's base (no /graph or /api/v1 suffix).",
                    workload=label,
                    query=query,
                    kind="url",
                ) from exc
            data = doc.get("data") if isinstance(doc, dict) else None
            if not isinstance(data, dict):
                raise PrometheusError(
                    f"{self.base} answered without a data object.",
                    "Check that the URL points at a Prometheus-compatible API.",
                    workload=label,
                    query=query,
                    kind="url",
                )
            warnings = [str(w) for w in doc.get("warnings") or ()]
            for warning in warnings:
                log.warning(
                    "%s: Prometheus warns: %s",
                    f"Workload {label}, query {query!r}" if label else f"Query {query!r}",
                    warning,
                    extra={"event": "prometheus_warning", "workload": label},
                )
            # PromQL's own annotations ("PromQL warning: ...", "PromQL info: ...") are about the
            # query; any other warning says the answer may be partial (a Thanos store or a remote
            # read that failed): its low values would read as real demand and be cached.
            partial = [w for w in warnings if not w.startswith("PromQL ")]
            if partial and not self.config.accept_partial:
                raise PrometheusError(
                    f"{self.base} answered with a warning that the data may be partial: {partial[0][:300]}",
                    "Fix the source it names (a store or remote read that is down); until then the planner "
                    "falls back for this workload. To use such answers anyway, set "
                    "SCALEAHEAD_PROMETHEUS__ACCEPT_PARTIAL=true.",
                    workload=label,
                    query=query,
                    kind="partial",
                    retryable=True,
                )
            return data
        detail = _error_detail(body)
        if status == 503 and _error_type(body) == "timeout":
            # Prometheus stopped the query at the timeout it was sent (``query_range_raw``): the
            # same as no answer within the client's timeout, but the server no longer works on it.
            raise PrometheusError(
                f"Prometheus at {self.base} stopped the query at its evaluation timeout "
                f"({server_timeout_s(timeout):g} s, just under the {timeout:g} s request timeout; {detail}).",
                "Narrow the query (a recording rule), or raise the timeout (SCALEAHEAD_PROMETHEUS__TIMEOUT_S; the "
                "server's own --query.timeout caps it too).",
                workload=label,
                query=query,
                kind="timeout",
                retryable=True,
            )
        if status in (401, 403):
            raise PrometheusError(
                f"Prometheus at {self.base} refused the request with HTTP {status} ({detail}).",
                "Check the credentials: the bearer token (--bearer-token-file) or the username and password, "
                "and that they may read this data.",
                workload=label,
                query=query,
                kind="auth",
            )
        if status in (400, 422):
            raise PrometheusError(
                f"Prometheus rejected the query (HTTP {status}: {detail}).",
                "Fix the PromQL (the policy's demand.query, or the --query given) and try it in the Prometheus UI.",
                workload=label,
                query=query,
                kind="query",
            )
        if status in (404, 405, 501):  # no such path, or a server that does not take POST: not the Prometheus API
            raise PrometheusError(
                f"{url} answered HTTP {status} ({detail}): {self.base} does not look like a Prometheus HTTP API.",
                "Check the URL: it is the server's base, e.g. http://prometheus:9090, with any path prefix the "
                "server is behind (http://host/prometheus) but without /api/v1 or /graph.",
                workload=label,
                query=query,
                kind="url",
            )
        raise PrometheusError(
            f"Prometheus at {self.base} answered HTTP {status} ({detail}).",
            "Check the server's health and logs.",
            workload=label,
            query=query,
            retryable=status in _RETRY_STATUS,
        )

    def ready(self) -> bool:
        """Whether the server answers ``/-/ready`` with 200 (no retries)."""
        try:
            resp = self._pool.request(
                "GET", f"{self.base}/-/ready", headers=self._headers(), timeout=2.0, retries=False
            )
        except (HTTPError, PrometheusError):
            return False
        return resp.status == 200

    def clock_offset(self, now: Callable[[], float] = time.time) -> float:
        """Prometheus's clock minus this one's (s): an instant query of ``time()`` evaluated at the
        server's now, against the middle of the request on this clock (its half round trip is the
        precision). Raises ``PrometheusError`` when the server does not answer."""
        before = now()
        data = self._post("/api/v1/query", {"query": "time()"}, "clock check", "time()", retries=0)
        after = now()
        try:
            server = float(data["result"][1])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise PrometheusError(
                f"{self.base} answered time() with {_excerpt(data)}, not a scalar.",
                "Check that the URL is a Prometheus query API.",
                workload="clock check",
                query="time()",
            ) from exc
        return server - (before + after) / 2.0

    # -- range queries --------------------------------------------------------------------------

    def query_range_raw(
        self,
        query: str,
        start: float,
        end: float,
        step_s: float,
        label: str = "",
        retries: int | None = None,
        retry_timeout: bool = True,
    ) -> list[Any]:
        """The ``result`` list of one ``query_range`` call (no chunking).

        Sends Prometheus' own ``timeout`` (``server_timeout_s``), just under the client's: an
        expensive query is stopped by the server, which answers that it timed out, instead of
        being worked out to the end for a client that gave up on it."""
        fields = {
            "query": query,
            "start": _fmt(start),
            "end": _fmt(end),
            "step": _fmt(step_s),
            "timeout": _fmt(server_timeout_s(self.config.timeout_s)),
        }
        if not self.config.accept_partial:
            fields["partial_response"] = "false"  # Thanos: an error instead of a partial answer
        data = self._post("/api/v1/query_range", fields, label, query, retries, retry_timeout)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise PrometheusError(
                f"expected a range vector (matrix), got {data.get('resultType')!r}.",
                "The query (a policy's demand.query, or --query) must give one time series (an instant vector "
                "expression).",
                workload=label,
                query=query,
                kind="query",
            )
        for item in result:
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("metric", {}), dict)
                or not isinstance(item.get("values", []), list)
            ):
                raise PrometheusError(
                    f"{self.base} answered with a malformed range vector: a series is {_excerpt(item)}, not "
                    '{"metric": {...}, "values": [[time, "value"], ...]}.',
                    "Check that the URL points at a Prometheus-compatible API (and any proxy in between passes its "
                    "answers through unchanged).",
                    workload=label,
                    query=query,
                    kind="data",
                )
        return result

    def range_series(self, req: RangeRequest, retries: int | None = None, retry_timeout: bool = True) -> Series:
        """One series on the aligned grid of ``req``, chunked, with missing points as NaN."""
        first, n = grid(req.start, req.end, req.step_s)
        part = _Assembly(req, first, n)
        with paused_gc():
            for c0, c1 in chunks(first, n, req.step_s, self.config.max_points):
                part.add(self.query_range_raw(req.query, c0, c1, req.step_s, req.label, retries, retry_timeout))
        return part.finish(self.stats)

    def _range_batch(self, reqs: Sequence[RangeRequest]) -> list[Series | PrometheusError]:
        """Several short reads on one grid in ONE request, each query tagged by ``label_replace``.

        ``label_replace(Q, tag, "i", "", "")`` adds label ``tag="i"`` to every series of query
        ``i``; ``or`` unions them (their label sets differ by the tag, so nothing is dropped). A
        query that does not parse on its own fails the whole batch: then each is read alone, so
        the error names the right workload. A batch that times out fails its queries for this
        read, without a retry (one slow query, or the batch's own cost, would fail it again): on
        the next read each is read alone, in parallel, once; one that is fast alone is batched
        again, one that times out alone too stays alone for ``SLOW_READS`` reads (``alone``), and
        the batch size is halved (it grows back by one per batch that goes through). A 5xx answer
        gets the batch retried whole (an overloaded server is not sent one request per query).
        """
        head = reqs[0]
        first, n = grid(head.start, head.end, head.step_s)
        # Each query in its own parentheses and lines: ``fetch_many`` batches only queries that close
        # every bracket they open (``batchable``), so none can close ours and tag another's series.
        query = _balanced_or(
            [f'label_replace((\n{r.query}\n), "{BATCH_TAG}", "{i}", "", "")' for i, r in enumerate(reqs)]
        )
        label = f"{head.label} and {len(reqs) - 1} other(s)"
        end = first + (n - 1) * head.step_s
        try:
            try:  # a timeout is not retried whole: the batch may be what is slow
                result = self.query_range_raw(query, first, end, head.step_s, label, retries=0)
            except PrometheusError as exc:
                if exc.kind not in ("server", "broken"):
                    raise
                # An overloaded server (5xx) gets the batch again, not one request per query.
                self.stats.add(retries=1)
                self._sleep(self.config.backoff_s)
                result = self.query_range_raw(
                    query, first, end, head.step_s, label, retries=max(0, self.config.retries - 1)
                )
        except PrometheusError as exc:
            if exc.kind == "timeout":
                # Not retried, and not read query by query now (one after another that could take a
                # timeout each): each is read alone, in parallel, on the next read; this one fails.
                with self._lock:
                    for r in reqs:
                        self._alone[r.query] = max(self._alone.get(r.query, 0), 1)
                    self.batch_limit = max(1, min(self.batch_limit, len(reqs) // 2))
                log.info(
                    "a batch of %d queries timed out: each is read alone next time, batches of at most %d",
                    len(reqs),
                    self.batch_limit,
                )
                return [exc.for_request(r.label, r.query) for r in reqs]
            if exc.kind in ("query", "data"):
                return [self._one(r) for r in reqs]
            return [exc.for_request(r.label, r.query) for r in reqs]
        with self._lock:  # a batch as big as allowed went through: allow one more, up to batch_size
            if len(reqs) >= self.batch_limit:
                self.batch_limit = min(self.config.batch_size, self.batch_limit + 1)
        parts: list[list[Any]] = [[] for _ in reqs]
        for item in result:
            metric = item.get("metric", {})
            try:
                k = int(metric.pop(BATCH_TAG))
            except (KeyError, ValueError):
                return [self._one(r) for r in reqs]
            parts[k].append(item)
        out: list[Series | PrometheusError] = []
        for r, items in zip(reqs, parts, strict=True):
            asm = _Assembly(r, first, n)
            try:
                asm.add(items)
                out.append(asm.finish(self.stats))
            except PrometheusError as exc:
                out.append(exc)
        return out

    def _one(self, req: RangeRequest) -> Series | PrometheusError:
        # A query read alone after a timeout is tried once a read, not 4 times: a read waits one
        # timeout for it at most (the loop then backs that workload off), never minutes. Nor is any
        # read's timeout retried (the same query would time out again: until 2026-12-06 a tenant's
        # expensive first read held every workload's read for 4 timeouts and their back-off).
        with self._lock:
            alone = self._alone.get(req.query, 0)
        retries = 0 if alone else None
        try:
            got: Series | PrometheusError = self.range_series(req, retries, retry_timeout=False)
        except PrometheusError as exc:
            got = exc
        if isinstance(got, PrometheusError) and got.kind == "query":
            # Refused alone too (a typo, or a query written to break out of a batch): read alone for a
            # while, so it does not fail every batch it joins and send its neighbours one by one.
            with self._lock:
                self._alone[req.query] = SLOW_READS
            return got
        if isinstance(got, PrometheusError) and got.kind == "timeout" and not alone:
            with self._lock:  # slow alone on its first read: alone, without retries, for a while
                self._alone[req.query] = SLOW_READS
            return got
        if alone:
            with self._lock:
                if isinstance(got, PrometheusError) and got.kind == "timeout":
                    self._alone[req.query] = SLOW_READS  # slow alone too: alone for a while
                elif alone <= 1:
                    self._alone.pop(req.query, None)  # fast alone: batched again
                else:
                    self._alone[req.query] = alone - 1
        return got

    def forget_queries(self, keep: set[str]) -> int:
        """Forget the queries read alone (slow or refused ones) that are not in ``keep``: a removed
        policy's query is never read again, so its entry would stay for good (found by a review).
        Returns how many were forgotten."""
        with self._lock:
            gone = [q for q in self._alone if q not in keep]
            for q in gone:
                del self._alone[q]
        return len(gone)

    def fetch_many(self, requests: Sequence[RangeRequest]) -> list[Series | PrometheusError]:
        """Read many series in parallel (at most ``max_concurrency`` requests at a time), in order.

        A failure of one series is returned in its place and the others go on, except when the
        failure holds for the whole server (cannot connect, TLS, 401/403, wrong URL): then the
        reads not yet started fail at once with the same reason instead of each retrying.
        Short reads (at most ``batch_points`` points) on the same grid go ``batch_size`` to a
        request: an incremental cycle of 1,000 workloads is a few requests, not 1,000.
        """
        out: list[Series | PrometheusError | None] = [None] * len(requests)
        tasks: list[list[int]] = []
        groups: dict[tuple[float, int, float], list[int]] = {}
        for i, r in enumerate(requests):
            first, n = grid(r.start, r.end, r.step_s)
            if (
                self.batch_limit > 1
                and 0 < n <= self.config.batch_points
                and r.query not in self._alone
                and batchable(r.query)
            ):
                groups.setdefault((first, n, r.step_s), []).append(i)
            else:
                tasks.append([i])
        for idx in groups.values():
            size = self.batch_limit
            tasks.extend(idx[k : k + size] for k in range(0, len(idx), size))
        abort: list[PrometheusError] = []
        answered = [False]  # any read got an answer (data or an error the server sent)
        lock = threading.Lock()

        def run(task: list[int]) -> None:
            reqs = [requests[i] for i in task]
            if abort:
                got: list[Series | PrometheusError] = [abort[0].for_request(r.label, r.query) for r in reqs]
            elif len(reqs) == 1:
                got = [self._one(reqs[0])]
            else:
                got = self._range_batch(reqs)
            with lock:
                for i, g in zip(task, got, strict=True):
                    out[i] = g
                    silent = isinstance(g, PrometheusError) and g.no_answer
                    answered[0] = answered[0] or not silent
                    if isinstance(g, PrometheusError) and g.kind in PrometheusError.SERVER_WIDE and not abort:
                        abort.append(g)
                    elif silent and not answered[0] and not abort:
                        # Nothing has answered within a whole request timeout: a server that accepts
                        # connections and answers nothing. The reads not started yet fail at once, so
                        # a cycle (and a shutdown, and the liveness probe) waits one timeout, not one
                        # per read (a review of 2026-12-07: 40 policies, 150 s; the pod restarted).
                        assert isinstance(g, PrometheusError)
                        abort.append(
                            PrometheusError(
                                f"{g.reason} Nothing else had answered either, so this cycle's other reads were "
                                "not sent.",
                                "Check that Prometheus is up and not overloaded (its own /-/ready, its logs); "
                                "the reads are tried again next cycle.",
                                kind="timeout",
                                no_answer=True,
                            )
                        )

        workers = min(self.config.max_concurrency, len(tasks))
        with paused_gc():
            if workers <= 1:
                for t in tasks:
                    run(t)
            else:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    list(pool.map(run, tasks))
        return [o if o is not None else PrometheusError("not read", kind="server") for o in out]


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while decoding large JSON answers.

    A 1-day range at 10 s decodes into ~9,000 small lists per series; with the collector on,
    those allocations trigger repeated full collections and decoding is about 6x slower
    (measured: 50 series, 1.6-1.8 s with it on, 0.25-0.29 s off). The lists hold no cycles, so
    nothing is lost; the collector is re-enabled (if it was on) when the last reader finishes.
    """
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


class _Assembly:
    """Puts the chunks of one read on its grid: NaN where nothing came, checks one series."""

    def __init__(self, req: RangeRequest, first: float, n: int) -> None:
        self.req, self.first, self.n = req, first, n
        self.values = np.full(n, np.nan)
        self.labels: dict[str, str] | None = None
        self.bad = 0
        self.negative = 0
        self.beyond = 0  # beyond float32 (an exporter overflow, a 1e42 glitch): kept, read as missing
        self.points = 0
        self.off_grid = 0  # samples at a time outside the range or between its steps
        self.histograms = False  # a native histogram series: "histograms", no "values"

    def add(self, result: Sequence[Any]) -> None:
        req = self.req
        if len(result) > 1:
            names = ", ".join(_metric_text(r.get("metric", {})) for r in result[:3])
            raise PrometheusError(
                f"returned {len(result)} series ({names}{', ...' if len(result) > 3 else ''}) where one is expected.",
                "Aggregate the query to one series, e.g. sum(...) or sum by () (...), "
                "or select one with more label matchers.",
                workload=req.label,
                query=req.query,
                kind="data",
            )
        if not result:
            return
        metric = result[0].get("metric", {})
        if self.labels is not None and metric != self.labels:
            raise PrometheusError(
                "returned different series in different parts of the range "
                f"({_metric_text(self.labels)} and {_metric_text(metric)}).",
                "Aggregate the query to one series (e.g. sum(...)).",
                workload=req.label,
                query=req.query,
                kind="data",
            )
        self.labels = metric
        self.histograms |= bool(result[0].get("histograms")) and not result[0].get("values")
        try:
            ts, vs = _decode_values(result[0].get("values") or ())
        except (TypeError, ValueError, IndexError, KeyError) as exc:
            raise PrometheusError(
                f'the answer has a malformed sample ({exc}); Prometheus sends [time, "value"] pairs with '
                'numeric times and values as strings ("12.5", "NaN", "+Inf").',
                "Check that the URL points at a Prometheus-compatible API (and any proxy in between passes its "
                "answers through unchanged).",
                workload=req.label,
                query=req.query,
                kind="data",
            ) from exc
        self.points += len(ts)
        idx = np.rint((ts - self.first) / req.step_s).astype(np.int64)
        # on the grid to Prometheus' millisecond precision
        ok = (idx >= 0) & (idx < self.n) & (np.abs(ts - (self.first + idx * req.step_s)) <= 2e-3)
        self.off_grid += int((~ok).sum())
        finite = np.isfinite(vs)
        self.bad += int((ok & ~finite).sum())
        negative = finite & (vs < 0)  # demand is never negative: a broken query (deriv() for rate())
        self.negative += int((ok & negative).sum())
        keep = ok & finite & ~negative
        # Kept in the series (``history`` counts and blanks them), but every reader takes them as
        # missing (scaleahead.types.F32_MAX, forecaster.base.glitches_as_missing): said here, once.
        self.beyond += int((keep & (vs > F32_MAX)).sum())
        self.values[idx[keep]] = vs[keep]

    def finish(self, stats: FetchStats) -> Series:
        req = self.req
        stats.add(points=self.points)
        # `scaleahead history` reads a query of no workload (label ""): "Query ..." alone
        where = f"Workload {req.label}, query {req.query!r}" if req.label else f"Query {req.query!r}"
        if self.bad:
            log.warning(
                "%s: dropped %d NaN/Inf value(s) from series %s; they count as missing.",
                where,
                self.bad,
                _metric_text(self.labels or {}),
                extra={"event": "history_values_dropped", "workload": req.label, "kind": "nan", "count": self.bad},
            )
        if self.negative:
            log.warning(
                "%s: dropped %d negative value(s) from series %s; they count as missing "
                "(demand is never negative: use rate() for counters, not deriv() or a hand-made difference).",
                where,
                self.negative,
                _metric_text(self.labels or {}),
                extra={
                    "event": "history_values_dropped",
                    "workload": req.label,
                    "kind": "negative",
                    "count": self.negative,
                },
            )
        if self.beyond:
            log.warning(
                "%s: %d value(s) beyond the float32 limit (%.3g) in series %s (an exporter "
                "overflow or a counter glitch); they count as missing.",
                where,
                self.beyond,
                F32_MAX,
                _metric_text(self.labels or {}),
                extra={
                    "event": "history_values_dropped",
                    "workload": req.label,
                    "kind": "beyond",
                    "count": self.beyond,
                },
            )
        if self.off_grid:
            log.warning(
                "%s: dropped %d sample(s) at times outside the range asked for or between its "
                "%g s steps (a Prometheus answers on the grid: check any proxy in between).",
                where,
                self.off_grid,
                req.step_s,
                extra={
                    "event": "history_values_dropped",
                    "workload": req.label,
                    "kind": "off_grid",
                    "count": self.off_grid,
                },
            )
        if self.labels is not None and self.points == 0 and not req.allow_empty:
            histogram = self.histograms
            raise PrometheusError(
                f"series {_metric_text(self.labels)} came without samples"
                + (" (a native histogram: its points are histograms, not numbers)." if histogram else "."),
                "Wrap a native histogram in histogram_count(rate(...)) or histogram_sum(rate(...)) to get "
                "a number per step."
                if histogram
                else "Check that the URL points at a Prometheus-compatible API (and any proxy in between passes "
                "its answers through unchanged).",
                workload=req.label,
                query=req.query,
                kind="data",
            )
        if self.labels is None and not req.allow_empty:
            raise PrometheusError(
                f"no data between {_iso(self.first)} and {_iso(self.first + max(0, self.n - 1) * req.step_s)}.",
                "Check the metric and label names (try the query in the Prometheus UI), that the "
                "target is scraped, and that the server keeps data that far back (retention).",
                workload=req.label,
                query=req.query,
                kind="data",
                empty=True,
            )
        return Series(req.label, self.first, req.step_s, self.values)


_CLOSERS = {"(": ")", "[": "]", "{": "}"}


@functools.lru_cache(maxsize=65536)  # the same queries every cycle: 6 ms per 1,000 unchanged ones
def batchable(query: str) -> bool:
    """Whether ``query`` may share a request with other policies' queries (``_range_batch``).

    Only if, read as PromQL tokens, every bracket it closes is one it opened and it leaves none
    open, and every string ends: then wrapped in ``(\n...\n)`` it stays inside those parentheses.
    Found by a security audit: a policy whose query began ``vector(0), "scaleahead_batch_index",
    "0", "", "") or label_replace(vector(1e6), "scaleahead_batch_index", "1", ...`` closed the
    ``label_replace`` it was put in and replaced the next workload's history (another tenant's)
    by 1e6 while its own read failed alone. A query that is not batchable is read alone.
    """
    if any((ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in query):
        # Prometheus ends a comment at "\r" too, and a lexer's view of other control characters is
        # not this one's to guess (found by a review: "#\r" hid a closing bracket): read alone.
        return False
    stack: list[str] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c == "#":  # a comment, to the end of the line (the batch puts a line break after the query)
            end = query.find("\n", i)
            if end < 0:
                break
            i = end + 1
            continue
        if c in "\"'`":
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if c != "`" and query[j] == "\\" else 1
            if j >= n:
                return False  # a string that does not end
            i = j + 1
            continue
        if c in _CLOSERS:
            stack.append(_CLOSERS[c])
        elif c in ")]}" and (not stack or stack.pop() != c):
            return False
        i += 1
    return not stack


def _balanced_or(parts: Sequence[str]) -> str:
    """``a or b or c ...`` as a balanced tree: Prometheus' ``or`` costs the size of its left side."""
    if len(parts) == 1:
        return parts[0]
    mid = len(parts) // 2
    return f"({_balanced_or(parts[:mid])}) or ({_balanced_or(parts[mid:])})"


def _decode_values(values: Sequence[Any]) -> tuple[FloatArray, FloatArray]:
    """``[[ts, "v"], ...]`` -> timestamps and float values (``"NaN"``, ``"+Inf"`` parse as such)."""
    if not values:
        empty = np.empty(0, dtype=np.float64)
        return empty, empty
    try:
        ts = np.fromiter((p[0] for p in values), dtype=np.float64, count=len(values))
        raw = [p[1] for p in values]
        if None in raw:  # null parses as NaN: a malformed sample, not a value
            raise TypeError("null value")
        vs = np.array(raw, dtype=np.float64)
        if not np.isfinite(ts).all():  # a time of null or "NaN": malformed, not a missing step
            i = int(np.flatnonzero(~np.isfinite(ts))[0])
            raise ValueError(f"sample {i} is {_excerpt(values[i])}")
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        if str(exc).startswith("sample "):
            raise
        for i, p in enumerate(values):  # find the first bad sample to name it (only on the error path)
            try:
                if isinstance(p, str | bytes) or len(p) != 2 or p[1] is None:
                    raise ValueError
                float(p[0]), float(p[1])
            except (TypeError, ValueError, IndexError, KeyError):
                raise ValueError(f"sample {i} is {_excerpt(p)}") from None
        raise
    if ts.ndim != 1 or vs.ndim != 1:
        raise ValueError(f"a sample is {_excerpt(values[0])}")
    return ts, vs


def server_timeout_s(timeout_s: float) -> float:
    """The evaluation timeout sent to Prometheus with each query (``timeout=``): the client's
    request timeout less a tenth, at most 1 s (29 s for the default 30 s), so the server stops an
    expensive query and says so before the client gives up on it."""
    return timeout_s - min(1.0, timeout_s / 10.0)


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``url`` without ``USER:PASSWORD@``, and the user and password it held (percent-decoded;
    None when it held none). The client sends them as basic auth and shows only the URL without
    them: until 2026-12-06 the whole URL, password included, was in every message and log line
    that named the server (and urllib3 sent neither, so the server answered 401)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, sep, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=hostport)), unquote(user), unquote(password) if sep else None


def _error_type(body: bytes) -> str:
    """The ``errorType`` of a Prometheus error answer ("timeout", "bad_data", ...), else empty."""
    try:
        doc = json.loads(body)
    except ValueError:
        return ""
    return str(doc.get("errorType") or "") if isinstance(doc, dict) else ""


def _fmt(t: float) -> str:
    return repr(float(t)) if t != int(t) else str(int(t))


def _iso(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _metric_text(metric: Mapping[str, str]) -> str:
    name = metric.get("__name__", "")
    labels = ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
    return f"{name}{{{labels}}}"


def _excerpt(value: Any) -> str:
    """A JSON value as short text for an error message."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc)
    return text if len(text) < 200 else text[:197] + "..."


def _error_detail(body: bytes) -> str:
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and doc.get("error"):
            return f"{doc.get('errorType', 'error')}: {doc['error']}"
    except ValueError:
        pass
    text = body.decode("utf-8", "replace").strip()
    if text.startswith("<"):  # an HTML error page (a web server or proxy, not Prometheus): its words
        import re

        text = re.sub(r"<(head|style|script)\b.*?</\1>", " ", text, flags=re.IGNORECASE | re.DOTALL)
        text = " ".join(re.sub(r"<[^>]*>", " ", text).split())
    return text[:200] or "empty body"


def fetch_with_prometheus_api_client(
    url: str, queries: Sequence[str], start: float, end: float, step_s: float, concurrency: int = 8
) -> list[Series]:
    """The same reads through prometheus-api-client, for the comparison in docs/adr/0001.

    Uses ``PrometheusConnect.custom_query_range`` as documented (its own requests session, its
    default headers, so gzip), one call per query (the ranges here fit in one chunk).
    """
    from datetime import UTC, datetime

    from prometheus_api_client import PrometheusConnect

    conn = PrometheusConnect(url=url, disable_ssl=True)
    first, n = grid(start, end, step_s)

    def one(query: str) -> Series:
        result = conn.custom_query_range(
            query,
            start_time=datetime.fromtimestamp(first, UTC),
            end_time=datetime.fromtimestamp(first + (n - 1) * step_s, UTC),
            step=str(step_s),
        )
        values = np.full(n, np.nan)
        if result:
            ts, vs = _decode_values(result[0]["values"])
            idx = np.rint((ts - first) / step_s).astype(np.int64)
            values[idx] = vs
        return Series(query, first, step_s, values)

    with paused_gc(), ThreadPoolExecutor(max_workers=concurrency) as pool:  # same GC treatment as ours
        return list(pool.map(one, queries))
