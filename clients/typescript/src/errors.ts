import type { AsyncRequest } from "./types.js";

/** The problem codes of the service (docs/reference.md §7): an `AsyncStatusError`'s `code`. */
export type ProblemCode =
  | "UNAUTHENTICATED"
  | "FORBIDDEN"
  | "TENANT_FROZEN"
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "VALIDATION_FAILED"
  | "INVALID_CURSOR"
  | "ASYNC_REQUEST_ALREADY_TERMINAL"
  | "PAYLOAD_TOO_LARGE"
  | "UNSUPPORTED_MEDIA_TYPE"
  | "IDEMPOTENCY_KEY_REUSED"
  | "POLLED_TOO_EARLY"
  | "RATE_LIMITED"
  | "BACKEND_UNAVAILABLE";

/** One invalid input field of a VALIDATION_FAILED problem. */
export interface FieldError {
  field: string;
  message: string;
}

/**
 * Every answer of the service that is not a success: an RFC 9457 problem.
 * Tell them apart by `code`. An answer that is not problem+json (a proxy's
 * 502 page) has the HTTP status, an empty `code` and the start of the body as
 * `detail`.
 */
export class AsyncStatusError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The problem's stable code: a ProblemCode ("" when the answer was not a problem). */
  readonly code: ProblemCode | (string & {});
  readonly title: string;
  readonly detail: string;
  readonly type: string;
  readonly instance: string;
  /** Identifies the call in the service's logs (not a request's id). */
  readonly requestId: string;
  /** What was wrong with the input (VALIDATION_FAILED). */
  readonly errors: FieldError[];
  /** The request as it is now (ASYNC_REQUEST_ALREADY_TERMINAL). */
  readonly request: AsyncRequest | undefined;
  /** The answer's Retry-After in milliseconds (429, 503), undefined when absent. */
  readonly retryAfter: number | undefined;

  constructor(status: number, problem: Record<string, any>, retryAfter?: number) {
    const code = typeof problem.code === "string" ? problem.code : "";
    const detail = String(problem.detail ?? "");
    super(`asyncstatus: ${status}${code && " " + code}${detail && ": " + detail}`);
    this.name = "AsyncStatusError";
    this.status = status;
    this.code = code;
    this.title = String(problem.title ?? "");
    this.detail = detail;
    this.type = String(problem.type ?? "");
    this.instance = String(problem.instance ?? "");
    this.requestId = String(problem.request_id ?? "");
    this.errors = Array.isArray(problem.errors) ? problem.errors : [];
    this.request = problem.request ?? undefined;
    this.retryAfter = retryAfter;
  }
}

/** Whether err is an AsyncStatusError with this code. */
export const isProblem = (err: unknown, code: ProblemCode): err is AsyncStatusError =>
  err instanceof AsyncStatusError && err.code === code;
