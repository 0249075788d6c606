// A React component that follows one request and shows each state it goes through.
import { useEffect, useState } from "react";
import { AsyncStatusError } from "@asyncstatus/client";
import { useRequest } from "@asyncstatus/client/react";

/**
 * @param {{url: string, pollToken: string, transport?: "stream" | "poll"}} props
 * url: the create answer's Location (created.location); pollToken: its poll_token;
 * transport: "stream" (EventSource, the default) or "poll" (long polls).
 */
export function RequestProgress({ url, pollToken, transport }) {
  const { state, error, done } = useRequest(url, { pollToken, transport });
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
