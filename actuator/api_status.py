"""The message of the API server's answer to a refused request (its ``Status`` object), for outcomes and logs.

The Kubernetes API server answers an error with a ``Status`` (``{"kind": "Status", "message":
..., "reason": ..., "details": ...}``); the official client keeps it, as text or bytes, in
``ApiException.body``. Its ``message`` is what says why (``exceeded quota: ...``, ``admission
webhook "..." denied the request: ...``), so it is quoted rather than guessed from the HTTP status.
A 429 (API Priority and Fairness throttling) also says how long to wait (``retry_after``).
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

#: A quoted message longer than this (characters) is cut, with "..." (a webhook may say a lot).
MAX_MESSAGE = 300


def status_message(exc: BaseException) -> str:
    """The ``message`` of the ``Status`` in ``exc``'s body, on one line (whitespace runs made one
    space) and at most ``MAX_MESSAGE`` characters; "" when there is none (no body, not a Status)."""
    data = _status(exc)
    message = data.get("message") if data is not None else None
    if not isinstance(message, str):
        return ""
    return one_line(message)


def _status(exc: BaseException) -> dict[str, Any] | None:
    """The ``Status`` object in ``exc``'s body (text or bytes, as the official client keeps it);
    None when there is none (no body, not JSON, not an object)."""
    body: Any = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str) or not body.strip():
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` on one line, whitespace runs made one space, cut at ``limit`` characters with "..."."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


#: The longest wait a ``Retry-After`` is believed for (s): beyond it the answer is treated as
#: unreadable (the per-workload back-off, capped at ``loop.max_backoff_s``, applies as for any 429).
MAX_RETRY_AFTER_S = 3600.0


def retry_after(exc: BaseException) -> float | None:
    """How long the API server asked to wait before the next request (s), from a 429's or 503's
    ``Retry-After`` header (whole seconds, as the Kubernetes API server sends it) or its Status'
    ``details.retryAfterSeconds``; None when it named no wait or an unreadable one (an HTTP date, a
    negative number, more than ``MAX_RETRY_AFTER_S``)."""
    headers: Any = getattr(exc, "headers", None)
    said: Any = None
    if headers is not None:
        with contextlib.suppress(AttributeError, TypeError):
            said = headers.get("Retry-After")
    if said is None:
        data = _status(exc)
        details = data.get("details") if data is not None else None
        said = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    if isinstance(said, bool):
        return None
    try:
        wait = float(str(said).strip()) if said is not None else math.nan
    except ValueError:
        return None
    return wait if 0.0 <= wait <= MAX_RETRY_AFTER_S else None
