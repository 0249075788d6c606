/**
 * The asyncstatus client for browsers and Node (docs/reference.md): create
 * requests and drive their transitions, follow them by long poll or event
 * stream, list them, and run a request's work with heartbeats (runJob).
 * No runtime dependencies: fetch, AbortSignal and, in browsers, EventSource.
 */
export { Client } from "./client.js";
export type {
  CallOptions,
  ClientOptions,
  CountOptions,
  CreateParams,
  ListOptions,
  PollOptions,
  PollResult,
  RetryPolicy,
  StreamOptions,
  WaitOptions,
  WatchEvent,
  WatchOptions,
} from "./client.js";
export { AsyncStatusError, isProblem } from "./errors.js";
export type { FieldError, ProblemCode } from "./errors.js";
export { JobFailure, runJob } from "./job.js";
export type { JobContext, JobFunction, JobOptions, JobOutcome } from "./job.js";
export type {
  AsyncRequest,
  ConfirmationResult,
  Counts,
  Created,
  Failure,
  LinkResult,
  Page,
  Progress,
  RequestEvent,
  Result,
  Status,
} from "./types.js";
