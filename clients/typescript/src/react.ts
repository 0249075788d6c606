import { useEffect, useState } from "react";
import { Client } from "./client.js";
import type { AsyncRequest } from "./types.js";

/** Options of useRequest. */
export interface UseRequestOptions {
  /** The request's poll token (the create answer's `poll_token`). */
  pollToken?: string;
  /** An API key with read scope, instead of a poll token (headers: the stream goes over fetch). */
  apiKey?: string;
  /**
   * "stream": the event stream (EventSource with `?poll_token=` when only a
   * token is held); "poll": long polls (`Prefer: wait`), paced polls where the
   * service does not hold them. default: "stream".
   */
  transport?: "stream" | "poll";
}

/** What useRequest returns. */
export interface RequestView {
  /** The latest state seen; undefined before the first. */
  state: AsyncRequest | undefined;
  /** Why following the request stopped (an AsyncStatusError: NOT_FOUND, UNAUTHENTICATED, ...). */
  error: unknown;
  /** The request is terminal: state is its final state. */
  done: boolean;
}

/**
 * Follows one request, given its absolute URL (the create answer's
 * `Location`, `created.location`), and re-renders with each new state. The
 * stream (or long poll) closes when the component unmounts or the URL or
 * credential changes. A null or empty URL follows nothing.
 */
export function useRequest(url: string | null | undefined, o: UseRequestOptions = {}): RequestView {
  const [view, setView] = useState<RequestView>({ state: undefined, error: undefined, done: false });
  const { pollToken, apiKey, transport } = o;
  useEffect(() => {
    setView({ state: undefined, error: undefined, done: false });
    if (!url) return;
    const m = /^(https?:\/\/.+?)\/v1\/requests\/([^/?#]+)\/?$/.exec(url);
    if (!m) {
      setView({ state: undefined, error: new TypeError(`useRequest: not a request URL: ${url}`), done: false });
      return;
    }
    const ac = new AbortController();
    const client = new Client({ baseUrl: m[1]!, pollToken, apiKey });
    const id = decodeURIComponent(m[2]!);
    const show = (r: AsyncRequest) => setView({ state: r, error: undefined, done: r.done });
    (async () => {
      if (transport === "poll") await client.wait(id, { onChange: show, signal: ac.signal });
      else for await (const r of client.stream(id, { signal: ac.signal })) show(r);
    })().catch((error) => ac.signal.aborted || setView((v) => ({ ...v, error })));
    return () => ac.abort();
  }, [url, pollToken, apiKey, transport]);
  return view;
}
