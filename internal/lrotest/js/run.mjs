// The test's driver (internal/lrotest/js_test.go): runs createAndWait and
// prints its outcome as one JSON line.
import { createAndWait } from "./create-and-wait.mjs";

const [baseUrl, apiKey, type] = process.argv.slice(2);
try {
  const request = await createAndWait(baseUrl, apiKey, type);
  console.log(JSON.stringify({ ok: true, request }));
} catch (err) {
  console.log(JSON.stringify({ ok: false, error: String(err?.message ?? err) }));
}
