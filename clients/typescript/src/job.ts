import type { Client } from "./client.js";
import { isProblem } from "./errors.js";
import type { AsyncRequest, Progress, Result } from "./types.js";

/** Thrown by a job function to fail its request with this code (`^[A-Z][A-Z0-9_]{0,63}$`). */
export class JobFailure extends Error {
  constructor(
    readonly code: string,
    readonly reason = "",
  ) {
    super(reason ? `${code}: ${reason}` : code);
    this.name = "JobFailure";
  }
}

/** What a job function is given. */
export interface JobContext {
  /** Aborted when runJob's signal is, and when the request became terminal meanwhile (cancelled, timed out): stop then. */
  signal: AbortSignal;
  /** Records progress (percent 0..100, message at most 256 characters); sent soon, coalesced with later reports. */
  report(percent: number, message?: string): void;
}

/**
 * The work of one request: resolves with its result (nothing means
 * `{result_type: "confirmation", result: {confirmed: true}}`) or throws.
 */
export type JobFunction = (job: JobContext) => Promise<Result | void> | Result | void;

/** Options of runJob. Durations in milliseconds. */
export interface JobOptions {
  /** Ends the job on this side: nothing more is sent (the request stays processing, for a retry or the processing timeout). */
  signal?: AbortSignal;
  /** The service's lifecycle.processing_timeout for this type. default: 900000 (15 min, the service's default). */
  processingTimeout?: number;
  /** Time between heartbeats. default: a quarter of processingTimeout, at most 60000. */
  heartbeatInterval?: number;
  /** Least time between two progress reports sent. default: 1000. */
  progressInterval?: number;
  /** Failure code of a thrown error that is not a JobFailure. default: "ERR_JOB_FAILED". */
  failCode?: string;
  /** Receives the errors of heartbeats; the job goes on (a failed heartbeat is retried at the next). default: none. */
  onError?: (err: unknown) => void;
}

/** What runJob resolves with: the request's final state, and the job's error when it failed it. */
export interface JobOutcome {
  request: AsyncRequest;
  error?: unknown;
}

/** s cut to at most n characters (the service counts code points). */
const cut = (s: string, n: number) => {
  const a = [...s];
  return a.length <= n ? s : a.slice(0, n - 3).join("") + "...";
};

/**
 * Runs fn as the work of request id: marks it processing, sends heartbeats
 * (with the progress fn reports) while fn runs, then completes the request
 * with fn's result, or fails it when fn throws: a JobFailure with its code,
 * anything else with failCode and the error's message. Every call carries its
 * own Idempotency-Key, so retries are safe.
 *
 * When the request is terminal already, or becomes so while fn runs (a user
 * cancelled it: the next heartbeat sees it and aborts fn's signal), runJob
 * rejects with ASYNC_REQUEST_ALREADY_TERMINAL, whose `request` is the request
 * as it is. When its own signal aborts, it rejects with the signal's reason
 * and sends nothing more.
 */
export async function runJob(client: Client, id: string, fn: JobFunction, o: JobOptions = {}): Promise<JobOutcome> {
  const outer = o.signal;
  await client.markProcessing(id, undefined, { signal: outer });
  const work = new AbortController();
  const stop = () => work.abort(outer?.reason);
  outer?.addEventListener("abort", stop);
  const interval = o.heartbeatInterval ?? Math.min(60000, (o.processingTimeout ?? 900000) / 4);
  const progressInterval = o.progressInterval ?? 1000;
  let pending: Progress | undefined;
  let terminal: unknown;
  let lastSent = Date.now();
  let progressTimer: ReturnType<typeof setTimeout> | undefined;
  let inflight: Promise<void> = Promise.resolve();
  const send = () => {
    if (work.signal.aborted) return;
    const progress = pending;
    pending = undefined;
    lastSent = Date.now();
    inflight = inflight.then(() =>
      client.heartbeat(id, progress, { signal: work.signal }).then(
        () => {},
        (e) => {
          if (isProblem(e, "ASYNC_REQUEST_ALREADY_TERMINAL")) {
            terminal = e;
            work.abort(e);
          } else if (!work.signal.aborted) o.onError?.(e);
        },
      ),
    );
  };
  const beat = setInterval(send, interval);
  const report = (percent: number, message?: string) => {
    pending = { percent: Math.round(Math.min(Math.max(percent, 0), 100)), message };
    progressTimer ??= setTimeout(
      () => {
        progressTimer = undefined;
        send();
      },
      Math.max(0, progressInterval - (Date.now() - lastSent)),
    );
  };
  let result: Result | void = undefined;
  let error: unknown;
  let threw = false;
  try {
    result = await fn({ signal: work.signal, report });
  } catch (e) {
    error = e;
    threw = true;
  } finally {
    clearInterval(beat);
    clearTimeout(progressTimer);
    outer?.removeEventListener("abort", stop);
    // A heartbeat still on its way may be the one that finds the request cancelled.
    await inflight;
  }
  // The last progress reported goes out before the outcome.
  if (!threw && pending && !work.signal.aborted) send(), await inflight;
  if (terminal) throw terminal;
  if (outer?.aborted) throw outer.reason;
  work.abort();
  if (!threw) {
    const r = result || { result_type: "confirmation", result: { confirmed: true } };
    return { request: await client.complete(id, r, { signal: outer }) };
  }
  const e: unknown = error;
  const [code, reason] =
    e instanceof JobFailure
      ? [e.code, e.reason]
      : [o.failCode ?? "ERR_JOB_FAILED", e instanceof Error ? e.message : String(e)];
  return { request: await client.fail(id, code, cut(reason, 1024), { signal: outer }), error };
}
