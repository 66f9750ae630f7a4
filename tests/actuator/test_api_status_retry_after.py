"""The wait a throttling API server asks for (``actuator.api_status.retry_after``), read from the
official client's ``ApiException`` as the API server's 429 answer carries it."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from actuator.api_status import MAX_RETRY_AFTER_S, retry_after


def _exc(headers: dict[str, str] | None = None, details: object = None, body: str | None = None) -> ApiException:
    exc = ApiException(status=429, reason="Too Many Requests")
    exc.headers = headers
    if body is None and details is not None:
        body = json.dumps({"kind": "Status", "code": 429, "message": "Too many requests", "details": details})
    exc.body = body
    return exc


def test_the_header_is_read_in_seconds() -> None:
    assert retry_after(_exc({"Retry-After": "5"})) == 5.0
    assert retry_after(_exc({"Retry-After": " 0 "})) == 0.0


def test_the_header_wins_over_the_status_details() -> None:
    assert retry_after(_exc({"Retry-After": "7"}, {"retryAfterSeconds": 30})) == 7.0


def test_without_a_header_the_status_details_are_read() -> None:
    assert retry_after(_exc(None, {"retryAfterSeconds": 30})) == 30.0
    assert retry_after(_exc({"Content-Type": "application/json"}, {"retryAfterSeconds": 2})) == 2.0


@pytest.mark.parametrize(
    ("headers", "details", "body"),
    [
        (None, None, None),  # no answer body at all
        ({"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, None, None),  # an HTTP date: not read
        ({"Retry-After": "-3"}, None, None),
        ({"Retry-After": "nan"}, None, None),
        ({"Retry-After": str(MAX_RETRY_AFTER_S + 1)}, None, None),
        (None, {"retryAfterSeconds": True}, None),
        (None, {"retryAfterSeconds": "soon"}, None),
        (None, {"name": "web"}, None),
        (None, None, "<html>proxy error</html>"),
        (None, None, '["not", "a", "status"]'),
    ],
)
def test_no_wait_or_an_unreadable_one_is_none(headers, details, body) -> None:  # type: ignore[no-untyped-def]
    assert retry_after(_exc(headers, details, body)) is None


def test_an_exception_without_headers_or_body_is_none() -> None:
    assert retry_after(ValueError("not an API answer")) is None
