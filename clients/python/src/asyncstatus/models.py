"""The service's representations as Python objects (docs/reference.md §3)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

QUEUED = "queued"
PROCESSING = "processing"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
EXPIRED = "expired"

TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED, EXPIRED})


def parse_time(v: Any) -> Optional[_dt.datetime]:
    """An RFC 3339 time of the service ("2026-11-29T10:00:04.512Z") as an aware
    datetime; None for null or absent."""
    if not isinstance(v, str) or not v:
        return None
    s = v[:-1] + "+00:00" if v.endswith(("Z", "z")) else v
    return _dt.datetime.fromisoformat(s)


def format_time(t: Union[_dt.datetime, str]) -> str:
    """A datetime as the service reads it (RFC 3339, UTC); strings pass as they are.
    A naive datetime is taken to be UTC."""
    if isinstance(t, str):
        return t
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    t = t.astimezone(_dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


@dataclass
class Progress:
    """A processing request's progress; either member may be None."""

    percent: Optional[int] = None
    message: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {}
        if self.percent is not None:
            d["percent"] = self.percent
        if self.message is not None:
            d["message"] = self.message
        return d


@dataclass
class Failure:
    """Why a request failed or expired: ``code`` (``ERR_...``) and ``reason``."""

    code: str
    reason: str = ""


@dataclass
class Link:
    """A "link" result: where the work's output is, until when."""

    url: str
    expires_at: Union[_dt.datetime, str]
    checksum_sha256: Optional[str] = None
    size_bytes: Optional[int] = None
    content_type: Optional[str] = None

    result_type = "link"

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"url": self.url, "expires_at": format_time(self.expires_at)}
        if self.checksum_sha256 is not None:
            d["checksum_sha256"] = self.checksum_sha256
        if self.size_bytes is not None:
            d["size_bytes"] = self.size_bytes
        if self.content_type is not None:
            d["content_type"] = self.content_type
        return d


@dataclass
class Confirmation:
    """A "confirmation" result: the work was (or was not) done."""

    confirmed: bool = True
    message: Optional[str] = None

    result_type = "confirmation"

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"confirmed": self.confirmed}
        if self.message is not None:
            d["message"] = self.message
        return d


@dataclass
class Answer:
    """An "answer" result: any JSON object (at most ``limits.result_bytes``, 16 KiB)."""

    value: Dict[str, Any]

    result_type = "answer"

    def to_json(self) -> Dict[str, Any]:
        return dict(self.value)


Result = Union[Link, Confirmation, Answer, Dict[str, Any]]
"""What a request completes with; a plain dict is an :class:`Answer`."""


def result_body(res: Optional[Result]) -> Dict[str, Any]:
    """The body of POST .../complete for res (None: a confirmation)."""
    if res is None:
        res = Confirmation(True)
    if isinstance(res, dict):
        res = Answer(res)
    if not isinstance(res, (Link, Confirmation, Answer)):
        raise TypeError("a result is a Link, Confirmation, Answer or dict, not %s" % type(res).__name__)
    return {"result_type": res.result_type, "result": res.to_json()}


@dataclass
class Request:
    """One request as the service represents it (docs/reference.md §3).

    ``raw`` is the representation exactly as decoded from the service. The
    ``etag`` is the answer's ``ETag`` when the request came from a poll.
    """

    id: str
    type: str
    status: str
    done: bool
    version: int
    created_by: str = ""
    created_at: Optional[_dt.datetime] = None
    updated_at: Optional[_dt.datetime] = None
    completed_at: Optional[_dt.datetime] = None
    expires_at: Optional[_dt.datetime] = None
    progress: Optional[Progress] = None
    context: Optional[Dict[str, Any]] = None
    labels: Dict[str, str] = field(default_factory=dict)
    result_type: Optional[str] = None
    result: Optional[Dict[str, Any]] = None
    failure: Optional[Failure] = None
    cancellation_reason: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    etag: Optional[str] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Request":
        pr = d.get("progress")
        fa = d.get("failure")
        ca = d.get("cancellation")
        return cls(
            id=str(d.get("id", "")),
            type=str(d.get("type", "")),
            status=str(d.get("status", "")),
            done=bool(d.get("done", False)),
            version=int(d.get("version", 0)),
            created_by=str(d.get("created_by") or ""),
            created_at=parse_time(d.get("created_at")),
            updated_at=parse_time(d.get("updated_at")),
            completed_at=parse_time(d.get("completed_at")),
            expires_at=parse_time(d.get("expires_at")),
            progress=Progress(pr.get("percent"), pr.get("message")) if isinstance(pr, dict) else None,
            context=d.get("context") if isinstance(d.get("context"), dict) else None,
            labels={str(k): str(v) for k, v in d["labels"].items()} if isinstance(d.get("labels"), dict) else {},
            result_type=d.get("result_type"),
            result=d.get("result") if isinstance(d.get("result"), dict) else None,
            failure=Failure(str(fa.get("code", "")), str(fa.get("reason", ""))) if isinstance(fa, dict) else None,
            cancellation_reason=ca.get("reason") if isinstance(ca, dict) else None,
            raw=d,
        )

    def link(self) -> Link:
        """The "link" result; ValueError when the result is of another type."""
        r = self._result("link")
        return Link(r["url"], parse_time(r["expires_at"]) or r["expires_at"], r.get("checksum_sha256"),
                    r.get("size_bytes"), r.get("content_type"))

    def confirmation(self) -> Confirmation:
        """The "confirmation" result; ValueError when the result is of another type."""
        r = self._result("confirmation")
        return Confirmation(bool(r.get("confirmed")), r.get("message"))

    def answer(self) -> Dict[str, Any]:
        """The "answer" result; ValueError when the result is of another type."""
        return self._result("answer")

    def _result(self, typ: str) -> Dict[str, Any]:
        if self.result_type != typ or self.result is None:
            raise ValueError("request %s: result_type is %r, not %r" % (self.id, self.result_type, typ))
        return self.result


@dataclass
class Created(Request):
    """The answer to :meth:`Client.create`: the request, its poll token (give it to
    whoever waits), its absolute ``location``, the ``operation_location`` that
    Azure-style long-running-operation pollers follow, and the ``retry_after``
    the service suggests before the first poll (pass it to :meth:`Client.wait`)."""

    poll_token: str = field(default="", repr=False)
    location: str = ""
    operation_location: str = ""
    retry_after: Optional[float] = None


@dataclass
class Event:
    """One status change of a request; ``from_status`` is None for the creation,
    ``by`` the key id that made it or ``system``."""

    seq: int
    at: Optional[_dt.datetime]
    from_status: Optional[str]
    to_status: str
    by: str

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Event":
        return cls(int(d.get("seq", 0)), parse_time(d.get("at")), d.get("from"), str(d.get("to", "")),
                   str(d.get("by", "")))


@dataclass
class Page:
    """One page of a listing; ``next_cursor`` is None on the last page."""

    items: List[Request]
    next_cursor: Optional[str]


@dataclass
class PollResult:
    """The answer to one :meth:`Client.poll`.

    request: the current state, None when ``not_modified``.
    etag: names this state for the next ``if_none_match``.
    retry_after: when the service wants the next poll, in seconds (None: it
        did not say; a terminal answer does not).
    long_polled: the service applied ``Prefer: wait``; poll again at once.
    """

    request: Optional[Request]
    not_modified: bool
    etag: Optional[str]
    retry_after: Optional[float]
    long_polled: bool


@dataclass
class WatchEvent:
    """One event of :meth:`Client.watch`: ``id`` is the watch's position after
    it (pass it as ``last_event_id`` to resume from here); ``request`` the
    request as the change left it, None for a reset; ``reset`` says the
    changes since the position resumed from are no longer all known (list
    again)."""

    id: str
    request: Optional["Request"]
    reset: bool = False
