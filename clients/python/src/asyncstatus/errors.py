"""The errors of the service: one exception class with the problem+json members.

Every answer that is not a success raises an :class:`AsyncStatusError` (or one
of its subclasses, chosen by the problem's ``code``). An answer that is not
problem+json (a proxy's 502 page) raises an :class:`AsyncStatusError` whose
``code`` is ``None`` and whose ``detail`` is the start of the body.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type

if TYPE_CHECKING:  # pragma: no cover
    from .models import Request

# The problem codes of the service (docs/reference.md §7).
UNAUTHENTICATED = "UNAUTHENTICATED"
FORBIDDEN = "FORBIDDEN"
TENANT_FROZEN = "TENANT_FROZEN"
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
VALIDATION_FAILED = "VALIDATION_FAILED"
INVALID_CURSOR = "INVALID_CURSOR"
ALREADY_TERMINAL = "ASYNC_REQUEST_ALREADY_TERMINAL"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
NOT_ACCEPTABLE = "NOT_ACCEPTABLE"
IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
POLLED_TOO_EARLY = "POLLED_TOO_EARLY"
RATE_LIMITED = "RATE_LIMITED"
BACKEND_UNAVAILABLE = "BACKEND_UNAVAILABLE"


class AsyncStatusError(Exception):
    """An answer of the service that is not a success (an RFC 9457 problem).

    Attributes:
        status: the HTTP status code.
        code: the problem's stable code (``NOT_FOUND``, ...), ``None`` when the
            answer was not problem+json.
        title, detail, type, instance: the problem's members.
        errors: ``[{"field": ..., "message": ...}]`` for ``VALIDATION_FAILED``.
        request: the request as it is now (a :class:`Request`), for
            ``ASYNC_REQUEST_ALREADY_TERMINAL``; ``None`` otherwise.
        request_id: the service's log id of the call (not a request's id).
        retry_after: the answer's ``Retry-After`` in seconds (429, 503), or
            ``None`` when absent.
    """

    def __init__(
        self,
        status: int,
        code: Optional[str] = None,
        detail: str = "",
        *,
        title: str = "",
        type: str = "",
        instance: str = "",
        errors: Optional[List[Dict[str, str]]] = None,
        request: Optional["Request"] = None,
        request_id: str = "",
        retry_after: Optional[float] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title
        self.type = type
        self.instance = instance
        self.errors: List[Dict[str, str]] = list(errors or [])
        self.request = request
        self.request_id = request_id
        self.retry_after = retry_after
        super().__init__(self._message())

    def _message(self) -> str:
        s = "asyncstatus: %d" % self.status
        if self.code:
            s += " " + self.code
        if self.detail:
            s += ": " + self.detail
        for e in self.errors:
            s += "; %s: %s" % (e.get("field", ""), e.get("message", ""))
        if self.request_id:
            s += " (request_id %s)" % self.request_id
        return s


class UnauthenticatedError(AsyncStatusError):
    """401 ``UNAUTHENTICATED``: a missing, unknown or revoked credential."""


class ForbiddenError(AsyncStatusError):
    """403 ``FORBIDDEN`` (the key lacks the scope) or ``TENANT_FROZEN``."""


class NotFoundError(AsyncStatusError):
    """404 ``NOT_FOUND``: a request this caller may not see (unknown, another
    tenant's, a wrong poll token, deleted, gone by retention)."""


class ValidationError(AsyncStatusError):
    """400 ``VALIDATION_FAILED`` or ``INVALID_CURSOR``; ``errors`` says what."""


class AlreadyTerminalError(AsyncStatusError):
    """409 ``ASYNC_REQUEST_ALREADY_TERMINAL``: ``request`` is the request as it is."""


class IdempotencyKeyReusedError(AsyncStatusError):
    """422 ``IDEMPOTENCY_KEY_REUSED``: the key came with another body."""


class RateLimitedError(AsyncStatusError):
    """429, either code (``RATE_LIMITED`` or ``POLLED_TOO_EARLY``); ``retry_after``
    says when to come back."""


class PolledTooEarlyError(RateLimitedError):
    """429 ``POLLED_TOO_EARLY`` only: this caller polled sooner than the
    ``Retry-After`` it was given."""


class BackendUnavailableError(AsyncStatusError):
    """503 ``BACKEND_UNAVAILABLE`` (the service cannot reach Redis), or any 503."""


_BY_CODE: Dict[str, Type[AsyncStatusError]] = {
    UNAUTHENTICATED: UnauthenticatedError,
    FORBIDDEN: ForbiddenError,
    TENANT_FROZEN: ForbiddenError,
    NOT_FOUND: NotFoundError,
    VALIDATION_FAILED: ValidationError,
    INVALID_CURSOR: ValidationError,
    ALREADY_TERMINAL: AlreadyTerminalError,
    IDEMPOTENCY_KEY_REUSED: IdempotencyKeyReusedError,
    RATE_LIMITED: RateLimitedError,
    POLLED_TOO_EARLY: PolledTooEarlyError,
    BACKEND_UNAVAILABLE: BackendUnavailableError,
}

# Answers that are not problem+json (a proxy's page) are still told apart by status.
_BY_STATUS: Dict[int, Type[AsyncStatusError]] = {
    401: UnauthenticatedError,
    404: NotFoundError,
    429: RateLimitedError,
    503: BackendUnavailableError,
}


def problem_error(status: int, body: bytes, retry_after: Optional[float]) -> AsyncStatusError:
    """The exception of a failed answer."""
    from .models import Request  # the models import nothing of this module at run time

    p: Any = None
    try:
        p = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        p = None
    if not isinstance(p, dict) or not isinstance(p.get("code"), str) or not p.get("code"):
        d = body.decode("utf-8", "replace").strip()
        if len(d) > 200:
            d = d[:200] + "..."
        cls = _BY_STATUS.get(status, AsyncStatusError)
        return cls(status, None, d or "HTTP %d" % status, retry_after=retry_after)
    code = p["code"]
    req = None
    if isinstance(p.get("request"), dict):
        req = Request.from_json(p["request"])
    errs = p.get("errors")
    cls = _BY_CODE.get(code, _BY_STATUS.get(status, AsyncStatusError))
    return cls(
        status,
        code,
        str(p.get("detail") or ""),
        title=str(p.get("title") or ""),
        type=str(p.get("type") or ""),
        instance=str(p.get("instance") or ""),
        errors=[e for e in errs if isinstance(e, dict)] if isinstance(errs, list) else None,
        request=req,
        request_id=str(p.get("request_id") or ""),
        retry_after=retry_after,
    )
