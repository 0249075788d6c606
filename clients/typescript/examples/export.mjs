// A backend creates a request, a worker runs it, a client follows it to its end.
import { Client, JobFailure, runJob } from "@asyncstatus/client";

const baseUrl = process.env.ASYNCSTATUS_URL ?? "http://127.0.0.1:8080";
const api = new Client({ baseUrl, apiKey: process.env.ASYNCSTATUS_API_KEY });

// The backend: create the request (retried safely: one Idempotency-Key per call),
// then hand created.id and created.poll_token to whoever waits.
const created = await api.create({ type: "statement.export", context: { account: "acc_881204" } });

// The worker: runJob marks it processing, sends heartbeats and progress while the
// function runs, then completes it with the result. A thrown JobFailure fails it
// with its code (any other error: ERR_JOB_FAILED); a cancel aborts `signal`.
const worker = runJob(api, created.id, async ({ report, signal }) => {
  for (let page = 1; page <= 4; page++) {
    if (signal.aborted) throw new JobFailure("ERR_STOPPED", "the request was cancelled");
    await new Promise((r) => setTimeout(r, 500)); // render a page
    report(page * 25, `page ${page} of 4`);
  }
  const expires_at = new Date(Date.now() + 24 * 3600e3).toISOString();
  return { result_type: "link", result: { url: "https://files.example/statement.pdf", expires_at } };
});

// The client holds only the poll token. wait() long-polls (Prefer: wait), and where
// no long poll is held it polls when Retry-After says, never sooner.
const poller = new Client({ baseUrl, pollToken: created.poll_token });
const final = await poller.wait(created.id, {
  retryAfter: created.retryAfter,
  onChange: (r) => console.log("seen:", r.status, r.progress?.message ?? ""),
});
await worker;
console.log("final:", final.status, final.result?.url);
