// The client against a real `asyncstatus serve`, on the store named by the
// test file (embedded, or a redis-server the file starts).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { AsyncStatusError, Client, JobFailure, isProblem, runJob } from "@asyncstatus/client";
import { eventually, metric, sleep, startProxy, startRedis, startService } from "./helpers.mjs";

const link = { url: "https://files.example/x.pdf", expires_at: "2030-01-01T00:00:00Z" };
const uniqueType = (name) => `${name}.${Math.random().toString(36).slice(2, 10)}`;
const statuses = (states) => states.map((r) => r.status);

export function apiSuite(store) {
  describe(`client against asyncstatus serve (${store} store)`, { concurrency: true }, () => {
    let redis, svc, jobSvc, api;
    const proxies = [];
    /** A proxy of this test's own in front of the service, and clients through it. */
    const viaProxy = async (to = svc) => {
      const proxy = await startProxy(to.url);
      proxies.push(proxy);
      return proxy;
    };

    before(async () => {
      if (store === "redis") redis = await startRedis();
      [svc, jobSvc] = await Promise.all([
        startService({ redisUrl: redis?.url }),
        // Short timeouts, so that a job without heartbeats visibly fails. No
        // test here but the long poll one holds a long poll, so that it can
        // tell from the service's gauge that its poll is held.
        startService({
          redisUrl: redis?.url,
          env: { ASYNCSTATUS_LIFECYCLE_PROCESSING_TIMEOUT: "2s", ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL: "100ms" },
        }),
      ]);
      api = new Client({ baseUrl: svc.url, apiKey: svc.key });
    });
    after(async () => {
      await Promise.all(proxies.map((p) => p.stop()));
      await Promise.all([svc?.stop(), jobSvc?.stop()]);
      await redis?.stop();
    });

    test("every request method, and errors by code", async () => {
      const type = uniqueType("export");
      const created = await api.create({ type, context: { account: "acc_1" }, estimated_duration_seconds: 2 });
      assert.equal(created.status, "queued");
      assert.equal(created.version, 1);
      assert.match(created.poll_token, /\S{20,}/);
      assert.equal(created.location, `${svc.url}/v1/requests/${created.id}`);
      assert.equal(created.retryAfter, 1000, "estimated 2s, clamped into the schedule 1s");
      assert.deepEqual(created.context, { account: "acc_1" });

      const reader = new Client({ baseUrl: svc.url, pollToken: created.poll_token });
      const got = await reader.get(created.id);
      assert.equal(got.id, created.id);
      assert.equal(got.status, "queued");

      let r = await api.markProcessing(created.id, { percent: 10, message: "page 1" });
      assert.equal(r.status, "processing");
      assert.deepEqual(r.progress, { percent: 10, message: "page 1" });
      r = await api.heartbeat(created.id, { percent: 60 });
      assert.equal(r.version, 3);
      r = await api.complete(created.id, { result_type: "link", result: link });
      assert.equal(r.status, "succeeded");
      assert.equal(r.done, true);
      assert.equal(r.result.url, link.url);

      const events = await reader.events(created.id);
      assert.deepEqual(
        events.map((e) => [e.from, e.to]),
        [
          [null, "queued"],
          ["queued", "processing"],
          ["processing", "succeeded"],
        ],
      );

      // A second transition out of a terminal state: the error carries the request as it is.
      const terminal = await api.fail(created.id, "ERR_LATE", "too late").catch((e) => e);
      assert.ok(terminal instanceof AsyncStatusError);
      assert.equal(terminal.code, "ASYNC_REQUEST_ALREADY_TERMINAL");
      assert.equal(terminal.status, 409);
      assert.equal(terminal.request.status, "succeeded");

      const failed = await api.create({ type });
      r = await api.fail(failed.id, "ERR_UPSTREAM", "ledger down");
      assert.deepEqual([r.status, r.failure], ["failed", { code: "ERR_UPSTREAM", reason: "ledger down" }]);
      const cancelled = await api.create({ type });
      r = await api.cancel(cancelled.id, "user asked");
      assert.equal(r.status, "cancelled");

      const invalid = await api.create({ type: "Not A Type" }).catch((e) => e);
      assert.ok(isProblem(invalid, "VALIDATION_FAILED"), String(invalid));
      assert.equal(invalid.status, 400);
      assert.ok(invalid.errors.some((f) => f.field === "type"), JSON.stringify(invalid.errors));

      const key = "key-" + type;
      const first = await api.create({ type }, { idempotencyKey: key });
      const replay = await api.create({ type }, { idempotencyKey: key });
      assert.equal(replay.id, first.id);
      assert.equal(replay.poll_token, first.poll_token);
      const reused = await api.create({ type, context: { other: true } }, { idempotencyKey: key }).catch((e) => e);
      assert.equal(reused.code, "IDEMPOTENCY_KEY_REUSED");

      await api.delete(cancelled.id);
      const gone = await reader.get(cancelled.id).catch((e) => e);
      assert.equal(gone.code, "NOT_FOUND");
      const listByToken = await reader.listPage().catch((e) => e);
      assert.equal(listByToken.code, "UNAUTHENTICATED");
      const noKey = await new Client({ baseUrl: svc.url, apiKey: "ask_wrong" }).get(created.id).catch((e) => e);
      assert.equal(noKey.status, 401);
    });

    test("get sends the ETag it holds: an unchanged request costs a 304", async () => {
      const proxy = await viaProxy();
      const c = new Client({ baseUrl: proxy.url, apiKey: svc.key });
      const created = await api.create({ type: uniqueType("etag") });
      await api.complete(created.id, { result_type: "confirmation", result: { confirmed: true } });
      const a = await c.get(created.id);
      const b = await c.get(created.id);
      assert.deepEqual(b, a);
      const gets = proxy.gets(`/v1/requests/${created.id}`);
      assert.deepEqual(
        gets.map((e) => [e.headers["if-none-match"], e.status]),
        [
          [undefined, 200],
          [`"${a.version}"`, 304],
        ],
      );
    });

    test("single calls: 503 retried, 429 handed back with its Retry-After", async () => {
      const proxy = await viaProxy();
      const c = new Client({ baseUrl: proxy.url, apiKey: svc.key });
      const created = await api.create({ type: uniqueType("retry") });
      proxy.inject((q) => q.method === "GET", { status: 503, code: "BACKEND_UNAVAILABLE", retryAfter: 1 });
      const r = await c.get(created.id);
      assert.equal(r.id, created.id);
      const [e503, ok] = proxy.gets();
      assert.equal(e503.status, 503);
      assert.ok(ok.start - e503.at >= 1000 - 15, `retried ${ok.start - e503.at} ms after a Retry-After of 1 s`);

      proxy.inject((q) => q.method === "GET", { status: 429, code: "RATE_LIMITED", retryAfter: 3 });
      const limited = await c.get(created.id).catch((e) => e);
      assert.equal(limited.code, "RATE_LIMITED");
      assert.equal(limited.retryAfter, 3000);
      assert.equal(proxy.gets().length, 3, "a 429 is not retried by a single call");
    });

    test("create after a lost answer: retried under the same Idempotency-Key, one request made", async () => {
      const proxy = await viaProxy();
      const c = new Client({ baseUrl: proxy.url, apiKey: svc.key });
      const type = uniqueType("lost");
      proxy.inject((q) => q.method === "POST", { status: 503, code: "BACKEND_UNAVAILABLE", forward: true });
      const created = await c.create({ type });
      const posts = proxy.log.filter((e) => e.method === "POST");
      assert.equal(posts.length, 2);
      assert.equal(posts[0].dropped.status, 202, "the service made the request; its answer was lost");
      assert.match(posts[0].headers["idempotency-key"], /^asc_[0-9a-f]{32}$/);
      assert.equal(posts[1].headers["idempotency-key"], posts[0].headers["idempotency-key"]);
      assert.equal(created.id, JSON.parse(posts[0].dropped.body).id);
      const all = [];
      for await (const r of api.list({ type })) all.push(r.id);
      assert.deepEqual(all, [created.id]);
    });

    test("list iterates over pages, newest first, with filters", async () => {
      const type = uniqueType("list");
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push((await api.create({ type })).id);
      await api.cancel(ids[1]);
      const seen = [];
      for await (const r of api.list({ type, limit: 2 })) seen.push(r.id);
      assert.deepEqual(seen, [...ids].reverse());
      const pages = [];
      for await (const p of api.pages({ type, limit: 2 })) pages.push(p.items.length);
      assert.deepEqual(pages, [2, 2, 1]);
      const cancelled = [];
      for await (const r of api.list({ type, status: ["cancelled", "failed"] })) cancelled.push(r.id);
      assert.deepEqual(cancelled, [ids[1]]);
      const bad = await api.listPage({ type, cursor: "garbled" }).catch((e) => e);
      assert.equal(bad.code, "INVALID_CURSOR");
    });

    test("labels: list by label, look up by ids, count by status", async () => {
      const type = uniqueType("labels");
      const team = `t${Date.now()}`;
      const a = await api.create({ type, labels: { team, env: "prod" } });
      const b = await api.create({ type, labels: { team, env: "dev" } });
      const c = await api.create({ type });
      assert.deepEqual(a.labels, { env: "prod", team });
      await api.cancel(b.id);
      const byTeam = [];
      for await (const r of api.list({ labels: { team } })) byTeam.push(r.id);
      assert.deepEqual(byTeam, [b.id, a.id]);
      const prod = [];
      for await (const r of api.list({ labels: { team, env: "prod" } })) prod.push(r.id);
      assert.deepEqual(prod, [a.id]);
      const found = await api.lookup([a.id, c.id, "01936f7e-0000-7000-8000-000000000000"]);
      assert.deepEqual(found.map((r) => r.id), [c.id, a.id]);
      const counts = await api.counts({ labels: { team } });
      assert.equal(counts.queued, 1);
      assert.equal(counts.cancelled, 1);
      assert.equal(counts.succeeded, 0);
      const byType = await api.counts({ type });
      assert.equal(byType.queued, 2);
      const bad = await api.create({ type, labels: { Team: "x" } }).catch((e) => e);
      assert.equal(bad.code, "VALIDATION_FAILED");
    });

    test("wait: a held long poll is woken by the transition", async () => {
      const proxy = await viaProxy(jobSvc);
      const c = new Client({ baseUrl: jobSvc.url, apiKey: jobSvc.key });
      const created = await c.create({ type: uniqueType("longpoll") });
      const waiter = new Client({ baseUrl: proxy.url, pollToken: created.poll_token });
      const seen = [];
      const done = waiter.wait(created.id, { retryAfter: created.retryAfter, waitSeconds: 20, onChange: (r) => seen.push(r) });
      // The second poll is the held one.
      await eventually("the second poll", async () => proxy.gets().length === 2);
      await eventually("the service holding it", async () => (await metric(jobSvc.url, "asyncstatus_wait_long_polls_held")) === 1);
      await c.complete(created.id, { result_type: "link", result: link });
      const final = await done;
      assert.equal(final.status, "succeeded");
      assert.deepEqual(statuses(seen), ["queued", "succeeded"]);
      const gets = proxy.gets();
      assert.equal(gets.length, 2, "the change woke the held poll: no further poll");
      assert.deepEqual(
        gets.map((e) => [e.headers.prefer, e.headers["if-none-match"], e.status, e.resHeaders["preference-applied"]]),
        [
          ["wait=20", '"0"', 200, "wait=20"],
          ["wait=20", '"1"', 200, "wait=20"],
        ],
      );
    });

    test("wait: behind a proxy that strips Prefer, polls paced by Retry-After, never sooner", async () => {
      const proxy = await viaProxy();
      proxy.stripPrefer = true;
      const created = await api.create({ type: uniqueType("paced") });
      const createdAt = Date.now();
      const waiter = new Client({ baseUrl: proxy.url, pollToken: created.poll_token });
      const seen = [];
      const done = waiter.wait(created.id, { retryAfter: created.retryAfter, onChange: (r) => seen.push(r) });
      // The first poll's answer, not its arrival: a change made while the
      // service reads the request would be the first state the waiter sees.
      await eventually("the first poll's answer", async () => seen.length >= 1);
      assert.deepEqual(statuses(seen), ["queued"]);
      await api.markProcessing(created.id, { percent: 50 });
      await eventually("a poll that saw processing", async () => seen.length >= 2);
      await eventually("a poll answered 304", async () => proxy.gets().some((e) => e.status === 304));
      await api.complete(created.id, { result_type: "link", result: link });
      const final = await done;
      assert.equal(final.status, "succeeded");
      assert.deepEqual(statuses(seen), ["queued", "processing", "succeeded"]);
      const gets = proxy.gets();
      assert.ok(gets.length >= 3, `${gets.length} polls`);
      assert.ok(gets[0].start - createdAt >= created.retryAfter - 15, "the create's Retry-After was waited before the first poll");
      for (let i = 0; i < gets.length; i++) {
        assert.equal(gets[i].resHeaders["preference-applied"], undefined);
        assert.notEqual(gets[i].status, 429, "never polled too early");
        if (i === 0) continue;
        const asked = Number(gets[i - 1].resHeaders["retry-after"]) * 1000;
        assert.ok(gets[i].start - gets[i - 1].at >= asked - 15, `poll ${i} came ${gets[i].start - gets[i - 1].at} ms after a Retry-After of ${asked} ms`);
      }
      assert.ok(gets.some((e) => e.status === 304), "an unchanged request cost a 304");
    });

    test("wait: 429 and 503 are waited out for their Retry-After", async () => {
      const proxy = await viaProxy();
      const created = await api.create({ type: uniqueType("limited") });
      const waiter = new Client({ baseUrl: proxy.url, pollToken: created.poll_token });
      const nth = (k) => (q) => q.method === "GET" && proxy.gets().length === k;
      proxy.inject(nth(2), { status: 429, code: "POLLED_TOO_EARLY", retryAfter: 1 });
      proxy.inject(nth(3), { status: 429, code: "RATE_LIMITED", retryAfter: 1 });
      proxy.inject(nth(4), { status: 503, code: "BACKEND_UNAVAILABLE", retryAfter: 1 });
      const done = waiter.wait(created.id, { waitSeconds: 20 });
      await eventually("the held long poll after the refusals", async () => proxy.gets().length === 5, 20000);
      await api.complete(created.id, { result_type: "confirmation", result: { confirmed: true } });
      assert.equal((await done).status, "succeeded");
      const gets = proxy.gets();
      assert.deepEqual(
        gets.map((e) => e.status),
        [200, 429, 429, 503, 200],
      );
      for (const i of [2, 3, 4]) {
        const gap = gets[i].start - gets[i - 1].at;
        assert.ok(gap >= 1000 - 15, `poll ${i} came ${gap} ms after a refusal with Retry-After: 1`);
      }
    });

    test("stream: every state in order, over fetch with the poll token", async () => {
      const created = await api.create({ type: uniqueType("stream") });
      const reader = new Client({ baseUrl: svc.url, pollToken: created.poll_token });
      const seen = [];
      const done = (async () => {
        for await (const r of reader.stream(created.id)) {
          seen.push(r);
          if (r.status === "queued") await api.markProcessing(created.id, { percent: 50, message: "half" });
          if (r.status === "processing") await api.complete(created.id, { result_type: "link", result: link });
        }
      })();
      await done;
      assert.deepEqual(statuses(seen), ["queued", "processing", "succeeded"]);
      assert.deepEqual(seen[1].progress, { percent: 50, message: "half" });
      // Resumed at the terminal version: nothing more to tell.
      const after = [];
      for await (const r of reader.stream(created.id, { lastEventId: String(seen[2].version) })) after.push(r);
      assert.deepEqual(after, []);
    });

    test("stream: resumed with Last-Event-ID after a forced disconnect", async () => {
      const proxy = await viaProxy();
      const created = await api.create({ type: uniqueType("resume") });
      const reader = new Client({ baseUrl: proxy.url, pollToken: created.poll_token });
      const cut = proxy.cutStream();
      const seen = [];
      const done = (async () => {
        for await (const r of reader.stream(created.id)) seen.push(r);
      })();
      await cut;
      // While the client is away: a change it must not miss.
      await api.markProcessing(created.id, { percent: 30 });
      await eventually("the resumed stream", async () => seen.length === 2);
      await api.complete(created.id, { result_type: "link", result: link });
      await done;
      assert.deepEqual(statuses(seen), ["queued", "processing", "succeeded"]);
      assert.deepEqual(
        seen.map((r) => r.version),
        [1, 2, 3],
      );
      const streams = proxy.gets(`/v1/requests/${created.id}/stream`);
      assert.equal(streams.length, 2);
      assert.equal(streams[0].headers["last-event-id"], undefined);
      assert.equal(streams[1].headers["last-event-id"], "1");
      assert.equal(streams[1].headers["x-poll-token"], created.poll_token);
    });

    test("watch: every change of the tenant's matching requests, then resumed from an event's id", async () => {
      const type = uniqueType("watch");
      const key = (r) => `${r.id} v${r.version} ${r.status}`;
      // Markers until the watch reports one: then it is held.
      let held = false;
      const markers = (async () => {
        while (!held) {
          await api.create({ type, labels: { marker: "yes" } });
          await sleep(50);
        }
      })();
      const want = [];
      const got = [];
      const ids = [];
      let last = "";
      for await (const ev of api.watch({ type })) {
        assert.ok(ev.id && !ev.reset, JSON.stringify(ev));
        if (ev.request.labels?.marker) {
          if (!held) {
            held = true;
            await markers;
            for (let i = 0; i < 3; i++) {
              const c = await api.create({ type });
              ids.push(c.id);
              want.push(key(c));
              await api.create({ type: uniqueType("other") });
              want.push(key(await api.markProcessing(c.id, { percent: 10 })));
            }
          }
          continue;
        }
        got.push(key(ev.request));
        last = ev.id;
        if (got.length === want.length) break;
      }
      assert.deepEqual([...got].sort(), [...want].sort());
      const missed = [key(await api.complete(ids[0], { result_type: "link", result: link })), key(await api.create({ type }))];
      const again = [];
      for await (const ev of api.watch({ type, lastEventId: last })) {
        assert.ok(!ev.reset);
        again.push(key(ev.request));
        if (again.length === missed.length) break;
      }
      assert.deepEqual([...again].sort(), [...missed].sort());
      const bad = await (async () => {
        for await (const _ of api.watch({ type: "BAD!" })) return null;
      })().catch((e) => e);
      assert.equal(bad.code, "VALIDATION_FAILED");
    });

    test("stream: breaking out of the loop closes the connection", async () => {
      const proxy = await viaProxy();
      const created = await api.create({ type: uniqueType("break") });
      const reader = new Client({ baseUrl: proxy.url, apiKey: svc.key });
      for await (const r of reader.stream(created.id)) {
        assert.equal(r.status, "queued");
        break;
      }
      await eventually("the proxy to see the client leave", async () => proxy.gets()[0].closed);
      const ac = new AbortController();
      const it = reader.stream(created.id, { signal: ac.signal });
      await it.next();
      const pending = it.next();
      ac.abort(new Error("stop"));
      await assert.rejects(pending, /stop/);
    });

    test("runJob: heartbeats keep a job alive past processing_timeout; progress is reported", async () => {
      const c = new Client({ baseUrl: jobSvc.url, apiKey: jobSvc.key });
      // The control: marked processing, no heartbeat: the sweeper fails it.
      const idle = await c.create({ type: uniqueType("idle") });
      await c.markProcessing(idle.id);
      const job = await c.create({ type: uniqueType("job") });
      const { request, error } = await runJob(
        c,
        job.id,
        async ({ report, signal }) => {
          for (let i = 1; i <= 6; i++) {
            await sleep(500);
            assert.equal(signal.aborted, false);
            report(i * 16, `step ${i}`);
          }
          return { result_type: "answer", result: { pages: 6 } };
        },
        { processingTimeout: 2000, progressInterval: 100 },
      );
      assert.equal(error, undefined);
      assert.equal(request.status, "succeeded");
      assert.deepEqual(request.result, { pages: 6 });
      assert.ok(request.version >= 7, `heartbeats and progress: version ${request.version}`);
      assert.equal(request.progress.message, "step 6");
      const timedOut = await c.get(idle.id);
      assert.equal(timedOut.status, "failed");
      assert.equal(timedOut.failure.code, "ERR_JOB_EXECUTION_TIMED_OUT");
    });

    test("runJob: a thrown error fails the request with a code", async () => {
      const c = new Client({ baseUrl: jobSvc.url, apiKey: jobSvc.key });
      const a = await c.create({ type: uniqueType("throw") });
      const boom = new JobFailure("ERR_RENDER", "page 3 would not render");
      const outA = await runJob(c, a.id, async () => {
        throw boom;
      });
      assert.equal(outA.error, boom);
      assert.deepEqual([outA.request.status, outA.request.failure], ["failed", { code: "ERR_RENDER", reason: "page 3 would not render" }]);
      const b = await c.create({ type: uniqueType("throw") });
      const outB = await runJob(c, b.id, () => {
        throw new TypeError("x".repeat(2000));
      });
      assert.equal(outB.request.failure.code, "ERR_JOB_FAILED");
      assert.equal([...outB.request.failure.reason].length, 1024);
      const c2 = await c.create({ type: uniqueType("throw") });
      const outC = await runJob(c, c2.id, () => Promise.reject(new Error("disk full")), { failCode: "ERR_DISK" });
      assert.deepEqual(outC.request.failure, { code: "ERR_DISK", reason: "disk full" });
    });

    test("runJob: a cancel is seen at the next heartbeat and aborts the job", async () => {
      const c = new Client({ baseUrl: jobSvc.url, apiKey: jobSvc.key });
      const job = await c.create({ type: uniqueType("cancel") });
      let aborted = false;
      const running = runJob(
        c,
        job.id,
        ({ signal }) =>
          new Promise((_, reject) => {
            signal.addEventListener("abort", () => {
              aborted = true;
              reject(signal.reason);
            });
          }),
        { heartbeatInterval: 200 },
      ).catch((e) => e);
      await eventually("the job running", async () => (await c.events(job.id)).length === 2);
      await c.cancel(job.id, "user changed their mind");
      const err = await running;
      assert.ok(aborted, "the job's signal was aborted");
      assert.ok(isProblem(err, "ASYNC_REQUEST_ALREADY_TERMINAL"), String(err));
      assert.equal(err.request.status, "cancelled");
      // A request already terminal is not run at all.
      let ran = false;
      const again = await runJob(c, job.id, () => {
        ran = true;
      }).catch((e) => e);
      assert.equal(again.code, "ASYNC_REQUEST_ALREADY_TERMINAL");
      assert.equal(ran, false);
    });
  });
}
