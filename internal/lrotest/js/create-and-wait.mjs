// Create a request and let @azure/core-lro follow its status monitor (the
// answer's Operation-Location) to its end.
import { createHttpPoller } from "@azure/core-lro";

// send makes one call with the API key and shapes its answer for core-lro.
async function send(method, url, apiKey, body) {
  const headers = { authorization: `Bearer ${apiKey}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const parsed = text ? JSON.parse(text) : undefined;
  return {
    flatResponse: parsed,
    rawResponse: { statusCode: res.status, headers: Object.fromEntries(res.headers), request: { method, url }, body: parsed },
  };
}

// createAndWait resolves to the request when it succeeded, and rejects when
// it failed, expired or was cancelled.
export async function createAndWait(baseUrl, apiKey, type) {
  const poller = createHttpPoller(
    {
      sendInitialRequest: () => send("POST", `${baseUrl}/v1/requests`, apiKey, { type }),
      sendPollRequest: (path) => send("GET", path, apiKey),
    },
    { intervalInMs: 1000 }, // used only when an answer has no Retry-After; ours have
  );
  return poller.pollUntilDone();
}
