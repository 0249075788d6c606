// Follow a request over its event stream, list requests, tell errors apart by code.
import { AsyncStatusError, Client } from "@asyncstatus/client";

const api = new Client({
  baseUrl: process.env.ASYNCSTATUS_URL ?? "http://127.0.0.1:8080",
  apiKey: process.env.ASYNCSTATUS_API_KEY,
});
const created = await api.create({ type: "report.build" });

// One state per change until the terminal one; a cut stream resumes by itself
// with Last-Event-ID. (Here the loop moves the request on itself; a worker would.)
for await (const r of api.stream(created.id)) {
  console.log("stream:", r.version, r.status);
  if (r.status === "queued") await api.markProcessing(created.id, { percent: 50 });
  if (r.status === "processing") await api.complete(created.id, { result_type: "answer", result: { rows: 42 } });
}

// Every request of a type created in the last hour, newest first, page after page.
for await (const r of api.list({ type: "report.build", createdAfter: new Date(Date.now() - 3600e3), limit: 50 })) {
  console.log("listed:", r.id === created.id ? "this one" : "another", r.status, JSON.stringify(r.result));
  break;
}

// Every error answer is an AsyncStatusError carrying the problem's members.
try {
  await api.complete(created.id, { result_type: "confirmation", result: { confirmed: true } });
} catch (err) {
  if (!(err instanceof AsyncStatusError) || err.code !== "ASYNC_REQUEST_ALREADY_TERMINAL") throw err;
  console.log("refused:", err.status, err.code, "- it is", err.request?.status);
}
