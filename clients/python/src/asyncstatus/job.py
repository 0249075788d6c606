"""The job helper: run a block of work as a request's job, with heartbeats."""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple, Type

from .errors import AlreadyTerminalError
from .models import Request, Result

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

log = logging.getLogger("asyncstatus")

#: The service's default ``lifecycle.processing_timeout``, in seconds.
DEFAULT_PROCESSING_TIMEOUT = 900.0

#: The service's limit on a failure's reason, in characters.
REASON_LIMIT = 1024


class JobFailure(Exception):
    """Raise it in a job to fail the request with this ``code``
    (``^[A-Z][A-Z0-9_]{0,63}$``) and ``reason``."""

    def __init__(self, code: str, reason: str = "") -> None:
        super().__init__(reason or code)
        self.code = code
        self.reason = reason


class JobCancelled(AlreadyTerminalError):
    """The request became terminal while its job ran (a user cancelled it, or it
    timed out): raised by :meth:`Job.progress` and by the end of the block.
    ``request`` is the request as it is."""


def truncate(s: str, n: int = REASON_LIMIT) -> str:
    """s cut to at most n characters (the service counts characters, not bytes)."""
    return s if len(s) <= n else s[: n - 3] + "..."


class Job:
    """Runs a block as the work of one request::

        with client.job(request_id) as job:
            for page in range(10):
                render(page)
                job.progress(page * 10, "page %d of 10" % page)
            job.result = asyncstatus.Link(url, expires_at)

    On entry it marks the request processing (:class:`AlreadyTerminalError` if
    it is terminal already: the block does not run), then a background thread
    sends a heartbeat every ``heartbeat_interval`` seconds, with the latest
    progress. On leaving the block:

    - normally: sends the last progress report if it has not gone out yet,
      then completes the request with ``job.result`` (a Link, Confirmation,
      Answer or dict; None: ``Confirmation(True)``);
    - with :class:`JobFailure`: fails it with its code and reason;
    - with another ``Exception``: fails it with ``fail_code``
      (``ERR_JOB_FAILED``) and the exception's message (``Type: message`` when
      the message is empty), cut to the service's 1024 characters; the
      exception then goes on up, as it would without the block;
    - with a ``BaseException`` that is not an ``Exception`` (KeyboardInterrupt,
      SystemExit: the worker is stopping): sends nothing, so the request stays
      processing for the next delivery of the job or for the processing timeout.

    When a heartbeat (or a progress report, which is one) finds the request
    terminal (a user cancelled it), the next :meth:`progress` raises
    :class:`JobCancelled` in the worker, and so does the end of the block if
    the work did not call progress again; nothing is completed or failed then.
    A job that reports progress therefore learns of a cancel within about
    ``progress_interval``, one that does not within ``heartbeat_interval``.

    Args:
        processing_timeout: the service's ``lifecycle.processing_timeout``
            in seconds (the service does not publish it; default 900, the
            service's default). Heartbeats go every quarter of it, at most
            every 60 s, unless ``heartbeat_interval`` says otherwise.
        heartbeat_interval: seconds between heartbeats.
        progress_interval: the least seconds between two progress reports
            sent (a report is coalesced with later ones). default 1.
        fail_code: the failure code of an exception. default ``ERR_JOB_FAILED``.
    """

    def __init__(
        self,
        client: "Client",
        request_id: str,
        *,
        processing_timeout: float = DEFAULT_PROCESSING_TIMEOUT,
        heartbeat_interval: Optional[float] = None,
        progress_interval: float = 1.0,
        fail_code: str = "ERR_JOB_FAILED",
    ) -> None:
        if heartbeat_interval is None:
            heartbeat_interval = min(60.0, processing_timeout / 4)
        if heartbeat_interval <= 0:
            raise ValueError("asyncstatus: heartbeat_interval must be > 0")
        self.client = client
        self.request_id = request_id
        self.heartbeat_interval = heartbeat_interval
        self.progress_interval = progress_interval
        self.fail_code = fail_code
        #: What the request completes with (Link, Confirmation, Answer, dict or None).
        self.result: Optional[Result] = None
        #: The request as the last call left it (the final state after the block).
        self.request: Optional[Request] = None
        #: How many heartbeats went out (for logs and tests).
        self.heartbeats = 0
        self._lock = threading.Lock()
        self._pending: Optional[Tuple[Optional[int], Optional[str]]] = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._cancelled: Optional[AlreadyTerminalError] = None
        self._thread: Optional[threading.Thread] = None

    # ---- the worker's side ----

    def progress(self, percent: Optional[int] = None, message: Optional[str] = None) -> None:
        """Records the job's progress (percent 0..100, message at most 256
        characters); it goes out soon, coalesced with later reports.

        Raises:
            JobCancelled: a heartbeat found the request terminal; stop working.
        """
        self.check()
        if percent is not None:
            percent = max(0, min(100, int(percent)))
        if message is not None and len(message) > 256:
            message = message[:253] + "..."
        with self._lock:
            self._pending = (percent, message)
        self._wake.set()

    def check(self) -> None:
        """Raises :class:`JobCancelled` when a heartbeat found the request terminal."""
        c = self._cancelled
        if c is not None:
            raise JobCancelled(c.status, c.code, c.detail, request=c.request, request_id=c.request_id)

    @property
    def cancelled(self) -> bool:
        """Whether a heartbeat found the request terminal."""
        return self._cancelled is not None

    # ---- the context manager ----

    def __enter__(self) -> "Job":
        self.request = self.client.mark_processing(self.request_id)
        self._thread = threading.Thread(target=self._beat, name="asyncstatus-heartbeat-" + self.request_id,
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        if exc is not None and not isinstance(exc, Exception):
            return  # the worker is stopping: leave the request to a redelivery
        if isinstance(exc, JobCancelled) or (
                isinstance(exc, AlreadyTerminalError) and exc.request is not None
                and exc.request.id == self.request_id):
            return  # a cancel seen by progress(), or the work's own call found this request terminal
        if self._cancelled is not None:
            self.check()
        try:
            if isinstance(exc, JobFailure):
                self.request = self.client.fail(self.request_id, exc.code, truncate(exc.reason))
            elif exc is not None:
                reason = str(exc) or type(exc).__name__
                self.request = self.client.fail(self.request_id, self.fail_code, truncate(reason))
            else:
                # A report not sent yet goes out first, so that the final
                # state shows where the work ended (one call at most).
                with self._lock:
                    p, self._pending = self._pending, None
                if p is not None:
                    self.request = self.client.heartbeat(self.request_id, *p)
                self.request = self.client.complete(self.request_id, self.result)
        except AlreadyTerminalError as e:
            raise JobCancelled(e.status, e.code, e.detail, request=e.request, request_id=e.request_id) from exc

    # ---- the heartbeat thread ----

    def _beat(self) -> None:
        next_beat = time.monotonic() + self.heartbeat_interval
        # The first progress report goes out at once (marking processing sent none).
        last_sent = -self.progress_interval
        while not self._stop.is_set():
            with self._lock:
                pending = self._pending is not None
            now = time.monotonic()
            due = next_beat
            if pending:
                due = min(due, last_sent + self.progress_interval)
            if now < due:
                self._wake.wait(due - now)
                self._wake.clear()
                continue
            with self._lock:
                p, self._pending = self._pending, None
            percent, message = p if p else (None, None)
            try:
                self.request = self.client.heartbeat(self.request_id, percent, message)
                self.heartbeats += 1
            except AlreadyTerminalError as e:
                self._cancelled = e
                return
            except Exception as e:  # the job goes on; the next tick tries again
                log.warning("asyncstatus: heartbeat of request %s failed: %s", self.request_id, e)
            last_sent = time.monotonic()
            next_beat = last_sent + self.heartbeat_interval


def job_task(client: "Client", **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The decorator behind :meth:`Client.job_task`."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(request_id: str, *args: Any, **kwargs: Any) -> Any:
            with Job(client, request_id, **options) as job:
                job.result = fn(job, *args, **kwargs)
            return job.result

        # Task queues that check arguments against the signature (Celery) see
        # the one callers use: the request id in the job's place.
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if params:
            rid = inspect.Parameter("request_id", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)
            setattr(run, "__signature__", sig.replace(parameters=[rid] + params[1:]))
        return run

    return decorate
