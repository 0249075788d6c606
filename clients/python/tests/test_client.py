"""Every method of the client and the job helper, against a real service: once on
the embedded store, once on a redis-server of the test's own."""

from __future__ import annotations

import datetime as dt
import inspect
import threading
import time
import unittest
import uuid
from typing import List, Optional

import harness

import asyncstatus
from asyncstatus import (
    AlreadyTerminalError,
    Answer,
    Client,
    Confirmation,
    JobCancelled,
    JobFailure,
    Link,
    NotFoundError,
    PolledTooEarlyError,
    UnauthenticatedError,
    ValidationError,
)


def unique_type(name: str) -> str:
    return "py.%s.%s" % (name, uuid.uuid4().hex[:8])


def later(delay: float, fn, *args, **kwargs) -> threading.Thread:
    """Runs fn after delay seconds on a thread of its own."""

    def run() -> None:
        time.sleep(delay)
        fn(*args, **kwargs)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


class Suite:
    """The tests; a subclass says which backend setUpClass starts."""

    redis: Optional[harness.Redis] = None
    serve: harness.Serve
    key: str
    c: Client

    @classmethod
    def start(cls, use_redis: bool) -> None:
        if use_redis:
            cls.redis = harness.Redis()
        cls.serve = harness.Serve(cls.redis)
        cls.key = harness.create_key(cls.redis, "py") if cls.redis else str(cls.serve.demo_key)
        cls.c = Client(cls.serve.url, api_key=cls.key)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.serve.stop()
        if cls.redis is not None:
            cls.redis.stop()

    def poller(self, created: asyncstatus.Created) -> Client:
        return Client(self.serve.url, poll_token=created.poll_token)

    # ---- create, get ----

    def test_create_and_get_with_etags(self) -> None:
        cr = self.c.create("statement.export", context={"account": "acc_881204"}, estimated_duration=3)
        self.assertEqual((cr.status, cr.done, cr.version), ("queued", False, 1))
        self.assertEqual(cr.context, {"account": "acc_881204"})
        self.assertTrue(cr.location.endswith("/v1/requests/" + cr.id), cr.location)
        self.assertTrue(cr.location.startswith("http://"), cr.location)
        self.assertEqual(cr.operation_location, cr.location + "/operation")  # the Azure status monitor
        self.assertEqual(cr.retry_after, 3.0)
        self.assertTrue(cr.poll_token)
        self.assertNotIn(cr.poll_token, repr(cr))

        r = self.c.get(cr.id)
        self.assertEqual((r.id, r.version, r.etag), (cr.id, 1, '"1"'))
        # Another caller (the poll token) with the ETag: 304, the same object back.
        p = self.poller(cr)
        self.assertIs(p.get(cr.id, since=r), r)
        self.c.mark_processing(cr.id, 5, "starting")
        # Its second poll within the Retry-After it was given is early.
        with self.assertRaises(PolledTooEarlyError) as e:
            p.get(cr.id, since=r)
        self.assertEqual(e.exception.code, "POLLED_TOO_EARLY")
        self.assertEqual(e.exception.status, 429)
        self.assertGreaterEqual(e.exception.retry_after or 0, 1)
        self.assertIsInstance(e.exception, asyncstatus.RateLimitedError)
        time.sleep(e.exception.retry_after or 1)
        r2 = p.get(cr.id, since=r)
        self.assertIsNot(r2, r)
        self.assertEqual((r2.status, r2.version, r2.etag), ("processing", 2, '"2"'))
        self.assertEqual((r2.progress.percent, r2.progress.message), (5, "starting"))
        self.assertEqual(r2.created_at, cr.created_at)
        self.assertIsInstance(r2.updated_at, dt.datetime)

    def test_poll_one_conditional_long_poll(self) -> None:
        cr = self.c.create(unique_type("poll"))
        later(0.5, self.c.mark_processing, cr.id)
        t0 = time.monotonic()
        pr = self.c.poll(cr.id, if_none_match='"1"', wait=10)
        self.assertTrue(pr.long_polled)
        self.assertFalse(pr.not_modified)
        self.assertEqual((pr.request.version, pr.etag, pr.retry_after), (2, '"2"', 0.0))
        self.assertLess(time.monotonic() - t0, 9, "the long poll was not woken by the change")
        pr = self.c.poll(cr.id, if_none_match='"2"', wait=1)
        self.assertTrue(pr.not_modified)
        self.assertIsNone(pr.request)

    def test_create_idempotency_key(self) -> None:
        t = unique_type("idem")
        a = self.c.create(t, context={"n": 1}, idempotency_key="py-" + t)
        b = self.c.create(t, context={"n": 1}, idempotency_key="py-" + t)
        self.assertEqual((a.id, a.poll_token), (b.id, b.poll_token))
        with self.assertRaises(asyncstatus.IdempotencyKeyReusedError) as e:
            self.c.create(t, context={"n": 2}, idempotency_key="py-" + t)
        self.assertEqual((e.exception.status, e.exception.code), (422, "IDEMPOTENCY_KEY_REUSED"))
        # Without a key of the caller's, two calls are two requests.
        c1, c2 = self.c.create(t), self.c.create(t)
        self.assertNotEqual(c1.id, c2.id)

    def test_create_retried_after_a_lost_answer_makes_one_request(self) -> None:
        proxy = harness.Proxy(self.serve.addr)
        self.addCleanup(proxy.close)
        c = Client(proxy.url, api_key=self.key, retry=asyncstatus.RetryPolicy(min_backoff=0.05))
        t = unique_type("lost")
        proxy.lose_next_post = True  # forwarded, then answered 503
        cr = c.create(t)
        posts = proxy.entries("POST", "/v1/requests")
        self.assertEqual([p["status"] for p in posts], [503, 202])
        keys = {p["headers"].get("Idempotency-Key") for p in posts}
        self.assertEqual(len(keys), 1, keys)
        self.assertEqual([r.id for r in self.c.list(type=t)], [cr.id])

    # ---- errors ----

    def test_errors_carry_the_problem(self) -> None:
        with self.assertRaises(ValidationError) as e:
            self.c.create("Not A Type")
        err = e.exception
        self.assertEqual((err.status, err.code), (400, "VALIDATION_FAILED"))
        self.assertEqual([f["field"] for f in err.errors], ["type"])
        self.assertTrue(err.request_id)
        self.assertTrue(err.detail)
        with self.assertRaises(UnauthenticatedError) as e2:
            Client(self.serve.url, api_key="ask_wrong").get(str(uuid.uuid4()))
        self.assertEqual((e2.exception.status, e2.exception.code), (401, "UNAUTHENTICATED"))
        with self.assertRaises(NotFoundError) as e3:
            self.c.get(str(uuid.uuid4()))
        self.assertEqual((e3.exception.status, e3.exception.code), (404, "NOT_FOUND"))
        # A poll token reads its own request only.
        a, b = self.c.create(unique_type("tok")), self.c.create(unique_type("tok"))
        with self.assertRaises(NotFoundError):
            self.poller(a).get(b.id)
        with self.assertRaises(asyncstatus.AsyncStatusError) as e4:
            self.poller(a).list_page()
        self.assertIn(e4.exception.status, (401, 403))

    # ---- transitions ----

    def test_transitions(self) -> None:
        t = unique_type("tr")
        expires = dt.datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
        a = self.c.create(t)
        r = self.c.mark_processing(a.id, 40, "page 4 of 10")
        self.assertEqual((r.status, r.version, r.progress.percent), ("processing", 2, 40))
        r = self.c.heartbeat(a.id)
        self.assertEqual((r.status, r.version), ("processing", 3))
        r = self.c.complete(a.id, Link("https://files.example/x.pdf", expires, size_bytes=12, content_type="application/pdf"))
        self.assertEqual((r.status, r.done, r.result_type), ("succeeded", True, "link"))
        self.assertEqual(r.link(), Link("https://files.example/x.pdf", expires, None, 12, "application/pdf"))
        with self.assertRaises(ValueError):
            r.answer()
        with self.assertRaises(AlreadyTerminalError) as e:
            self.c.fail(a.id, "ERR_LATE", "too late")
        self.assertEqual(e.exception.code, "ASYNC_REQUEST_ALREADY_TERMINAL")
        self.assertEqual((e.exception.request.id, e.exception.request.status), (a.id, "succeeded"))

        b = self.c.create(t)
        self.assertEqual(self.c.complete(b.id, Confirmation(True, "sent")).confirmation(), Confirmation(True, "sent"))
        c = self.c.create(t)
        self.assertEqual(self.c.complete(c.id, {"total": 3}).answer(), {"total": 3})
        d = self.c.create(t)
        self.assertEqual(self.c.complete(d.id, Answer({"k": [1, 2]})).answer(), {"k": [1, 2]})
        e_ = self.c.create(t)
        self.assertEqual(self.c.complete(e_.id).confirmation(), Confirmation(True))
        f = self.c.create(t)
        r = self.c.fail(f.id, "ERR_UPSTREAM", "ledger down")
        self.assertEqual((r.status, r.failure.code, r.failure.reason), ("failed", "ERR_UPSTREAM", "ledger down"))
        g = self.c.create(t)
        r = self.c.cancel(g.id, "user asked")
        self.assertEqual((r.status, r.cancellation_reason), ("cancelled", "user asked"))
        h = self.c.create(t)
        self.assertEqual(self.c.cancel(h.id).status, "cancelled")

    def test_events(self) -> None:
        a = self.c.create(unique_type("ev"))
        self.c.mark_processing(a.id)
        self.c.fail(a.id, "ERR_X", "x")
        evs = self.poller(a).events(a.id)
        self.assertEqual([(e.seq, e.from_status, e.to_status) for e in evs],
                         [(1, None, "queued"), (2, "queued", "processing"), (3, "processing", "failed")])
        self.assertTrue(all(e.by.startswith("key_") for e in evs))
        self.assertIsInstance(evs[0].at, dt.datetime)

    def test_delete(self) -> None:
        a = self.c.create(unique_type("del"))
        self.assertIsNone(self.c.delete(a.id))
        with self.assertRaises(NotFoundError):
            self.c.get(a.id)
        with self.assertRaises(NotFoundError):
            self.c.delete(a.id)

    # ---- list ----

    def test_list_pages_and_filters(self) -> None:
        t = unique_type("list")
        ids = [self.c.create(t).id for _ in range(5)]
        self.c.mark_processing(ids[1])
        self.c.cancel(ids[3])
        got = [r.id for r in self.c.list(type=t, limit=2)]
        self.assertEqual(got, ids[::-1], "newest first, every page")
        pages = list(self.c.pages(type=t, limit=2))
        self.assertEqual([len(p.items) for p in pages], [2, 2, 1])
        self.assertIsNone(pages[-1].next_cursor)
        p2 = self.c.list_page(type=t, limit=2, cursor=pages[0].next_cursor)
        self.assertEqual([r.id for r in p2.items], [r.id for r in pages[1].items])
        self.assertEqual([r.id for r in self.c.list(type=t, status=["processing", "cancelled"])], [ids[3], ids[1]])
        self.assertEqual([r.id for r in self.c.list(type=t, status="queued")], [ids[4], ids[2], ids[0]])
        future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
        self.assertEqual(list(self.c.list(type=t, created_after=future)), [])
        self.assertEqual(len(list(self.c.list(type=t, created_before=future))), 5)
        with self.assertRaises(ValidationError) as e:
            self.c.list_page(type=t, cursor="garbled")
        self.assertEqual(e.exception.code, "INVALID_CURSOR")

    def test_labels_and_label_selector(self) -> None:
        t = unique_type("labels")
        a = self.c.create(t, labels={"env": "prod", "team": "ledger"})
        b = self.c.create(t, labels={"env": "prod", "team": "exports"})
        c = self.c.create(t, labels={"env": "test", "team": "ledger"})
        d = self.c.create(t)
        self.assertEqual(a.labels, {"env": "prod", "team": "ledger"})
        self.assertEqual(d.labels, {})
        self.assertEqual(self.c.get(b.id).labels, {"env": "prod", "team": "exports"})
        self.assertEqual([r.id for r in self.c.list(type=t, label_selector={"env": "prod"}, limit=1)], [b.id, a.id])
        self.assertEqual([r.id for r in self.c.list(type=t, label_selector="env=prod,team=ledger")], [a.id])
        self.assertEqual([r.labels for r in self.c.list(type=t, label_selector={"team": "ledger"})],
                         [c.labels, a.labels])
        self.assertEqual(list(self.c.list(type=t, label_selector={"env": "staging"})), [])
        with self.assertRaises(ValidationError) as e:
            self.c.list_page(type=t, label_selector="not a selector")
        self.assertEqual([f["field"] for f in e.exception.errors], ["label_selector"])
        with self.assertRaises(ValidationError) as e2:
            self.c.create(t, labels={"Bad Name": "x"})
        self.assertTrue(e2.exception.errors[0]["field"].startswith("labels"), e2.exception.errors)
        # Labels are part of an Idempotency-Key's fingerprint.
        self.c.create(t, labels={"env": "prod"}, idempotency_key="py-labels-" + t)
        with self.assertRaises(asyncstatus.IdempotencyKeyReusedError):
            self.c.create(t, labels={"env": "test"}, idempotency_key="py-labels-" + t)

    def test_lookup(self) -> None:
        t = unique_type("lookup")
        a, b = self.c.create(t), self.c.create(t)
        other = self.c.create(t)
        self.c.delete(other.id)
        got = self.c.lookup([a.id, str(uuid.uuid4()), b.id, other.id, "not-an-id"])
        self.assertEqual([r.id for r in got], [b.id, a.id], "the visible ones, newest first")
        self.assertEqual(self.c.lookup([str(uuid.uuid4())]), [])
        for bad in ([], [""], ["a,b"], ["x"] * 101):
            with self.assertRaises(ValueError):
                self.c.lookup(bad)

    def test_counts(self) -> None:
        t = unique_type("counts")
        ids = [self.c.create(t, labels={"batch": t.replace(".", "-")}).id for _ in range(4)]
        self.c.mark_processing(ids[0])
        self.c.complete(ids[1])
        self.c.fail(ids[2], "ERR_X", "x")
        want = {"queued": 1, "processing": 1, "succeeded": 1, "failed": 1, "cancelled": 0, "expired": 0}
        self.assertEqual(self.c.counts(type=t), want)
        self.assertEqual(self.c.counts(label_selector={"batch": t.replace(".", "-")}), want)
        future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
        self.assertEqual(sum(self.c.counts(type=t, created_after=future).values()), 0)
        self.assertEqual(self.c.counts(type=t, created_before=future), want)
        with self.assertRaises(ValidationError):
            self.c.counts(type=t, label_selector={"batch": "x"})

    # ---- wait, stream ----

    def test_wait_long_polls_to_the_end(self) -> None:
        proxy = harness.Proxy(self.serve.addr)
        self.addCleanup(proxy.close)
        cr = self.c.create(unique_type("wait"))
        p = Client(proxy.url, poll_token=cr.poll_token)

        def work() -> None:
            self.c.mark_processing(cr.id, 50, "half")
            time.sleep(0.3)
            self.c.complete(cr.id, {"ok": True})

        later(cr.retry_after + 0.5, work)  # after the first poll, which waits the create's Retry-After
        seen: List[int] = []
        final = p.wait(cr.id, retry_after=cr.retry_after, on_change=lambda r: seen.append(r.version), timeout=20)
        self.assertEqual((final.status, final.answer()), ("succeeded", {"ok": True}))
        self.assertEqual(seen, [1, 2, 3])
        gets = proxy.entries("GET", cr.id)
        # wait=N: 25 s, shortened to what is left of the timeout.
        asked = [g["headers"].get("Prefer", "") for g in gets]
        self.assertTrue(all(a.startswith("wait=") and 10 <= int(a[5:]) <= 20 for a in asked), asked)
        self.assertEqual(gets[0]["headers"].get("If-None-Match"), '"0"')
        self.assertTrue(all("Preference-Applied" in g["answer"] for g in gets[:-1]), gets)
        self.assertLessEqual(len(gets), 4, "a long poll per change, no polling")
        self.assertEqual(gets[0]["status"], 200)

    def test_wait_timeout(self) -> None:
        cr = self.c.create(unique_type("timeout"))
        t0 = time.monotonic()
        with self.assertRaises(asyncstatus.WaitTimeout) as e:
            self.poller(cr).wait(cr.id, timeout=1.5)
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 1.5)
        self.assertLess(took, 5, "wait overran its timeout")
        self.assertEqual(e.exception.last.id, cr.id)
        self.assertIsInstance(e.exception, TimeoutError)

    def test_stream(self) -> None:
        cr = self.c.create(unique_type("stream"))

        def work() -> None:
            self.c.mark_processing(cr.id, 10, "a")
            time.sleep(0.2)
            self.c.mark_processing(cr.id, 60, "b")
            time.sleep(0.2)
            self.c.fail(cr.id, "ERR_X", "boom")

        later(0.3, work)
        states = list(self.poller(cr).stream(cr.id))
        self.assertEqual([s.version for s in states], sorted(set(s.version for s in states)))
        self.assertEqual((states[0].version, states[0].status), (1, "queued"))
        self.assertEqual((states[-1].status, states[-1].failure.code), ("failed", "ERR_X"))
        self.assertEqual(states[-1].version, 4)
        # Resumed at the terminal version: nothing more to say.
        self.assertEqual(list(self.c.stream(cr.id, last_event_id="4")), [])

    def test_watch(self) -> None:
        t = unique_type("watch")
        batch = {"batch": t.replace(".", "-")}
        stop = threading.Event()

        def markers() -> None:  # until the watch reports one: then it is held
            while not stop.is_set():
                self.c.create(t, labels={"batch": batch["batch"], "marker": "yes"})
                time.sleep(0.05)

        th = threading.Thread(target=markers, daemon=True)
        th.start()
        want: List[str] = []
        got: List[str] = []
        ids: List[str] = []
        last = ""
        key = lambda r: "%s v%d %s" % (r.id, r.version, r.status)  # noqa: E731
        try:
            for ev in self.c.watch(type=t, label_selector=batch):
                self.assertFalse(ev.reset)
                assert ev.request is not None
                if ev.request.labels and ev.request.labels.get("marker"):
                    if not want:  # held: make the changes now
                        stop.set()
                        th.join()
                        for _ in range(3):
                            cr = self.c.create(t, labels=batch)
                            ids.append(cr.id)
                            want.append(key(cr))
                            self.c.create(t, labels={"batch": "other"})
                            want.append(key(self.c.mark_processing(cr.id, 10, "go")))
                    continue
                got.append(key(ev.request))
                last = ev.id
                if len(got) == len(want):
                    break
        finally:
            stop.set()
            th.join()
        self.assertEqual(sorted(got), sorted(want))
        # resumed from the last event: exactly what came after it
        want = [key(self.c.complete(ids[0])), key(self.c.create(t, labels=batch))]
        got = []
        for ev in self.c.watch(type=t, label_selector=batch, last_event_id=last):
            self.assertFalse(ev.reset)
            assert ev.request is not None
            got.append(key(ev.request))
            if len(got) == len(want):
                break
        self.assertEqual(sorted(got), sorted(want))

    def test_stream_timeout(self) -> None:
        cr = self.c.create(unique_type("streamtimeout"))
        seen: List[int] = []
        t0 = time.monotonic()
        with self.assertRaises(asyncstatus.WaitTimeout) as e:
            for r in self.poller(cr).stream(cr.id, timeout=1.5):
                seen.append(r.version)
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 1.5)
        self.assertLess(took, 5, "the stream overran its timeout")
        self.assertEqual(seen, [1])
        self.assertEqual(e.exception.last.version, 1)

    # ---- the job helper ----

    def test_job_success(self) -> None:
        cr = self.c.create(unique_type("job"))
        with self.c.job(cr.id, heartbeat_interval=0.2, progress_interval=0.05) as job:
            self.assertEqual(job.request.status, "processing")
            for i in range(1, 4):
                time.sleep(0.15)
                job.progress(i * 30, "step %d" % i)
            # The heartbeat thread sends the last report soon; job.request is
            # the service's answer to it.
            end = time.monotonic() + 10
            while time.monotonic() < end and (job.request.progress is None or job.request.progress.percent != 90):
                time.sleep(0.05)
            mid = self.c.get(cr.id)
            job.result = Link("https://files.example/r.pdf", "2030-01-01T00:00:00.000Z")
        self.assertEqual((mid.status, mid.progress.percent, mid.progress.message), ("processing", 90, "step 3"))
        self.assertGreaterEqual(job.heartbeats, 3)
        final = self.c.get(cr.id)
        self.assertEqual((final.status, final.link().url), ("succeeded", "https://files.example/r.pdf"))
        self.assertEqual(job.request.version, final.version)

    def test_job_decorator_completes_with_what_it_returns(self) -> None:
        cr = self.c.create(unique_type("task"))

        @self.c.job_task(heartbeat_interval=5)
        def task(job: asyncstatus.Job, n: int) -> dict:
            job.progress(50)
            return {"n": n}

        self.assertEqual(list(inspect.signature(task).parameters), ["request_id", "n"])
        self.assertEqual(task(cr.id, 7), {"n": 7})
        self.assertEqual(self.c.get(cr.id).answer(), {"n": 7})

    def test_job_exception_fails_the_request(self) -> None:
        cr = self.c.create(unique_type("jobfail"))
        with self.assertRaises(ValueError):
            with self.c.job(cr.id):
                raise ValueError("x" * 3000)
        r = self.c.get(cr.id)
        self.assertEqual((r.status, r.failure.code), ("failed", "ERR_JOB_FAILED"))
        self.assertEqual(len(r.failure.reason), 1024)
        self.assertTrue(r.failure.reason.startswith("xxx") and r.failure.reason.endswith("..."))

        cr2 = self.c.create(unique_type("jobfail"))
        with self.assertRaises(JobFailure):
            with self.c.job(cr2.id):
                raise JobFailure("ERR_LEDGER", "ledger unavailable")
        r2 = self.poller(cr2).get(cr2.id)
        self.assertEqual((r2.failure.code, r2.failure.reason), ("ERR_LEDGER", "ledger unavailable"))

        cr3 = self.c.create(unique_type("jobfail"))
        with self.assertRaises(KeyError):
            with self.c.job(cr3.id, fail_code="ERR_LOOKUP"):
                {}["missing"]
        self.assertEqual(self.poller(cr3).get(cr3.id).failure.code, "ERR_LOOKUP")

    def test_job_fails_on_another_requests_terminal_error(self) -> None:
        other = self.c.create(unique_type("jobother"))
        self.c.cancel(other.id)
        cr = self.c.create(unique_type("jobother"))
        with self.assertRaises(AlreadyTerminalError):
            with self.c.job(cr.id):
                self.c.complete(other.id)  # the work's own call, about another request
        r = self.c.get(cr.id)
        self.assertEqual((r.status, r.failure.code), ("failed", "ERR_JOB_FAILED"))

    def test_job_sees_a_cancel(self) -> None:
        cr = self.c.create(unique_type("jobcancel"))
        later(0.4, self.c.cancel, cr.id, "user changed their mind")
        steps = 0
        with self.assertRaises(JobCancelled) as e:
            with self.c.job(cr.id, heartbeat_interval=0.1) as job:
                for steps in range(1, 200):
                    time.sleep(0.05)
                    job.progress(steps % 100)
                job.result = {"never": True}
        self.assertLess(steps, 100, "the cancel was not seen at the next progress")
        self.assertTrue(job.cancelled)
        self.assertEqual(e.exception.request.status, "cancelled")
        self.assertIsInstance(e.exception, AlreadyTerminalError)
        r = self.c.get(cr.id)
        self.assertEqual((r.status, r.cancellation_reason), ("cancelled", "user changed their mind"))

    def test_job_on_a_terminal_request_does_not_run(self) -> None:
        cr = self.c.create(unique_type("jobterm"))
        self.c.cancel(cr.id)
        ran = False
        with self.assertRaises(AlreadyTerminalError):
            with self.c.job(cr.id):
                ran = True
        self.assertFalse(ran)

    def test_job_heartbeats_keep_a_request_alive_past_processing_timeout(self) -> None:
        # The control: the same type without heartbeats times out.
        control = self.c.create(harness.SHORT_TYPE)
        self.c.mark_processing(control.id)
        cr = self.c.create(harness.SHORT_TYPE)
        t0 = time.monotonic()
        with self.c.job(cr.id, processing_timeout=harness.SHORT_TIMEOUT) as job:
            self.assertEqual(job.heartbeat_interval, harness.SHORT_TIMEOUT / 4)
            time.sleep(harness.SHORT_TIMEOUT * 2)
            self.assertEqual(self.c.get(cr.id).status, "processing")
            job.result = Confirmation(True, "done")
        self.assertGreater(time.monotonic() - t0, harness.SHORT_TIMEOUT * 2)
        self.assertEqual(job.request.status, "succeeded")
        self.assertGreaterEqual(job.heartbeats, 4)
        r = self.c.wait(control.id, timeout=10)
        self.assertEqual((r.status, r.failure.code), ("failed", "ERR_JOB_EXECUTION_TIMED_OUT"))


class EmbeddedStoreTest(Suite, unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.start(use_redis=False)


class RedisTest(Suite, unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.start(use_redis=True)


if __name__ == "__main__":
    unittest.main()
