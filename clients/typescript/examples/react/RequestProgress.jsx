// A React component that follows one request and shows each state it goes through.
import { useEffect, useState } from "react";
import { AsyncStatusError } from "@asyncstatus/client";
import { useRequest } from "@asyncstatus/client/react";

/**
 * url: the create answer's Location (created.location); options: { pollToken } (its
 * poll_token) or { apiKey }, and transport: "stream" (the default) or "poll" (long polls).
 * @param {{url: string} & import("@asyncstatus/client/react").UseRequestOptions} props
 */
export function RequestProgress({ url, ...options }) {
  const { state, error, done } = useRequest(url, options);
  const [seen, setSeen] = useState(/** @type {import("@asyncstatus/client").AsyncRequest[]} */ ([]));
  useEffect(() => {
    if (state) setSeen((s) => [...s, state]);
  }, [state]);
  return (
    <section aria-busy={!done}>
      <ol>
        {seen.map((r) => (
          <li key={r.version}>
            {r.status}
            {r.progress?.percent != null ? ` ${r.progress.percent}%` : ""}
          </li>
        ))}
      </ol>
      {done && state?.result_type === "link" && <a href={state.result?.url}>Download</a>}
      {done && state?.failure && <p role="status">{state.failure.code}</p>}
      {error ? <p role="alert">{error instanceof AsyncStatusError ? error.code : String(error)}</p> : null}
    </section>
  );
}
