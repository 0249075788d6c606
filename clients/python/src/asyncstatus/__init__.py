"""A client of asyncstatus, the service that keeps the status of long-running
requests, and a job helper for the workers that do them.

Standard library only. See the README for the whole API::

    from asyncstatus import Client

    client = Client("https://status.example", api_key=KEY)
    created = client.create("statement.export", context={"account": "acc_881204"})
    final = Client("https://status.example", poll_token=created.poll_token).wait(
        created.id, retry_after=created.retry_after, timeout=600)
"""

from .client import DEFAULT_USER_AGENT, Client, RetryPolicy, WaitTimeout, new_idempotency_key, trace_context
from .errors import (
    AlreadyTerminalError,
    AsyncStatusError,
    BackendUnavailableError,
    ForbiddenError,
    IdempotencyKeyReusedError,
    NotFoundError,
    PolledTooEarlyError,
    RateLimitedError,
    UnauthenticatedError,
    ValidationError,
)
from .job import DEFAULT_PROCESSING_TIMEOUT, Job, JobCancelled, JobFailure
from .models import (
    CANCELLED,
    EXPIRED,
    FAILED,
    PROCESSING,
    QUEUED,
    SUCCEEDED,
    TERMINAL,
    Answer,
    Confirmation,
    Created,
    Event,
    Failure,
    Link,
    Page,
    PollResult,
    Progress,
    Request,
    WatchEvent,
)

__version__ = "0.1.0"

__all__ = [
    "Client", "RetryPolicy", "WaitTimeout", "DEFAULT_USER_AGENT", "new_idempotency_key", "trace_context",
    "AsyncStatusError", "AlreadyTerminalError", "BackendUnavailableError", "ForbiddenError",
    "IdempotencyKeyReusedError", "NotFoundError", "PolledTooEarlyError", "RateLimitedError",
    "UnauthenticatedError", "ValidationError",
    "Job", "JobCancelled", "JobFailure", "DEFAULT_PROCESSING_TIMEOUT",
    "Answer", "Confirmation", "Created", "Event", "Failure", "Link", "Page", "PollResult",
    "Progress", "Request", "WatchEvent",
    "QUEUED", "PROCESSING", "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "TERMINAL",
]
