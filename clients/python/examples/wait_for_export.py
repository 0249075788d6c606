"""A client that waits: a partner system, or the web app's backend, follows a
request to its end with its poll token, by long poll where the service offers
it and by Retry-After-paced polling elsewhere.

    python3 wait_for_export.py REQUEST_ID POLL_TOKEN
"""

import os
import sys
from typing import Optional

import asyncstatus


def wait_for_export(request_id: str, poll_token: str, retry_after: Optional[float] = None) -> str:
    client = asyncstatus.Client(os.environ["ASYNCSTATUS_URL"], poll_token=poll_token)

    def show(r: asyncstatus.Request) -> None:
        p = r.progress
        print("%s %s%% %s" % (r.status, p.percent if p else "--", p.message if p and p.message else ""), flush=True)

    # retry_after: the create's Retry-After, when the waiter has it.
    final = client.wait(request_id, retry_after=retry_after, timeout=600, on_change=show)
    if final.status == asyncstatus.SUCCEEDED:
        return final.link().url
    reason = final.failure.code + ": " + final.failure.reason if final.failure else final.status
    raise RuntimeError("export %s: %s" % (final.status, reason))


if __name__ == "__main__":
    try:
        print(wait_for_export(sys.argv[1], sys.argv[2]))
    except asyncstatus.WaitTimeout:
        sys.exit("still not done after 10 minutes")
    except (RuntimeError, asyncstatus.AsyncStatusError) as e:
        sys.exit(str(e))
