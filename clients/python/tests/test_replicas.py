"""Two `serve` replicas on one redis-server: a wait held by one is woken by a
transition made through the other."""

from __future__ import annotations

import threading
import time
import unittest

import harness

from asyncstatus import Client


def later(delay: float, fn, *args) -> None:
    def run() -> None:
        time.sleep(delay)
        fn(*args)

    threading.Thread(target=run, daemon=True).start()


def setUpModule() -> None:
    global redis, a, b, key
    redis = harness.Redis()
    a = harness.Serve(redis)
    b = harness.Serve(redis)
    key = harness.create_key(redis, "replicas")


def tearDownModule() -> None:
    a.stop()
    b.stop()
    redis.stop()


class ReplicasTest(unittest.TestCase):
    def test_long_poll_woken_through_another_replica(self) -> None:
        via_b = Client(b.url, api_key=key)
        cr = via_b.create("py.replicas")
        proxy = harness.Proxy(a.addr)
        self.addCleanup(proxy.close)
        on_a = Client(proxy.url, poll_token=cr.poll_token)
        later(1.0, via_b.mark_processing, cr.id, 30, "on b")
        later(2.0, via_b.complete, cr.id, {"by": "b"})
        seen = []
        t0 = time.monotonic()
        final = on_a.wait(cr.id, wait_seconds=20, on_change=lambda r: seen.append(r.version))
        took = time.monotonic() - t0
        self.assertEqual((final.status, final.answer()), ("succeeded", {"by": "b"}))
        self.assertEqual(seen, [1, 2, 3])
        gets = proxy.entries("GET", cr.id)
        # One poll for the first state, then one held poll per change, each
        # answered when the change came (not after its 20 s).
        self.assertEqual(len(gets), 3, gets)
        self.assertTrue(all(g["answer"].get("Preference-Applied") == "wait=20" for g in gets))
        self.assertLess(took, 15, "a held poll was not woken by the other replica's transition")

    def test_stream_on_one_replica_sees_the_other_replicas_transitions(self) -> None:
        via_b = Client(b.url, api_key=key)
        cr = via_b.create("py.replicas")
        later(0.5, via_b.mark_processing, cr.id)
        later(1.0, via_b.cancel, cr.id, "from b")
        states = list(Client(a.url, poll_token=cr.poll_token).stream(cr.id))
        self.assertEqual([s.status for s in states], ["queued", "processing", "cancelled"])
