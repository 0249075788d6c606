import { AsyncStatusError } from "./errors.js";
import { readSSE } from "./sse.js";
import type { AsyncRequest, Counts, Created, Page, Progress, RequestEvent, Result, Status } from "./types.js";

/** Options of a Client. Durations are in milliseconds. */
export interface ClientOptions {
  /** Scheme and host of the service, and its path prefix if mounted under one: "https://status.example". */
  baseUrl: string;
  /**
   * Sent as `Authorization: Bearer`. Its scopes decide what works: read (get,
   * list, events, wait, stream), write (create, transitions), admin (delete).
   */
  apiKey?: string;
  /** A request's poll token (`X-Poll-Token`): reads that one request. Used when no apiKey is set. */
  pollToken?: string;
  /** The fetch to use. default: the global fetch. */
  fetch?: typeof fetch;
  /** Headers added to every call (e.g. User-Agent in Node). default: none. */
  headers?: Record<string, string>;
  /** Retries of single calls after a transport error or a 503 (see the README). */
  retry?: RetryPolicy;
}

/** How a call that may be retried is retried. Zero or absent fields take their default. */
export interface RetryPolicy {
  /** Tries of one call, the first included. default: 4; 1 turns retries off. */
  maxAttempts?: number;
  /** Wait before the first retry, doubling with each, drawn between half and all of it. default: 200. */
  minBackoff?: number;
  /** Cap of that doubling (a longer Retry-After still wins). default: 10000. */
  maxBackoff?: number;
}

/** Options of one call. */
export interface CallOptions {
  /** Aborts the call (and its retries). */
  signal?: AbortSignal;
  /**
   * POST only: the Idempotency-Key (1..255 printable ASCII) instead of a
   * random one; the service replays the first answer to the same key and body.
   */
  idempotencyKey?: string;
  /**
   * The W3C trace context of the caller's work (docs/reference.md §17), sent
   * as the `traceparent` header (and `tracestate`), e.g. the one of the
   * request the caller is serving, or `propagation.inject` of its
   * OpenTelemetry span: the service's spans join that trace, and a create's
   * webhook deliveries carry it on. The service ignores one that is not valid.
   */
  traceparent?: string;
  tracestate?: string;
}

/** What `create` sends. */
export interface CreateParams {
  /** `^[a-z0-9][a-z0-9._-]{0,63}$`, e.g. "statement.export". */
  type: string;
  /** A JSON object of at most limits.context_bytes (4 KiB by default), returned with the request. */
  context?: Record<string, unknown>;
  /** 1..86400 whole seconds: sets the create answer's Retry-After within the polling schedule. */
  estimated_duration_seconds?: number;
  /** At most 8 labels, fixed for the request's life, to list and count it by (docs/reference.md §16). */
  labels?: Record<string, string>;
}

/** Filters of a listing; absent members do not filter. */
export interface ListOptions {
  type?: string;
  /** One status or several (any of them). */
  status?: Status | Status[];
  /** Bounds of created_at, inclusive (RFC 3339 or a Date). */
  createdAfter?: string | Date;
  createdBefore?: string | Date;
  /** Page size, 1..200. default: the service's, 50. */
  limit?: number;
  /** Start at this page (a `next_cursor`), with the same filters. */
  cursor?: string;
  /** Requests carrying every one of these labels (at most 4). */
  labels?: Record<string, string>;
  signal?: AbortSignal;
}

/** Filters of `counts`: a type or one label, and created_at bounds. */
export interface CountOptions {
  type?: string;
  /** One label (name and value). */
  labels?: Record<string, string>;
  createdAfter?: string | Date;
  createdBefore?: string | Date;
  signal?: AbortSignal;
}

/** Options of one `poll`. */
export interface PollOptions {
  /** The ETag of the state the caller has: an unchanged request answers 304. */
  ifNoneMatch?: string;
  /** Long poll: hold the answer until a change, up to this many seconds (`Prefer: wait`). */
  waitSeconds?: number;
  signal?: AbortSignal;
}

/** The answer to one `poll`. */
export interface PollResult {
  /** The current state; undefined when notModified. */
  request: AsyncRequest | undefined;
  notModified: boolean;
  /** Names this state for the next ifNoneMatch. */
  etag: string;
  /** When the service wants the next poll, in ms; undefined when it did not say (terminal). */
  retryAfter: number | undefined;
  /** The service applied the long poll (Preference-Applied): it may be asked again at once. */
  longPolled: boolean;
}

/** Options of `wait`. Durations in milliseconds. */
export interface WaitOptions {
  /** Called with every new state (a higher version), in order, the first and the terminal one included. */
  onChange?: (r: AsyncRequest) => void;
  /**
   * The create answer's Retry-After (`created.retryAfter`), waited before the
   * first poll unless this client has seen the service apply a long poll. default: 0.
   */
  retryAfter?: number;
  /** The long poll asked for (`Prefer: wait=N`, seconds); 0 or negative: ordinary polls only. default: 25. */
  waitSeconds?: number;
  /** Cap of the doubling, jittered backoff after 503s and transport errors. default: 30000. */
  maxBackoff?: number;
  /** Transport errors and 503s in a row before giving up with the last one. default: 10. */
  maxErrors?: number;
  signal?: AbortSignal;
}

/** Options of `stream`. */
export interface StreamOptions {
  /** Resume after this event id (a version): only later states come. default: the current state first. */
  lastEventId?: string;
  /**
   * "eventsource": the browser's EventSource with `?poll_token=`; "fetch": an
   * event-stream reader over fetch, sending the credential as a header.
   * default: "eventsource" where EventSource exists, the client holds only a
   * poll token and no lastEventId is given, else "fetch".
   */
  transport?: "eventsource" | "fetch";
  /** Cap of the backoff between reconnections after errors, ms. default: 30000. */
  maxBackoff?: number;
  /** Failed connections in a row (transport errors, 429, 503, a stream cut before any event) before giving up. default: 10. */
  maxErrors?: number;
  signal?: AbortSignal;
}

/** Options of `watch`: the list's filters that apply to a change. */
export interface WatchOptions {
  type?: string;
  /** Changes that left the request in one of these statuses. */
  status?: Status | Status[];
  /** Requests carrying every one of these labels (at most 4). */
  labels?: Record<string, string>;
  /** Resume after this event's id (a position from an earlier watch). default: live changes only. */
  lastEventId?: string;
  /** Cap of the backoff between reconnections after errors, ms. default: 30000. */
  maxBackoff?: number;
  /** Failed connections in a row (transport errors, 429, 503, a watch the service did not hold) before giving up. default: 10. */
  maxErrors?: number;
  signal?: AbortSignal;
}

/** One event of `watch`: a change (`request` as it left the request), or a reset (list again). */
export interface WatchEvent {
  /** The watch's position after this event: pass it as `lastEventId` to resume from here. */
  id: string;
  request?: AsyncRequest;
  reset?: true;
}

type Query = Record<string, string | undefined>;
interface Call extends CallOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
  attempts?: number;
}

/** An ETag that matches no state (versions start at 1): a long poll carrying it answers at once. */
const NO_VERSION = '"0"';

/** Waits ms, or rejects with the signal's reason when it aborts first. */
export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    if (ms <= 0) return resolve();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      signal?.aborted ? reject(signal.reason) : resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done);
  });

/**
 * The wait before retry n (1 for the first): doubling from min, capped at max,
 * drawn between half and all of it; never shorter than the service's
 * Retry-After, to which a little jitter (up to 10%, at most 1s) is added so
 * that many clients told the same time do not come back at once.
 */
export const backoff = (n: number, min: number, max: number, retryAfter = 0): number => {
  const d = Math.min(min * 2 ** (n - 1), max);
  const j = retryAfter > 0 ? retryAfter + Math.random() * Math.min(retryAfter / 10, 1000) : 0;
  return Math.max(d / 2 + (Math.random() * d) / 2, j);
};

/** Retry-After in ms: whole seconds or an HTTP date; undefined when absent or garbled. */
const retryAfterOf = (h: Headers): number | undefined => {
  const v = h.get("Retry-After")?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return +v * 1000;
  const t = Date.parse(v);
  return isNaN(t) ? undefined : Math.max(t - Date.now(), 0);
};

/** A random Idempotency-Key of 128 bits. */
const newKey = (): string =>
  "asc_" + Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");

/** The AsyncStatusError of a failed answer. */
export async function problemOf(res: Response): Promise<AsyncStatusError> {
  const text = await res.text().catch(() => "");
  let p: Record<string, any> | undefined;
  try {
    p = JSON.parse(text);
  } catch {}
  if (!p || typeof p.code !== "string") p = { detail: text.trim().slice(0, 200) || res.statusText };
  return new AsyncStatusError(res.status, p, retryAfterOf(res.headers));
}

/** A label_selector of labels: `name=value` terms joined by commas. */
function selector(labels: Record<string, string> | undefined): string | undefined {
  if (!labels) return undefined;
  const terms = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
  return terms.length ? terms.join(",") : undefined;
}

const isoOf = (t: string | Date | undefined) => (t instanceof Date ? t.toISOString() : t);

/**
 * A client of one asyncstatus service (docs/reference.md §2-§5, §12). Make one
 * and share it; every method takes an AbortSignal.
 *
 * GET and POST calls are retried after a transport error or a 503, with
 * doubling, jittered backoff that honours Retry-After. Every POST carries an
 * Idempotency-Key (the caller's, or a random one per call) that stays the same
 * on its retries, so a retried create makes one request and a retried
 * transition applies once. DELETE is not retried. 4xx answers (429 included)
 * reject at once with an AsyncStatusError; `wait` and `stream` wait 429s out.
 */
export class Client {
  readonly #base: string;
  readonly #apiKey: string | undefined;
  readonly #pollToken: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #headers: Record<string, string>;
  readonly #retry: Required<RetryPolicy>;
  /** Whether the service applied Prefer: wait the last time it was asked (undefined: not asked yet). */
  #longPoll: boolean | undefined;
  /** The last state `get` read of each request, by id, for If-None-Match. */
  readonly #seen = new Map<string, { etag: string; request: AsyncRequest }>();

  constructor(o: ClientOptions) {
    if (!/^https?:\/\/[^/]/.test(o.baseUrl)) throw new TypeError(`asyncstatus: base URL ${o.baseUrl}: want http(s)://host`);
    this.#base = o.baseUrl.replace(/\/+$/, "");
    this.#apiKey = o.apiKey;
    this.#pollToken = o.pollToken;
    this.#fetch = o.fetch ?? ((input, init) => fetch(input, init));
    this.#headers = { ...o.headers };
    const r = o.retry ?? {};
    this.#retry = { maxAttempts: r.maxAttempts || 4, minBackoff: r.minBackoff || 200, maxBackoff: r.maxBackoff || 10000 };
  }

  /** Sends one call with the credentials and returns the answer, whatever its status. */
  #send(method: string, path: string, c: Call, accept = "application/json"): Promise<Response> {
    const h: Record<string, string> = { ...this.#headers, Accept: accept, ...c.headers };
    if (c.body !== undefined) h["Content-Type"] = "application/json";
    if (c.idempotencyKey) h["Idempotency-Key"] = c.idempotencyKey;
    if (c.traceparent) {
      h.traceparent = c.traceparent;
      if (c.tracestate) h.tracestate = c.tracestate;
    }
    if (this.#apiKey) h.Authorization = "Bearer " + this.#apiKey;
    else if (this.#pollToken) h["X-Poll-Token"] = this.#pollToken;
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(c.query ?? {})) if (v !== undefined && v !== "") q.set(k, v);
    const qs = q.toString();
    return this.#fetch(this.#base + path + (qs ? "?" + qs : ""), {
      method,
      headers: h,
      body: c.body === undefined ? undefined : JSON.stringify(c.body),
      signal: c.signal,
    });
  }

  /** Sends a call, retrying as the class doc says; resolves with a 2xx or 304 answer. */
  async #do(method: string, path: string, c: Call = {}): Promise<Response> {
    if (method === "POST") c = { ...c, idempotencyKey: c.idempotencyKey || newKey() };
    const attempts = method === "DELETE" ? 1 : c.attempts ?? this.#retry.maxAttempts;
    for (let n = 1; ; n++) {
      let err: unknown;
      try {
        const res = await this.#send(method, path, c);
        if (res.ok || res.status === 304) return res;
        err = await problemOf(res);
      } catch (e) {
        err = e;
      }
      if (c.signal?.aborted) throw c.signal.reason;
      if ((err instanceof AsyncStatusError && err.status !== 503) || n >= attempts) throw err;
      const ra = err instanceof AsyncStatusError ? err.retryAfter : 0;
      await sleep(backoff(n, this.#retry.minBackoff, this.#retry.maxBackoff, ra), c.signal);
    }
  }

  async #json<T>(method: string, path: string, c?: Call): Promise<T> {
    return (await this.#do(method, path, c)).json() as Promise<T>;
  }

  /** Creates a request (POST /v1/requests, write scope); one call makes at most one request. */
  async create(p: CreateParams, o: CallOptions = {}): Promise<Created> {
    const res = await this.#do("POST", "/v1/requests", { ...o, body: p });
    const r = (await res.json()) as Created;
    r.location = res.headers.get("Location") ?? `${this.#base}${path(r.id)}`;
    r.retryAfter = retryAfterOf(res.headers) ?? 0;
    return r;
  }

  /**
   * Reads a request (GET /v1/requests/{id}, read scope or its poll token).
   * It sends the ETag of the state it last read of this request, so an
   * unchanged request costs a 304 and resolves with that state. A second
   * read of a request that is not terminal within its Retry-After is refused
   * by the service (429 POLLED_TOO_EARLY): to follow a request, use `wait`.
   */
  async get(id: string, o: CallOptions = {}): Promise<AsyncRequest> {
    const seen = this.#seen.get(id);
    const res = await this.#do("GET", path(id), { ...o, headers: seen ? { "If-None-Match": seen.etag } : {} });
    if (res.status === 304 && seen) return seen.request;
    const request = (await res.json()) as AsyncRequest;
    const etag = res.headers.get("ETag");
    this.#seen.delete(id);
    if (etag) this.#seen.set(id, { etag, request });
    if (this.#seen.size > 100) this.#seen.delete(this.#seen.keys().next().value!);
    return request;
  }

  /**
   * One poll, conditional (ifNoneMatch) and long (waitSeconds), not retried:
   * a caller looping over it paces itself by retryAfter and by the errors' (429, 503).
   */
  async poll(id: string, o: PollOptions = {}): Promise<PollResult> {
    const headers: Record<string, string> = {};
    const asked = o.waitSeconds && o.waitSeconds > 0 ? Math.max(1, Math.ceil(o.waitSeconds)) : 0;
    if (asked) headers.Prefer = "wait=" + asked;
    if (o.ifNoneMatch) headers["If-None-Match"] = o.ifNoneMatch;
    const res = await this.#do("GET", path(id), { signal: o.signal, headers, attempts: 1 });
    const longPolled = /(^|,)\s*wait\b/i.test(res.headers.get("Preference-Applied") ?? "");
    if (asked) this.#longPoll = longPolled;
    const notModified = res.status === 304;
    return {
      request: notModified ? undefined : ((await res.json()) as AsyncRequest),
      notModified,
      etag: res.headers.get("ETag") || o.ifNoneMatch || "",
      retryAfter: retryAfterOf(res.headers),
      longPolled,
    };
  }

  /**
   * Follows a request until it is terminal and resolves with its final state
   * (a failed, cancelled or expired request is not an error: read its status).
   *
   * Every poll asks for a long poll with the last ETag (the first with one
   * that matches nothing, so it answers at once). Where the service applies it
   * (Preference-Applied), each change comes at once and the next poll goes out
   * at once. Where it does not (a proxy dropped the header, a replica at its
   * wait.max_waiters), the next poll goes out when the answer's Retry-After
   * says, never sooner. A 429 is waited out for its Retry-After (plus jitter,
   * and a growing backoff for RATE_LIMITED); a 503 or transport error backs off
   * (doubling, jittered, never shorter than a Retry-After) up to maxErrors in a
   * row. Any other error answer rejects.
   */
  async wait(id: string, o: WaitOptions = {}): Promise<AsyncRequest> {
    const ws = o.waitSeconds ?? 25;
    const maxBackoff = o.maxBackoff ?? 30000;
    const { minBackoff } = this.#retry;
    let last: AsyncRequest | undefined;
    let etag = "";
    let errs = 0;
    let limited = 0;
    let delay = o.retryAfter && !this.#longPoll ? o.retryAfter : 0;
    for (;;) {
      await sleep(delay, o.signal);
      const start = Date.now();
      let pr: PollResult;
      try {
        pr = await this.poll(id, {
          ifNoneMatch: etag || (ws > 0 ? NO_VERSION : undefined),
          waitSeconds: ws,
          signal: o.signal,
        });
      } catch (e) {
        if (o.signal?.aborted) throw o.signal.reason;
        const ra = e instanceof AsyncStatusError ? e.retryAfter ?? 1000 : 0;
        if (e instanceof AsyncStatusError && e.status === 429) {
          limited++;
          delay = e.code === "POLLED_TOO_EARLY" ? backoff(1, 0, 0, ra) : backoff(limited, minBackoff, maxBackoff, ra);
          continue;
        }
        if ((e instanceof AsyncStatusError && e.status !== 503) || ++errs >= (o.maxErrors ?? 10)) throw e;
        delay = backoff(errs, minBackoff, maxBackoff, ra);
        continue;
      }
      errs = limited = 0;
      const r = pr.request;
      if (r) {
        if (!last || r.version > last.version) {
          last = r;
          o.onChange?.(r);
        }
        etag = pr.etag;
        if (r.done) return r;
      }
      delay = pr.longPolled
        ? // Retry-After 0: ask again at once; only an answer that came back
          // suspiciously fast without news gets a breather, so that a
          // misbehaving intermediary cannot make this loop spin.
          pr.notModified && Date.now() - start < 100
          ? 100
          : 0
        : pr.retryAfter ?? 1000;
    }
  }

  /**
   * The states of a request over its event stream (GET /v1/requests/{id}/stream),
   * as an async iterator that ends after the terminal state. A cut stream
   * (the service's wait.stream_max, a restart, a network error) is resumed
   * with Last-Event-ID after the stream's retry time (2s) or a longer backoff,
   * so no state is missed and none repeats. Breaking out of the loop or
   * aborting the signal closes the stream.
   */
  async *stream(id: string, o: StreamOptions = {}): AsyncGenerator<AsyncRequest, void, undefined> {
    const s = { lastId: o.lastEventId ?? "", last: undefined as AsyncRequest | undefined };
    // EventSource cannot send a first Last-Event-ID: a resume goes over fetch.
    const es = typeof EventSource === "function" && !this.#apiKey && this.#pollToken && !s.lastId;
    if ((o.transport ?? (es ? "eventsource" : "fetch")) === "eventsource") {
      // EventSource gives up on any answer but 200 (a 429, a 503, a 404) and
      // tells nothing of it; the reader over fetch then goes on, and says why.
      if (yield* this.#eventSource(id, s, o.signal)) return;
    }
    let reconnect = 2000;
    let errs = 0;
    for (;;) {
      const start = Date.now();
      let got = 0;
      let err: unknown;
      try {
        const res = await this.#send(
          "GET",
          path(id, "/stream"),
          { signal: o.signal, headers: s.lastId ? { "Last-Event-ID": s.lastId } : {} },
          "text/event-stream",
        );
        // 204: resumed at the terminal version, which the caller has seen.
        if (res.status === 204) return;
        if (!res.ok) throw await problemOf(res);
        if (!res.body) throw new TypeError("asyncstatus: stream answered without a body");
        for await (const ev of readSSE(res.body, (ms) => (reconnect = ms))) {
          if (ev.id !== undefined) s.lastId = ev.id;
          if (ev.event && ev.event !== "request") continue; // an event type of a later API version
          const r = JSON.parse(ev.data) as AsyncRequest;
          got++;
          if (!s.last || r.version > s.last.version) yield (s.last = r);
          if (r.done) return;
        }
      } catch (e) {
        if (o.signal?.aborted) throw o.signal.reason;
        if (e instanceof AsyncStatusError && e.status !== 429 && e.status !== 503) throw e;
        err = e;
      }
      let delay = reconnect;
      if (!err && (got || Date.now() - start > reconnect)) errs = 0;
      else {
        if (++errs >= (o.maxErrors ?? 10)) throw err ?? new TypeError("asyncstatus: stream ended before any event");
        const ra = err instanceof AsyncStatusError ? err.retryAfter : 0;
        delay = Math.max(reconnect, backoff(errs, this.#retry.minBackoff, o.maxBackoff ?? 30000, ra));
      }
      await sleep(delay, o.signal);
    }
  }

  /**
   * Every change of the tenant's requests that the filters keep
   * (GET /v1/requests?watch=true, read scope; docs/reference.md §16), as an
   * async iterator: each create, transition and heartbeat, from any replica,
   * each request's in order. A cut watch is resumed with Last-Event-ID, so no
   * change is missed and none repeats; when the service can no longer replay
   * what was missed, the next event is a reset (list again). Over fetch (an
   * API key is sent as a header, which EventSource cannot). Breaking out of
   * the loop or aborting the signal closes it.
   */
  async *watch(o: WatchOptions = {}): AsyncGenerator<WatchEvent, void, undefined> {
    const query: Query = {
      watch: "true",
      type: o.type,
      status: Array.isArray(o.status) ? o.status.join(",") : o.status,
      label_selector: selector(o.labels),
    };
    let lastId = o.lastEventId ?? "";
    let reconnect = 2000;
    let errs = 0;
    for (;;) {
      let got = 0;
      let err: unknown;
      try {
        const res = await this.#send(
          "GET",
          "/v1/requests",
          { query, signal: o.signal, headers: lastId ? { "Last-Event-ID": lastId } : {} },
          "text/event-stream",
        );
        if (!res.ok) throw await problemOf(res);
        if (!res.body) throw new TypeError("asyncstatus: watch answered without a body");
        // every id counts, one without an event too: the service moves a
        // filtered watch's position past changes the filter dropped
        for await (const ev of readSSE(res.body, (ms) => (reconnect = ms), (id) => (lastId = id))) {
          if (ev.id === undefined) continue;
          if (ev.event === "reset") {
            got++;
            yield { id: ev.id, reset: true };
          } else if (!ev.event || ev.event === "request") {
            got++;
            yield { id: ev.id, request: JSON.parse(ev.data) as AsyncRequest };
          }
        }
      } catch (e) {
        if (o.signal?.aborted) throw o.signal.reason;
        if (e instanceof AsyncStatusError && e.status !== 429 && e.status !== 503) throw e;
        err = e;
      }
      let delay = reconnect;
      if (!err && got) errs = 0;
      else {
        if (++errs >= (o.maxErrors ?? 10)) throw err ?? new TypeError("asyncstatus: the service did not hold the watch");
        const ra = err instanceof AsyncStatusError ? err.retryAfter : 0;
        delay = Math.max(reconnect, backoff(errs, this.#retry.minBackoff, o.maxBackoff ?? 30000, ra));
      }
      await sleep(delay, o.signal);
    }
  }

  /** The EventSource path of stream; true when it reached the terminal state. */
  async *#eventSource(
    id: string,
    s: { lastId: string; last: AsyncRequest | undefined },
    signal: AbortSignal | undefined,
  ): AsyncGenerator<AsyncRequest, boolean, undefined> {
    if (signal?.aborted) throw signal.reason;
    const es = new EventSource(`${this.#base}${path(id, "/stream")}?poll_token=${encodeURIComponent(this.#pollToken ?? "")}`);
    const queue: (MessageEvent | null)[] = [];
    let wake = () => {};
    const push = (m: MessageEvent | null) => {
      queue.push(m);
      wake();
    };
    const end = () => push(null);
    es.addEventListener("request", push as (e: Event) => void);
    // CONNECTING after an error: EventSource reconnects by itself with Last-Event-ID.
    es.onerror = () => es.readyState === EventSource.CLOSED && end();
    signal?.addEventListener("abort", end);
    try {
      for (;;) {
        while (!queue.length) await new Promise<void>((r) => (wake = r));
        const m = queue.shift();
        if (!m) {
          if (signal?.aborted) throw signal.reason;
          return false;
        }
        s.lastId = m.lastEventId;
        const r = JSON.parse(m.data) as AsyncRequest;
        if (!s.last || r.version > s.last.version) yield (s.last = r);
        if (r.done) return true;
      }
    } finally {
      es.close();
      signal?.removeEventListener("abort", end);
    }
  }

  /** One page of the tenant's requests, newest first (GET /v1/requests, read scope; API keys only). */
  listPage(o: ListOptions = {}): Promise<Page> {
    const query: Query = {
      type: o.type,
      status: Array.isArray(o.status) ? o.status.join(",") : o.status,
      created_after: isoOf(o.createdAfter),
      created_before: isoOf(o.createdBefore),
      limit: o.limit ? String(o.limit) : undefined,
      cursor: o.cursor,
      label_selector: selector(o.labels),
    };
    return this.#json("GET", "/v1/requests", { query, signal: o.signal });
  }

  /**
   * The visible ones among up to 100 requests, in one call, newest first
   * (GET /v1/requests?ids=, read scope): an id the caller may not see is absent.
   */
  async lookup(ids: string[], o: CallOptions = {}): Promise<AsyncRequest[]> {
    const query: Query = { ids: ids.join(",") };
    return (await this.#json<Page>("GET", "/v1/requests", { ...o, query })).items;
  }

  /** Exact counts of the tenant's requests by status (GET /v1/requests/counts, read scope). */
  counts(o: CountOptions = {}): Promise<Counts> {
    const query: Query = {
      type: o.type,
      label_selector: selector(o.labels),
      created_after: isoOf(o.createdAfter),
      created_before: isoOf(o.createdBefore),
    };
    return this.#json("GET", "/v1/requests/counts", { query, signal: o.signal });
  }

  /** The pages of a listing, following the cursors, as an async iterator. */
  async *pages(o: ListOptions = {}): AsyncGenerator<Page, void, undefined> {
    for (;;) {
      const p = await this.listPage(o);
      yield p;
      if (!p.next_cursor) return;
      o = { ...o, cursor: p.next_cursor };
    }
  }

  /** Every request of a listing, page after page, as an async iterator. */
  async *list(o: ListOptions = {}): AsyncGenerator<AsyncRequest, void, undefined> {
    for await (const p of this.pages(o)) yield* p.items;
  }

  /** A request's status changes, oldest first (read scope or its poll token). */
  async events(id: string, o: CallOptions = {}): Promise<RequestEvent[]> {
    return (await this.#json<{ items: RequestEvent[] }>("GET", path(id, "/events"), o)).items;
  }

  /**
   * Moves a queued request to processing or, when processing, records a
   * heartbeat with optional progress (write scope). A processing request that
   * goes lifecycle.processing_timeout (15 min by default) without one fails
   * with ERR_JOB_EXECUTION_TIMED_OUT.
   */
  async markProcessing(id: string, progress?: Progress, o: CallOptions = {}): Promise<AsyncRequest> {
    return this.#json("POST", path(id, "/processing"), { ...o, body: progress });
  }

  /** markProcessing under the name a running job calls it by. */
  heartbeat(id: string, progress?: Progress, o: CallOptions = {}): Promise<AsyncRequest> {
    return this.markProcessing(id, progress, o);
  }

  /**
   * Records a queued or processing request as succeeded with its result. On a
   * terminal request it rejects with ASYNC_REQUEST_ALREADY_TERMINAL, whose
   * `request` is the request as it is.
   */
  async complete(id: string, result: Result, o: CallOptions = {}): Promise<AsyncRequest> {
    return this.#json("POST", path(id, "/complete"), { ...o, body: result });
  }

  /** Records a queued or processing request as failed; code matches `^[A-Z][A-Z0-9_]{0,63}$`. */
  async fail(id: string, code: string, reason?: string, o: CallOptions = {}): Promise<AsyncRequest> {
    return this.#json("POST", path(id, "/fail"), { ...o, body: { code, reason } });
  }

  /** Records a queued or processing request as cancelled. */
  async cancel(id: string, reason?: string, o: CallOptions = {}): Promise<AsyncRequest> {
    return this.#json("POST", path(id, "/cancel"), { ...o, body: reason ? { reason } : undefined });
  }

  /** Removes a request and its history (admin scope). Not retried: a retry after a lost answer would say NOT_FOUND. */
  async delete(id: string, o: Omit<CallOptions, "idempotencyKey"> = {}): Promise<void> {
    await this.#do("DELETE", path(id), o);
  }
}

/** /v1/requests/{id}[suffix], the id escaped. */
function path(id: string, suffix = ""): string {
  if (!id) throw new TypeError("asyncstatus: empty request id");
  return "/v1/requests/" + encodeURIComponent(id) + suffix;
}

