"""How wait and stream behave behind a proxy: without long poll (Prefer
stripped), with 429 and 503 answers injected, and with a stream cut."""

from __future__ import annotations

import ssl
import threading
import time
import unittest
from typing import List, Optional

import harness

from asyncstatus import BackendUnavailableError, Client, RetryPolicy


def later(delay: float, fn, *args) -> None:
    def run() -> None:
        time.sleep(delay)
        fn(*args)

    threading.Thread(target=run, daemon=True).start()


def setUpModule() -> None:
    global serve, admin
    serve = harness.Serve()
    admin = Client(serve.url, api_key=str(serve.demo_key))


def tearDownModule() -> None:
    serve.stop()


class PacingTest(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = harness.Proxy(serve.addr)
        self.addCleanup(self.proxy.close)

    def gaps(self, part: str) -> List[tuple]:
        """(seconds since the previous poll, that poll's status, its Retry-After) per poll."""
        gets = self.proxy.entries("GET", part)
        out = []
        for prev, cur in zip(gets, gets[1:]):
            ra: Optional[str] = prev["answer"].get("Retry-After")
            out.append((cur["at"] - prev["at"], prev["status"], None if ra is None else float(ra)))
        return out

    def test_paced_polling_when_a_proxy_strips_prefer(self) -> None:
        self.proxy.strip_prefer = True
        cr = admin.create("py.paced")
        later(0.2, admin.mark_processing, cr.id)
        later(3.0, admin.complete, cr.id, {"done": 1})
        p = Client(self.proxy.url, poll_token=cr.poll_token)
        seen: List[str] = []
        final = p.wait(cr.id, retry_after=cr.retry_after, on_change=lambda r: seen.append(r.status), timeout=30)
        self.assertEqual(final.status, "succeeded")
        self.assertEqual(seen[-1], "succeeded")
        gets = self.proxy.entries("GET", cr.id)
        self.assertGreaterEqual(len(gets), 3, "it polled")
        self.assertTrue(all(g["sent"].get("Prefer") == "wait=25" for g in gets), "the client asked")
        self.assertTrue(all("Prefer" not in g["headers"] for g in gets), "the service never heard it")
        self.assertTrue(all("Preference-Applied" not in g["answer"] for g in gets))
        self.assertEqual([g["status"] for g in gets if g["status"] == 429], [], "never polled too early")
        self.assertIn(304, [g["status"] for g in gets], "an unchanged request cost a 304")
        for gap, status, ra in self.gaps(cr.id):
            self.assertIsNotNone(ra, "every non-terminal answer says when to come back")
            self.assertGreaterEqual(gap, ra, "polled sooner than Retry-After %s" % ra)
        # The first poll waited the create's Retry-After.
        self.assertEqual(p._long_poll, False)

    def test_429_and_503_are_waited_out(self) -> None:
        cr = admin.create("py.injected")
        admin.mark_processing(cr.id)
        self.proxy.inject = [(429, "RATE_LIMITED", 1), (429, "POLLED_TOO_EARLY", 1), (503, "BACKEND_UNAVAILABLE", 1)]
        later(1.0, admin.complete, cr.id)
        p = Client(self.proxy.url, poll_token=cr.poll_token)
        final = p.wait(cr.id, timeout=30)
        self.assertEqual(final.status, "succeeded")
        gaps = self.gaps(cr.id)
        self.assertEqual([g[1] for g in gaps[:3]], [429, 429, 503])
        for gap, status, ra in gaps[:3]:
            self.assertGreaterEqual(gap, ra, "came back after a %d sooner than its Retry-After" % status)
        self.assertEqual(self.proxy.inject, [])

    def test_wait_gives_up_after_max_errors(self) -> None:
        cr = admin.create("py.down")
        self.proxy.inject = [(503, "BACKEND_UNAVAILABLE", 0)] * 3
        p = Client(self.proxy.url, poll_token=cr.poll_token, retry=RetryPolicy(min_backoff=0.05))
        with self.assertRaises(BackendUnavailableError):
            p.wait(cr.id, max_errors=3, timeout=30)
        self.assertEqual([g["status"] for g in self.proxy.entries("GET", cr.id)], [503, 503, 503])

    def test_single_calls_retry_a_503_and_raise_a_429(self) -> None:
        cr = admin.create("py.single")
        c = Client(self.proxy.url, api_key=str(serve.demo_key), retry=RetryPolicy(min_backoff=0.05))
        self.proxy.inject = [(503, "BACKEND_UNAVAILABLE", 1)]
        t0 = time.monotonic()
        self.assertEqual(c.get(cr.id).id, cr.id)
        self.assertGreaterEqual(time.monotonic() - t0, 1.0, "retried before the 503's Retry-After")
        self.proxy.inject = [(429, "RATE_LIMITED", 2)]
        from asyncstatus import PolledTooEarlyError, RateLimitedError

        with self.assertRaises(RateLimitedError) as e:
            c.get(cr.id)
        self.assertNotIsInstance(e.exception, PolledTooEarlyError)
        self.assertEqual((e.exception.code, e.exception.retry_after), ("RATE_LIMITED", 2.0))
        self.proxy.inject = [(503, "BACKEND_UNAVAILABLE", 1)] * 2
        with self.assertRaises(Exception) as e2:
            Client(self.proxy.url, api_key=str(serve.demo_key), retry=RetryPolicy(max_attempts=2, min_backoff=0.05)).get(cr.id)
        self.assertEqual(getattr(e2.exception, "code", None), "BACKEND_UNAVAILABLE")

    def test_stream_resumes_after_a_cut(self) -> None:
        cr = admin.create("py.cut")
        self.proxy.cut_stream_after = 2  # queued, processing: then a reset
        later(0.3, admin.mark_processing, cr.id)
        later(3.0, admin.heartbeat, cr.id, 70, "nearly")
        later(3.5, admin.complete, cr.id)
        p = Client(self.proxy.url, poll_token=cr.poll_token)
        states = list(p.stream(cr.id))
        self.assertEqual([(s.version, s.status) for s in states],
                         [(1, "queued"), (2, "processing"), (3, "processing"), (4, "succeeded")])
        self.assertEqual(states[2].progress.message, "nearly")
        streams = self.proxy.entries("GET", cr.id + "/stream")
        self.assertEqual(len(streams), 2)
        self.assertNotIn("Last-Event-ID", streams[0]["headers"])
        self.assertEqual(streams[1]["headers"].get("Last-Event-ID"), "2")

    def test_stream_waits_out_a_429(self) -> None:
        cr = admin.create("py.stream429")
        self.proxy.inject_stream = [(429, "RATE_LIMITED", 3)]
        later(0.5, admin.complete, cr.id)
        states = list(Client(self.proxy.url, poll_token=cr.poll_token).stream(cr.id))
        self.assertEqual([s.status for s in states], ["succeeded"])
        streams = self.proxy.entries("GET", cr.id + "/stream")
        self.assertEqual([e["status"] for e in streams], [429, 200])
        self.assertGreaterEqual(streams[1]["at"] - streams[0]["at"], 3.0, "reconnected before the Retry-After")

    def test_https(self) -> None:
        proxy = harness.Proxy(serve.addr, tls=True)
        self.addCleanup(proxy.close)
        ctx = ssl.create_default_context(cafile=harness.tls_cert()[0])
        c = Client(proxy.url, api_key=str(serve.demo_key), ssl_context=ctx)
        cr = c.create("py.tls")
        later(0.3, admin.complete, cr.id, {"tls": True})
        self.assertEqual([s.status for s in c.stream(cr.id)], ["queued", "succeeded"])
        self.assertEqual(c.wait(cr.id, timeout=10).answer(), {"tls": True})
        self.assertTrue(proxy.url.startswith("https://"))
        # The default context refuses a certificate it does not trust.
        with self.assertRaises(ssl.SSLError):
            Client(proxy.url, api_key=str(serve.demo_key), retry=RetryPolicy(max_attempts=1)).get(cr.id)
