/** One dispatched server-sent event. `id` is the last event ID this connection set, undefined before any. */
export interface SSEEvent {
  id: string | undefined;
  event: string;
  data: string;
}

/**
 * Reads text/event-stream as the WHATWG HTML standard says (§9.2.6): lines end
 * with CRLF, LF or CR; a line opening with ':' is a comment; "field: value"
 * with one optional space; data lines join with LF; a blank line dispatches an
 * event that has data; an id with NUL is ignored; retry takes ASCII digits
 * only (reported through onRetry, in ms); a leading BOM is dropped; an event
 * not ended by a blank line is dropped. The body is cancelled when the caller
 * stops iterating. onId, when given, hears every id field, also one of an
 * event without data (which moves the last event ID without an event).
 */
export async function* readSSE(
  body: ReadableStream<Uint8Array>,
  onRetry: (ms: number) => void,
  onId?: (id: string) => void,
): AsyncGenerator<SSEEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let first = true;
  let data: string[] = [];
  let event = "";
  let id: string | undefined;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      if (first && buf) {
        if (buf[0] === "\uFEFF") buf = buf.slice(1);
        first = false;
      }
      for (;;) {
        const i = buf.search(/[\r\n]/);
        // A CR at the end may be the first half of a CRLF: wait for more.
        if (i < 0 || (buf[i] === "\r" && i === buf.length - 1)) break;
        const line = buf.slice(0, i);
        buf = buf.slice(buf.startsWith("\r\n", i) ? i + 2 : i + 1);
        if (line === "") {
          if (data.length) yield { id, event, data: data.join("\n") };
          data = [];
          event = "";
          continue;
        }
        if (line[0] === ":") continue;
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? "" : line.slice(c + 1);
        if (v[0] === " ") v = v.slice(1);
        if (field === "data") data.push(v);
        else if (field === "event") event = v;
        else if (field === "id" && !v.includes("\0")) {
          id = v;
          onId?.(v);
        }
        else if (field === "retry" && /^\d+$/.test(v)) onRetry(+v);
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
