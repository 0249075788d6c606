// The event-stream reader on its own: the WHATWG parsing rules, with chunks
// cut anywhere (a CRLF split in two, a UTF-8 character split in two).
import assert from "node:assert/strict";
import { test } from "node:test";
import { readSSE } from "../dist/sse.js";

function body(chunks) {
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(typeof ch === "string" ? new TextEncoder().encode(ch) : ch);
      c.close();
    },
  });
}

async function read(chunks) {
  const retries = [];
  const events = [];
  for await (const ev of readSSE(body(chunks), (ms) => retries.push(ms))) events.push(ev);
  return { events, retries };
}

test("fields, comments, multi-line data, ids that carry over, retry", async () => {
  const { events, retries } = await read([
    "\uFEFFretry: 2000\n\n: keep-alive\n",
    "id: 1\nevent: request\ndata: {\"a\":\ndata:1}\n\n",
    "data: no id of its own\n\n",
    "retry: soon\nid: 2\0x\nevent: later.kind\ndata\n\n",
    "data: cut off without a blank line",
  ]);
  assert.deepEqual(retries, [2000]);
  assert.deepEqual(events, [
    { id: "1", event: "request", data: '{"a":\n1}' },
    { id: "1", event: "", data: "no id of its own" },
    { id: "1", event: "later.kind", data: "" },
  ]);
});

test("line ends CRLF, CR and LF, split across chunks anywhere", async () => {
  const text = "id: 7\r\ndata: é€\r\rid: 8\rdata: b\n\ndata: c\r\n\r\n";
  const bytes = new TextEncoder().encode(text);
  const want = [
    { id: "7", event: "", data: "é€" },
    { id: "8", event: "", data: "b" },
    { id: "8", event: "", data: "c" },
  ];
  for (let cut = 1; cut < bytes.length; cut++) {
    const { events } = await read([bytes.slice(0, cut), bytes.slice(cut)]);
    assert.deepEqual(events, want, `cut at byte ${cut}`);
  }
});

test("stopping early cancels the body", async () => {
  let cancelled = false;
  const b = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode("data: one\n\n"));
    },
    cancel() {
      cancelled = true;
    },
  });
  for await (const ev of readSSE(b, () => {})) {
    assert.equal(ev.data, "one");
    break;
  }
  assert.ok(cancelled);
});
