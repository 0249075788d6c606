// The backoff on its own: never shorter than the service's Retry-After,
// jittered, capped (the cap never cuts a Retry-After).
import assert from "node:assert/strict";
import { test } from "node:test";
import { backoff } from "../dist/client.js";

test("backoff doubles within [d/2, d], capped, and never undercuts Retry-After", () => {
  for (let i = 0; i < 2000; i++) {
    const n = 1 + (i % 8);
    const d = Math.min(200 * 2 ** (n - 1), 10000);
    const b = backoff(n, 200, 10000);
    assert.ok(b >= d / 2 && b <= d, `retry ${n}: ${b} not in [${d / 2}, ${d}]`);
    const ra = 1000 * (1 + (i % 40));
    const w = backoff(n, 200, 10000, ra);
    assert.ok(w >= ra, `retry ${n}: ${w} < Retry-After ${ra}`);
    assert.ok(w <= Math.max(d, ra + Math.min(ra / 10, 1000)), `retry ${n}: ${w} more than the jitter allows`);
  }
  const draws = new Set(Array.from({ length: 50 }, () => backoff(3, 200, 10000, 1000)));
  assert.ok(draws.size > 40, "jittered: clients told the same Retry-After do not all come back at once");
});
