"""The message of the API server's answer to a refused request (its ``Status`` object), for outcomes and logs.

The Kubernetes API server answers an error with a ``Status`` (``{"kind": "Status", "message":
..., "reason": ..., "details": ...}``); the official client keeps it, as text or bytes, in
``ApiException.body``. Its ``message`` is what says why (``exceeded quota: ...``, ``admission
webhook "..." denied the request: ...``), so it is quoted rather than guessed from the HTTP status.
"""

from __future__ import annotations

import json
from typing import Any

#: A quoted message longer than this (characters) is cut, with "..." (a webhook may say a lot).
MAX_MESSAGE = 300


def status_message(exc: BaseException) -> str:
    """The ``message`` of the ``Status`` in ``exc``'s body, on one line (whitespace runs made one
    space) and at most ``MAX_MESSAGE`` characters; "" when there is none (no body, not a Status)."""
    body: Any = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str) or not body.strip():
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, str):
        return ""
    return one_line(message)


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` on one line, whitespace runs made one space, cut at ``limit`` characters with "..."."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."
