/** A request's status; the last four are terminal (`done` is then true). */
export type Status = "queued" | "processing" | "succeeded" | "failed" | "cancelled" | "expired";

/** A processing request's progress; either member may be absent. */
export interface Progress {
  /** 0..100. */
  percent?: number;
  /** At most 256 characters. */
  message?: string;
}

/** Why a request failed or expired. */
export interface Failure {
  /** `^[A-Z][A-Z0-9_]{0,63}$`; `ERR_JOB_EXECUTION_TIMED_OUT` and `REQUEST_EXPIRED` are the service's own. */
  code: string;
  /** At most 1024 characters. */
  reason?: string;
}

/** A "link" result: where to fetch the output. */
export interface LinkResult {
  /** Absolute http(s), at most 2048 characters. */
  url: string;
  /** RFC 3339: when the link stops working. */
  expires_at: string;
  checksum_sha256?: string;
  size_bytes?: number;
  content_type?: string;
}

/** A "confirmation" result: the work was, or was not, done. */
export interface ConfirmationResult {
  confirmed: boolean;
  message?: string;
}

/** What `complete` records (docs/reference.md §4, Transitions). */
export type Result =
  | { result_type: "link"; result: LinkResult }
  | { result_type: "confirmation"; result: ConfirmationResult }
  | { result_type: "answer"; result: Record<string, unknown> };

/**
 * The representation of one request (docs/reference.md §3), exactly as the
 * service sends it: member names in snake_case, times as RFC 3339 strings.
 */
export interface AsyncRequest {
  id: string;
  type: string;
  status: Status;
  /** True exactly when `status` is terminal. */
  done: boolean;
  progress?: Progress | null;
  context?: Record<string, unknown> | null;
  labels?: Record<string, string>;
  /** Set when succeeded: "link", "confirmation" or "answer". */
  result_type?: Result["result_type"] | null;
  /** By result_type: a LinkResult, a ConfirmationResult or the answer's own object. */
  result?: Record<string, any> | null;
  /** Set when failed or expired. */
  failure?: Failure | null;
  /** Set when cancelled with a reason. */
  cancellation?: { reason?: string } | null;
  /** The public id of the API key that created the request. */
  created_by: string;
  created_at: string;
  updated_at: string;
  completed_at: string | null;
  /** When retention deletes the record (terminal only; null if kept forever). */
  expires_at: string | null;
  /** Starts at 1, grows with every accepted transition and heartbeat. */
  version: number;
}

/** The answer to `create`. */
export interface Created extends AsyncRequest {
  /** Lets whoever holds it read this one request: hand it to the client that waits. */
  poll_token: string;
  /** The absolute URL of the request (the answer's `Location`): what `useRequest` takes. */
  location: string;
  /** The answer's Retry-After in milliseconds: pass it to `wait` as `retryAfter`. */
  retryAfter: number;
}

/** One status change of a request. */
export interface RequestEvent {
  seq: number;
  at: string;
  /** null for the creation. */
  from: Status | null;
  to: Status;
  /** The key id that made the change, or "system" for timeouts. */
  by: string;
}

/** Counts of requests by status (GET /v1/requests/counts). */
export type Counts = Record<Status, number>;

/** One page of a listing. */
export interface Page {
  items: AsyncRequest[];
  /** Continues the listing; null on the last page. */
  next_cursor: string | null;
}
