"""A worker in the style of Celery or RQ: the web app creates the request and
queues the job; a worker process runs it and the job helper keeps the request's
status (processing, heartbeats, progress, the result or the failure)."""

import datetime as dt
import os
import time

import asyncstatus

client = asyncstatus.Client(os.environ["ASYNCSTATUS_URL"], api_key=os.environ["ASYNCSTATUS_API_KEY"])


def start_export(account: str) -> asyncstatus.Created:
    """In the web app: create the request, queue the job, hand created.id and
    created.poll_token to whoever waits."""
    created = client.create("statement.export", context={"account": account})
    # Celery: export_statement.delay(created.id, account)
    return created


# Celery: put @app.task above this line. The job helper marks the request
# processing, heartbeats every quarter of processing_timeout (the service's
# lifecycle.processing_timeout, 15 min by default) and at least every minute,
# completes it with what the function returns, or fails it with ERR_JOB_FAILED
# and the exception's message.
@client.job_task(processing_timeout=900)
def export_statement(job: asyncstatus.Job, account: str, pages: int = 10) -> asyncstatus.Link:
    for page in range(1, pages + 1):
        render_page(account, page)
        job.progress(100 * page // pages, "page %d of %d" % (page, pages))  # raises JobCancelled after a cancel
    return statement_link(account)


# The same without the decorator (RQ, a thread, a script).
def export_statement_plain(request_id: str, account: str) -> None:
    with client.job(request_id) as job:
        render_page(account, 1)
        job.progress(100, "page 1 of 1")
        job.result = statement_link(account)


def statement_link(account: str) -> asyncstatus.Link:
    return asyncstatus.Link(
        url="https://files.example/statements/%s.pdf" % account,
        expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=24),
    )


def render_page(account: str, page: int) -> None:
    """Stands for the real work."""
    if account == "acc_broken":
        raise RuntimeError("ledger service unavailable")
    time.sleep(0.05)
