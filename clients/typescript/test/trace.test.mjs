// A caller-given trace context goes out as traceparent/tracestate, and
// nothing goes out without one.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "../dist/index.js";

test("traceparent and tracestate are sent as given, and only when given", async () => {
  const seen = [];
  const fetch = async (_url, init) => {
    seen.push(init.headers);
    return new Response(JSON.stringify({ id: "01a23cc7-b9b3-77ef-a05f-cf0500923ca9", status: "queued", done: false, poll_token: "pt" }), {
      status: 202,
      headers: { "Content-Type": "application/json" },
    });
  };
  const c = new Client({ baseUrl: "http://status.test", apiKey: "ask_x", fetch });
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  await c.create({ type: "x.y" }, { traceparent: tp, tracestate: "vendor=abc" });
  await c.create({ type: "x.y" });
  assert.equal(seen[0].traceparent, tp);
  assert.equal(seen[0].tracestate, "vendor=abc");
  assert.equal(seen[1].traceparent, undefined);
  assert.equal(seen[1].tracestate, undefined);
});
