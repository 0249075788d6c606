"""The client of one asyncstatus service."""

from __future__ import annotations

import base64
import contextlib
import contextvars
import datetime as _dt
import email.utils
import http.client
import json
import math
import os
import random
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Type, Union

from .errors import (
    AsyncStatusError,
    PolledTooEarlyError,
    RateLimitedError,
    problem_error,
)
from .models import (
    Created,
    Event,
    Page,
    PollResult,
    Progress,
    Request,
    Result,
    WatchEvent,
    format_time,
    result_body,
)

if TYPE_CHECKING:  # pragma: no cover
    from .job import Job

__all__ = ["Client", "RetryPolicy", "WaitTimeout", "DEFAULT_USER_AGENT"]

DEFAULT_USER_AGENT = "asyncstatus-python-client/1"

# Errors of the connection itself (refused, reset, cut, timed out): retried
# where a 503 would be.
TRANSPORT_ERRORS: Tuple[Type[BaseException], ...] = (OSError, http.client.HTTPException)

# An ETag that matches no state (versions start at 1): a first long poll with
# it answers at once with the current state instead of waiting for a change.
_NO_VERSION = '"0"'

# The least time between two long polls that brought no news, so that an
# intermediary answering 304 at once cannot make wait() spin.
_MIN_LONG_POLL = 0.1

#: The most ids one :meth:`Client.lookup` takes.
MAX_LOOKUP_IDS = 100

# What is read of one answer at most (a page of 200 requests fits many times).
_MAX_ANSWER = 64 << 20


class WaitTimeout(TimeoutError):
    """:meth:`Client.wait` (or a poll inside it) ran out of time; ``last`` is the
    last state seen, None if none."""

    def __init__(self, request_id: str, timeout: float, last: Optional[Request]) -> None:
        super().__init__("asyncstatus: request %s not done within %gs" % (request_id, timeout))
        self.last = last


@dataclass(frozen=True)
class RetryPolicy:
    """How a call that may be retried (GET, and POST under its Idempotency-Key)
    is retried after a transport error or a 503.

    max_attempts: tries of one call, the first included (1: no retries).
    min_backoff: seconds before the first retry; doubles with every retry,
        each wait drawn between half of it and all of it (jitter), and never
        shorter than the service's Retry-After.
    max_backoff: caps the doubling (a longer Retry-After still wins).
    """

    max_attempts: int = 4
    min_backoff: float = 0.2
    max_backoff: float = 10.0

    def backoff(self, n: int, retry_after: Optional[float] = None) -> float:
        """The jittered wait before retry number n (1 for the first)."""
        d = min(self.min_backoff * 2.0 ** max(0, n - 1), self.max_backoff)
        d = d / 2 + random.uniform(0, d / 2)
        return max(d, _not_sooner(retry_after))


def _not_sooner(retry_after: Optional[float]) -> float:
    """Retry-After with a little jitter on top, so that the callers a service sent
    away together do not come back together; never less than it asked."""
    if not retry_after or retry_after <= 0:
        return 0.0
    return retry_after + random.uniform(0, 0.1 + 0.1 * retry_after)


def _retry_after(v: Optional[str]) -> Optional[float]:
    """Retry-After in seconds: whole seconds, or an HTTP date; None when absent or garbled."""
    if v is None or not v.strip():
        return None
    v = v.strip()
    if v.isdigit():
        return float(int(v))
    try:
        t = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, (t - _dt.datetime.now(_dt.timezone.utc)).total_seconds())


def _preference_applied(v: Optional[str]) -> bool:
    """Whether a Preference-Applied header says the service applied ``wait``."""
    for part in (v or "").split(","):
        if part.split("=", 1)[0].strip().lower() == "wait":
            return True
    return False


# The caller's W3C trace context (docs/reference.md §17), set by trace_context.
_trace: "contextvars.ContextVar[Optional[Tuple[str, str]]]" = contextvars.ContextVar("asyncstatus_trace", default=None)


@contextlib.contextmanager
def trace_context(traceparent: str, tracestate: str = "") -> Iterator[None]:
    """Within the block, every call of every Client sends ``traceparent`` (and
    ``tracestate``) as given: the W3C trace context of the caller's work, e.g.
    the header of the request it is serving, or what its OpenTelemetry
    propagator injects. The service's spans then join that trace, and a
    create's webhook deliveries carry it on. It follows the code through
    threads started with ``contextvars.copy_context`` and through asyncio
    tasks, as contextvars do. The service ignores a traceparent that is not
    valid."""
    token = _trace.set((traceparent, tracestate))
    try:
        yield
    finally:
        _trace.reset(token)


def new_idempotency_key() -> str:
    """A random Idempotency-Key (128 bits)."""
    return "asc_" + base64.urlsafe_b64encode(os.urandom(16)).decode("ascii").rstrip("=")


class _Answer:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


class Client:
    """A client of one asyncstatus service. Safe to share between threads (every
    call has a connection of its own).

    Args:
        url: the service's base URL, ``https://status.example`` (a path prefix
            is kept).
        api_key: authenticates every call (``Authorization: Bearer``); its
            scopes decide what works: read, write (create, transitions),
            admin (delete).
        poll_token: a request's poll token (``X-Poll-Token``): reads only that
            request (get, poll, wait, stream, events). Used when no api_key is set.
        timeout: seconds a single call may wait for the service (connecting,
            and each read); long polls add their own wait to it. default 30.
        stream_read_timeout: seconds without a byte after which a stream is
            taken as cut and resumed (the service sends a keep-alive every
            15 s). default 45.
        retry: the RetryPolicy of single calls. default RetryPolicy().
        user_agent: the User-Agent header.
        ssl_context: for https URLs; default ``ssl.create_default_context()``.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: Optional[str] = None,
        poll_token: Optional[str] = None,
        timeout: float = 30.0,
        stream_read_timeout: float = 45.0,
        retry: Optional[RetryPolicy] = None,
        user_agent: str = DEFAULT_USER_AGENT,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        u = urllib.parse.urlsplit(url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("asyncstatus: base URL %r: want http(s)://host" % url)
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path
        self._api_key = api_key
        self._poll_token = poll_token
        self._timeout = timeout
        self._stream_read_timeout = stream_read_timeout
        self._retry = retry or RetryPolicy()
        self._ua = user_agent
        self._ssl = ssl_context
        # Whether the service applied Prefer: wait the last time this client
        # asked (None: unknown); wait() then skips the create's Retry-After.
        self._long_poll: Optional[bool] = None

    # ---- the transport ----

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._ssl or ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Dict[str, str]] = None,
        body: Optional[bytes] = None,
        headers: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = None,
        accept: str = "application/json",
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse, Optional[socket.socket]]:
        """Sends one request; the caller reads the answer and closes the connection.
        The socket is returned too: http.client lets go of it once an answer that
        ends with the connection has begun, and a stream's reads need its timeout."""
        target = self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        h = {"User-Agent": self._ua, "Accept": accept}
        if body is not None:
            h["Content-Type"] = "application/json"
        if self._api_key:
            h["Authorization"] = "Bearer " + self._api_key
        elif self._poll_token:
            h["X-Poll-Token"] = self._poll_token
        tc = _trace.get()
        if tc and tc[0]:
            h["traceparent"] = tc[0]
            if tc[1]:
                h["tracestate"] = tc[1]
        h.update(headers or {})
        conn = self._connection(self._timeout if timeout is None else timeout)
        try:
            conn.request(method, target, body=body, headers=h)
            sock = conn.sock
            return conn, conn.getresponse(), sock
        except BaseException:
            conn.close()
            raise

    def _once(self, method: str, path: str, body: Optional[bytes], **kw: Any) -> _Answer:
        conn, res, _ = self._send(method, path, body=body, **kw)
        try:
            data = res.read(_MAX_ANSWER)
        finally:
            conn.close()
        if 200 <= res.status < 300 or res.status == 304:
            return _Answer(res.status, res.headers, data)
        raise problem_error(res.status, data, _retry_after(res.headers.get("Retry-After")))

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        idempotency_key: Optional[str] = None,
        attempts: Optional[int] = None,
        **kw: Any,
    ) -> _Answer:
        """One API call, retried as the README says: GET after a transport error or a
        503; POST likewise under one Idempotency-Key; DELETE never."""
        # allow_nan=False: the service takes I-JSON only, so NaN fails here, not there.
        data = None if body is None else json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
        headers = dict(kw.pop("headers", None) or {})
        if method == "POST":
            headers["Idempotency-Key"] = idempotency_key or new_idempotency_key()
        n_max = attempts or self._retry.max_attempts
        if method not in ("GET", "POST"):
            n_max = 1
        n = 1
        while True:
            try:
                return self._once(method, path, data, headers=headers, **kw)
            except AsyncStatusError as e:
                if e.status != 503 or n >= n_max:
                    raise
                wait = self._retry.backoff(n, e.retry_after)
            except TRANSPORT_ERRORS:
                if n >= n_max:
                    raise
                wait = self._retry.backoff(n)
            time.sleep(wait)
            n += 1

    @staticmethod
    def _path(request_id: str, suffix: str = "") -> str:
        if not request_id:
            raise ValueError("asyncstatus: empty request id")
        p = "/v1/requests/" + urllib.parse.quote(request_id, safe="")
        return p + "/" + suffix if suffix else p

    # ---- requests ----

    def create(
        self,
        type: str,
        *,
        context: Optional[Dict[str, Any]] = None,
        estimated_duration: Optional[float] = None,
        labels: Optional[Dict[str, str]] = None,
        idempotency_key: Optional[str] = None,
    ) -> Created:
        """Creates a request (POST /v1/requests, write scope).

        Every try of one call carries the same Idempotency-Key (yours, or a
        random one made for the call), so a retry after a lost answer makes no
        second request. Pass your own key to be safe across process restarts too.

        Args:
            type: ``^[a-z0-9][a-z0-9._-]{0,63}$``, e.g. ``statement.export``.
            context: a JSON object returned with the request (4 KiB by default).
            estimated_duration: seconds (1..86400, rounded up); sets the first
                ``retry_after``.
            labels: at most 8 ``name: value`` pairs, fixed at create, that
                listings filter by (``label_selector``).
        """
        body: Dict[str, Any] = {"type": type}
        if context is not None:
            body["context"] = context
        if estimated_duration is not None:
            body["estimated_duration_seconds"] = int(math.ceil(estimated_duration))
        if labels:
            body["labels"] = labels
        a = self._call("POST", "/v1/requests", body=body, idempotency_key=idempotency_key)
        d = a.json()
        base = Request.from_json(d)
        c = Created(**{f: getattr(base, f) for f in base.__dataclass_fields__})
        c.poll_token = str(d.get("poll_token") or "")
        c.location = a.headers.get("Location") or ""
        c.operation_location = a.headers.get("Operation-Location") or ""
        c.retry_after = _retry_after(a.headers.get("Retry-After"))
        c.etag = a.headers.get("ETag") or '"%d"' % c.version
        return c

    def get(self, request_id: str, *, since: Optional[Request] = None) -> Request:
        """Reads a request (GET /v1/requests/{id}, read scope or its poll token).

        With ``since`` (a state read before), the call is conditional
        (``If-None-Match`` with its ETag): when the request has not changed the
        service answers 304 and ``since`` itself is returned.

        Retried after a transport error or a 503; a 429 (``POLLED_TOO_EARLY``:
        polled again before the last ``Retry-After``) raises. To follow a
        request to its end use :meth:`wait`, which paces itself.
        """
        headers = {}
        if since is not None:
            headers["If-None-Match"] = since.etag or '"%d"' % since.version
        a = self._call("GET", self._path(request_id), headers=headers)
        if a.status == 304 and since is not None:
            return since
        r = Request.from_json(a.json())
        r.etag = a.headers.get("ETag")
        return r

    def poll(
        self,
        request_id: str,
        *,
        if_none_match: Optional[str] = None,
        wait: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> PollResult:
        """One poll, conditional (``if_none_match``: an ETag) and long (``wait``:
        seconds for ``Prefer: wait``, clamped by the service to its wait.max).
        Not retried: a caller that loops over poll paces itself by the result's
        ``retry_after`` and the errors' ``retry_after``, as :meth:`wait` does.
        ``timeout`` bounds the whole call (default: the client's timeout plus
        the wait)."""
        headers: Dict[str, str] = {}
        if wait:
            headers["Prefer"] = "wait=%d" % max(1, int(wait))
        if if_none_match:
            headers["If-None-Match"] = if_none_match
        if timeout is None:
            timeout = self._timeout + (wait or 0)
        a = self._call("GET", self._path(request_id), headers=headers, attempts=1, timeout=timeout)
        applied = _preference_applied(a.headers.get("Preference-Applied"))
        if wait:
            self._long_poll = applied
        req = None
        if a.status != 304:
            req = Request.from_json(a.json())
            req.etag = a.headers.get("ETag")
        return PollResult(
            request=req,
            not_modified=a.status == 304,
            etag=a.headers.get("ETag") or if_none_match,
            retry_after=_retry_after(a.headers.get("Retry-After")),
            long_polled=applied,
        )

    def wait(
        self,
        request_id: str,
        *,
        timeout: Optional[float] = None,
        retry_after: Optional[float] = None,
        on_change: Optional[Callable[[Request], None]] = None,
        wait_seconds: int = 25,
        max_backoff: float = 30.0,
        max_errors: int = 10,
    ) -> Request:
        """Follows a request until it is terminal and returns its final state. A
        failed, cancelled or expired request is not an error: read its ``status``.

        Every poll asks for a long poll (``Prefer: wait``) with ``If-None-Match``
        (the first with an ETag of no state, so that it answers at once). Where
        the service applies it (``Preference-Applied``), each change comes back
        at once and the next poll goes out at once. Where it does not (a proxy
        that drops the header, a replica at wait.max_waiters, an older
        service), polls are paced by each answer's ``Retry-After``. A 429 is
        waited out for its ``Retry-After`` plus jitter (a ``RATE_LIMITED`` also
        backs off), a 503 or a transport error backs off (doubling, jittered,
        capped by ``max_backoff``, never shorter than a ``Retry-After``);
        ``max_errors`` of those in a row raise the last one.

        Args:
            timeout: seconds in all; then :class:`WaitTimeout` (with ``last``).
                default: no limit.
            retry_after: the create's ``retry_after``, waited before the first
                poll unless this client has seen the service long-poll.
            on_change: called with every new state (a higher version), the
                first and the terminal one included, in order.
            wait_seconds: the long poll asked for; 0 polls only.

        Raises:
            WaitTimeout: the timeout passed first.
            AsyncStatusError: an answer other than 429 and 503 (not found,
                credentials), or ``max_errors`` 503s in a row.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        pace = RetryPolicy(min_backoff=self._retry.min_backoff, max_backoff=max_backoff)
        last: Optional[Request] = None
        etag: Optional[str] = None
        errs = limited = 0
        delay = retry_after or 0.0
        if self._long_poll:
            delay = 0.0

        def left() -> float:
            return math.inf if deadline is None else deadline - time.monotonic()

        while True:
            if delay > 0:
                time.sleep(max(0.0, min(delay, left())))
            if left() <= 0:
                raise WaitTimeout(request_id, timeout or 0, last)
            asked = wait_seconds
            call_timeout: Optional[float] = None
            if asked > 0:
                asked = min(asked, max(1, int(math.ceil(left())))) if deadline is not None else asked
            if deadline is not None:
                call_timeout = min(self._timeout + max(asked, 0), left() + 0.05)
            inm = etag or (_NO_VERSION if asked > 0 else None)
            start = time.monotonic()
            try:
                pr = self.poll(request_id, if_none_match=inm, wait=asked if asked > 0 else None,
                               timeout=call_timeout)
            except RateLimitedError as e:
                limited += 1
                delay = _not_sooner(e.retry_after if e.retry_after is not None else 1.0)
                if not isinstance(e, PolledTooEarlyError):
                    delay = max(delay, pace.backoff(limited, e.retry_after))
                continue
            except AsyncStatusError as e:
                if e.status != 503:
                    raise
                errs += 1
                if errs >= max_errors:
                    raise
                delay = pace.backoff(errs, e.retry_after)
                continue
            except TRANSPORT_ERRORS:
                if left() <= 0:
                    raise WaitTimeout(request_id, timeout or 0, last) from None
                errs += 1
                if errs >= max_errors:
                    raise
                delay = pace.backoff(errs)
                continue
            errs = limited = 0
            r = pr.request
            if r is not None:
                if last is None or r.version > last.version:
                    if on_change is not None:
                        on_change(r)
                if last is None or r.version >= last.version:
                    last = r
                etag = pr.etag
                if r.done:
                    return last
            if pr.long_polled:
                delay = 0.0
                if pr.not_modified and time.monotonic() - start < _MIN_LONG_POLL:
                    delay = _MIN_LONG_POLL
            elif pr.retry_after is not None:
                delay = pr.retry_after
            else:
                delay = 1.0

    def stream(
        self,
        request_id: str,
        *,
        last_event_id: Optional[str] = None,
        timeout: Optional[float] = None,
        max_backoff: float = 30.0,
        max_errors: int = 10,
    ) -> Iterator[Request]:
        """Yields the states of a request over its event stream
        (GET /v1/requests/{id}/stream, read scope or its poll token), the
        current one first, versions strictly increasing, and ends after the
        terminal one.

        A stream the service ends (``wait.stream_max``, a restart) or that is
        cut is resumed with ``Last-Event-ID`` after the reconnection time the
        stream set (``retry:``, 2 s), or a longer backoff after errors (429 and
        503 are waited out, never sooner than their ``Retry-After``), so that no
        state is missed and none is repeated. ``max_errors`` failed connections
        in a row raise the last error; other error answers raise at once.

        ``last_event_id`` resumes from a version seen earlier; when it is the
        terminal version the generator yields nothing. ``timeout`` (seconds in
        all; default none) raises :class:`WaitTimeout` with the last state seen,
        also while the stream is silent between two states.
        """
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float:
            return math.inf if deadline is None else deadline - time.monotonic()

        last_id = last_event_id
        reconnect = 2.0
        last: Optional[Request] = None
        errs = 0
        pace = RetryPolicy(min_backoff=self._retry.min_backoff, max_backoff=max_backoff)
        path = self._path(request_id, "stream")
        while True:
            start = time.monotonic()
            got = 0
            err: Optional[BaseException] = None
            retry_after: Optional[float] = None
            conn: Optional[http.client.HTTPConnection] = None
            try:
                headers = {"Cache-Control": "no-store"}
                if last_id:
                    headers["Last-Event-ID"] = last_id
                conn, res, sock = self._send("GET", path, headers=headers, accept="text/event-stream",
                                             timeout=min(self._stream_read_timeout, left()))

                def before_read() -> None:
                    # Each read may wait for the stream's keep-alive, but never past the deadline.
                    if sock is not None:
                        sock.settimeout(max(0.001, min(self._stream_read_timeout, left())))

                if res.status == 204:
                    return
                if res.status != 200:
                    raise problem_error(res.status, res.read(1 << 20), _retry_after(res.headers.get("Retry-After")))
                ct = res.headers.get("Content-Type") or ""
                if not ct.startswith("text/event-stream"):
                    raise AsyncStatusError(res.status, None, "stream answered %r, not text/event-stream" % ct)
                for ev_id, ev_type, data, retry in _sse_events(res, before_read):
                    if retry is not None:
                        reconnect = retry
                    if ev_id is None:
                        continue  # only a retry: field
                    last_id = ev_id
                    if ev_type not in ("request", ""):
                        continue  # an event type of a later version of the API
                    r = Request.from_json(json.loads(data))
                    r.etag = '"%d"' % r.version
                    got += 1
                    if last is None or r.version > last.version:
                        last = r
                        yield r
                    if r.done:
                        return
            except AsyncStatusError as e:
                if e.status not in (429, 503):
                    raise
                err, retry_after = e, e.retry_after
            except TRANSPORT_ERRORS as e:
                if left() <= 0:
                    raise WaitTimeout(request_id, timeout or 0, last) from None
                err = e
            finally:
                if conn is not None:
                    conn.close()
            delay = reconnect
            if err is None and (got > 0 or time.monotonic() - start > reconnect):
                errs = 0  # a stream that ended cleanly (wait.stream_max): resume
            else:
                errs += 1
                if errs >= max_errors:
                    if err is None:
                        raise ConnectionError("asyncstatus: stream of %s ended before its first event" % request_id)
                    raise err
                delay = max(delay, pace.backoff(errs, retry_after))
            time.sleep(max(0.0, min(delay, left())))
            if left() <= 0:
                raise WaitTimeout(request_id, timeout or 0, last)

    def watch(
        self,
        *,
        type: Optional[str] = None,
        status: Union[str, Iterable[str], None] = None,
        label_selector: Union[str, Dict[str, str], None] = None,
        last_event_id: Optional[str] = None,
        max_backoff: float = 30.0,
        max_errors: int = 10,
    ) -> Iterator[WatchEvent]:
        """Yields every change of the tenant's requests that the filters keep
        (GET /v1/requests?watch=true, read scope; docs/reference.md §16): each
        create, transition and heartbeat, made on any replica, as a
        :class:`WatchEvent` (``request`` as the change left it), each request's
        changes in order. ``status`` keeps changes that left the request in one
        of these statuses.

        A watch the service ends (``wait.stream_max``, a restart) or that is cut
        is resumed with ``Last-Event-ID``, so that no change is missed and none
        repeated; when the service can no longer replay what was missed (older
        than ``wait.replay_window``), the next event has ``reset`` set: list
        again, then go on. ``last_event_id`` resumes from an event's ``id``
        saved earlier. 429 and 503 are waited out; ``max_errors`` failed
        connections in a row raise the last error; other error answers raise
        at once. The generator runs until the caller stops iterating.
        """
        q = self._list_query(type, status, None, None, label_selector, None, None)
        q["watch"] = "true"
        pos = [last_event_id or ""]  # every id, one without an event too (a filtered watch's position)
        reconnect = 2.0
        errs = 0
        pace = RetryPolicy(min_backoff=self._retry.min_backoff, max_backoff=max_backoff)
        while True:
            got = 0
            err: Optional[BaseException] = None
            retry_after: Optional[float] = None
            conn: Optional[http.client.HTTPConnection] = None
            try:
                headers = {"Cache-Control": "no-store"}
                if pos[0]:
                    headers["Last-Event-ID"] = pos[0]
                conn, res, sock = self._send("GET", "/v1/requests", query=q, headers=headers,
                                             accept="text/event-stream", timeout=self._stream_read_timeout)

                def before_read() -> None:
                    if sock is not None:
                        sock.settimeout(self._stream_read_timeout)

                if res.status != 200:
                    raise problem_error(res.status, res.read(1 << 20), _retry_after(res.headers.get("Retry-After")))
                ct = res.headers.get("Content-Type") or ""
                if not ct.startswith("text/event-stream"):
                    raise AsyncStatusError(res.status, None, "watch answered %r, not text/event-stream" % ct)
                for ev_id, ev_type, data, retry in _sse_events(res, before_read, lambda i: pos.__setitem__(0, i)):
                    if retry is not None:
                        reconnect = retry
                    if ev_id is None:
                        continue  # only a retry: field
                    if ev_type == "reset":
                        got += 1
                        yield WatchEvent(id=ev_id, request=None, reset=True)
                    elif ev_type in ("request", ""):
                        r = Request.from_json(json.loads(data))
                        r.etag = '"%d"' % r.version
                        got += 1
                        yield WatchEvent(id=ev_id, request=r, reset=False)
                    # other event types: of a later version of the API
            except AsyncStatusError as e:
                if e.status not in (429, 503):
                    raise
                err, retry_after = e, e.retry_after
            except TRANSPORT_ERRORS as e:
                err = e
            finally:
                if conn is not None:
                    conn.close()
            delay = reconnect
            if err is None and got > 0:
                errs = 0  # a watch that ended cleanly (wait.stream_max): resume
            else:
                # an error, or a watch the service did not hold (no wait slot,
                # or Redis away): it says retry and ends
                errs += 1
                if errs >= max_errors:
                    if err is None:
                        raise ConnectionError("asyncstatus: the service did not hold the watch")
                    raise err
                delay = max(delay, pace.backoff(errs, retry_after))
            time.sleep(delay)

    def _list_query(
        self,
        type: Optional[str],
        status: Union[str, Iterable[str], None],
        created_after: Union[_dt.datetime, str, None],
        created_before: Union[_dt.datetime, str, None],
        label_selector: Union[str, Dict[str, str], None],
        limit: Optional[int],
        cursor: Optional[str],
    ) -> Dict[str, str]:
        q: Dict[str, str] = {}
        if type:
            q["type"] = type
        if status:
            q["status"] = status if isinstance(status, str) else ",".join(status)
        if created_after is not None:
            q["created_after"] = format_time(created_after)
        if created_before is not None:
            q["created_before"] = format_time(created_before)
        if label_selector:
            q["label_selector"] = label_selector if isinstance(label_selector, str) else ",".join(
                "%s=%s" % kv for kv in label_selector.items())
        if limit:
            q["limit"] = str(limit)
        if cursor:
            q["cursor"] = cursor
        return q

    def list_page(
        self,
        *,
        type: Optional[str] = None,
        status: Union[str, Iterable[str], None] = None,
        created_after: Union[_dt.datetime, str, None] = None,
        created_before: Union[_dt.datetime, str, None] = None,
        label_selector: Union[str, Dict[str, str], None] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Page:
        """One page of the tenant's requests (GET /v1/requests, read scope; API keys
        only), newest first. ``status``: one status or several;
        ``label_selector``: ``{"name": "value", ...}`` or ``"name=value,..."``
        (at most 4 terms, all must match); ``limit``
        1..200 (the service's default 50); ``cursor``: a page's ``next_cursor``,
        with the same filters."""
        q = self._list_query(type, status, created_after, created_before, label_selector, limit, cursor)
        d = self._call("GET", "/v1/requests", query=q).json()
        return Page([Request.from_json(x) for x in d.get("items") or []], d.get("next_cursor") or None)

    def pages(
        self,
        *,
        type: Optional[str] = None,
        status: Union[str, Iterable[str], None] = None,
        created_after: Union[_dt.datetime, str, None] = None,
        created_before: Union[_dt.datetime, str, None] = None,
        label_selector: Union[str, Dict[str, str], None] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Iterator[Page]:
        """The pages of a listing (the filters of :meth:`list_page`), following the
        cursors to the last page."""
        while True:
            p = self.list_page(type=type, status=status, created_after=created_after,
                               created_before=created_before, label_selector=label_selector, limit=limit,
                               cursor=cursor)
            yield p
            if not p.next_cursor:
                return
            cursor = p.next_cursor

    def list(
        self,
        *,
        type: Optional[str] = None,
        status: Union[str, Iterable[str], None] = None,
        created_after: Union[_dt.datetime, str, None] = None,
        created_before: Union[_dt.datetime, str, None] = None,
        label_selector: Union[str, Dict[str, str], None] = None,
        limit: Optional[int] = None,
    ) -> Iterator[Request]:
        """Every request of a listing, newest first, page after page (the filters
        of :meth:`list_page`; ``limit`` is the page size)."""
        for p in self.pages(type=type, status=status, created_after=created_after,
                            created_before=created_before, label_selector=label_selector, limit=limit):
            yield from p.items

    def lookup(self, ids: Iterable[str]) -> List[Request]:
        """Reads many requests in one call (GET /v1/requests?ids=..., read scope):
        the visible ones among 1..100 ids, newest first. An id the caller may not
        see (unknown, another tenant's, deleted, gone by retention) is simply
        absent. The service counts one read per id asked."""
        want = list(ids)
        if not 1 <= len(want) <= MAX_LOOKUP_IDS:
            raise ValueError("asyncstatus: lookup takes 1 to %d ids, not %d" % (MAX_LOOKUP_IDS, len(want)))
        if any(not i or "," in i for i in want):
            raise ValueError("asyncstatus: lookup: an empty id or one holding a comma")
        d = self._call("GET", "/v1/requests", query={"ids": ",".join(want)}).json()
        return [Request.from_json(x) for x in d.get("items") or []]

    def counts(
        self,
        *,
        type: Optional[str] = None,
        label_selector: Union[str, Dict[str, str], None] = None,
        created_after: Union[_dt.datetime, str, None] = None,
        created_before: Union[_dt.datetime, str, None] = None,
    ) -> Dict[str, int]:
        """The exact numbers of the tenant's requests in each status
        (GET /v1/requests/counts, read scope), as ``{"queued": n, "processing":
        n, "succeeded": n, "failed": n, "cancelled": n, "expired": n}``.
        ``label_selector`` is one term (``{"env": "prod"}`` or ``"env=prod"``);
        the service does not take it together with ``type`` (400)."""
        q = self._list_query(type, None, created_after, created_before, label_selector, None, None)
        d = self._call("GET", "/v1/requests/counts", query=q).json()
        return {k: int(v) for k, v in d.items() if isinstance(v, int)}

    def events(self, request_id: str) -> List[Event]:
        """A request's status changes, oldest first (GET /v1/requests/{id}/events,
        read scope or its poll token)."""
        d = self._call("GET", self._path(request_id, "events")).json()
        return [Event.from_json(x) for x in d.get("items") or []]

    # ---- transitions ----

    def _transition(self, request_id: str, name: str, body: Optional[Dict[str, Any]],
                    idempotency_key: Optional[str]) -> Request:
        a = self._call("POST", self._path(request_id, name), body=body, idempotency_key=idempotency_key)
        r = Request.from_json(a.json())
        r.etag = a.headers.get("ETag")
        return r

    def mark_processing(
        self,
        request_id: str,
        percent: Optional[int] = None,
        message: Optional[str] = None,
        *,
        idempotency_key: Optional[str] = None,
    ) -> Request:
        """Moves a queued request to processing or, when it is processing, records a
        heartbeat, with optional progress (percent 0..100, message <= 256
        characters) (POST /v1/requests/{id}/processing, write scope). A processing
        request without one for ``lifecycle.processing_timeout`` (15 min by
        default) fails with ``ERR_JOB_EXECUTION_TIMED_OUT``."""
        p = Progress(percent, message).to_json()
        return self._transition(request_id, "processing", p or None, idempotency_key)

    heartbeat = mark_processing

    def complete(self, request_id: str, result: Optional[Result] = None, *,
                 idempotency_key: Optional[str] = None) -> Request:
        """Records a queued or processing request as succeeded
        (POST /v1/requests/{id}/complete, write scope) with a :class:`Link`,
        :class:`Confirmation` or :class:`Answer` (a dict is an answer; None is
        ``Confirmation(True)``). On a terminal request it raises
        :class:`AlreadyTerminalError` whose ``request`` is the request as it is."""
        return self._transition(request_id, "complete", result_body(result), idempotency_key)

    def fail(self, request_id: str, code: str, reason: str = "", *,
             idempotency_key: Optional[str] = None) -> Request:
        """Records a queued or processing request as failed
        (POST /v1/requests/{id}/fail, write scope); ``code`` matches
        ``^[A-Z][A-Z0-9_]{0,63}$``, ``reason`` is at most 1024 characters."""
        return self._transition(request_id, "fail", {"code": code, "reason": reason}, idempotency_key)

    def cancel(self, request_id: str, reason: Optional[str] = None, *,
               idempotency_key: Optional[str] = None) -> Request:
        """Records a queued or processing request as cancelled
        (POST /v1/requests/{id}/cancel, write scope); ``reason`` is optional."""
        return self._transition(request_id, "cancel", {"reason": reason} if reason else None, idempotency_key)

    def delete(self, request_id: str) -> None:
        """Removes a request in any status, with its history (DELETE
        /v1/requests/{id}, admin scope). Not retried: after a lost answer a
        retry would report NOT_FOUND for a delete that worked."""
        self._call("DELETE", self._path(request_id))

    # ---- jobs ----

    def job(
        self,
        request_id: str,
        *,
        processing_timeout: float = 900.0,
        heartbeat_interval: Optional[float] = None,
        progress_interval: float = 1.0,
        fail_code: str = "ERR_JOB_FAILED",
    ) -> "Job":
        """A context manager that runs a block as the work of a request: see
        :class:`asyncstatus.Job` for what it does and its options."""
        from .job import Job

        return Job(self, request_id, processing_timeout=processing_timeout, heartbeat_interval=heartbeat_interval,
                   progress_interval=progress_interval, fail_code=fail_code)

    def job_task(
        self,
        *,
        processing_timeout: float = 900.0,
        heartbeat_interval: Optional[float] = None,
        progress_interval: float = 1.0,
        fail_code: str = "ERR_JOB_FAILED",
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A decorator: ``fn(job, *args, **kwargs)`` becomes
        ``wrapper(request_id, *args, **kwargs)``, run inside :meth:`job`, the
        request completed with what fn returns. Options as for :meth:`job`."""
        from .job import job_task

        return job_task(self, processing_timeout=processing_timeout, heartbeat_interval=heartbeat_interval,
                        progress_interval=progress_interval, fail_code=fail_code)


def _sse_events(res: http.client.HTTPResponse,
                before_read: Callable[[], None],
                on_id: Optional[Callable[[str], None]] = None) -> Iterator[Tuple[Optional[str], str, str, Optional[float]]]:
    """Parses text/event-stream (WHATWG HTML §9.2.6): yields (last event id, event
    type, data, retry seconds) per dispatched event, and (None, "", "", retry)
    for a retry: field met outside an event. Comments and events without data
    are skipped; an event not finished by a blank line is dropped."""
    last_id: Optional[str] = None
    data: List[str] = []
    event = ""
    first = True
    while True:
        before_read()
        raw = res.readline(4 << 20)
        if not raw:
            return
        text = raw.decode("utf-8", "replace")
        if first:
            text = text.lstrip("\ufeff")
            first = False
        for line in text.rstrip("\n").rstrip("\r").split("\r"):
            if line == "":
                if data:
                    yield last_id or "", event, "\n".join(data), None
                data, event = [], ""
                continue
            if line.startswith(":"):
                continue
            name, sep, value = line.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                if "\0" not in value:
                    last_id = value
                    if on_id is not None:  # also an id of an event without data
                        on_id(value)
            elif name == "retry":
                if value.isdigit():
                    yield None, "", "", int(value) / 1000.0
