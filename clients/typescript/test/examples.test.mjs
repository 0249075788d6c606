// The examples are the documentation's code: they run here against a real
// service, and the README and docs/client.md must carry them verbatim.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startService } from "./helpers.mjs";

const run = promisify(execFile);
const pkg = fileURLToPath(new URL("..", import.meta.url));
const examples = ["examples/export.mjs", "examples/stream.mjs", "examples/react/RequestProgress.jsx"];

describe("examples", () => {
  let svc;
  before(async () => {
    svc = await startService();
  });
  after(() => svc?.stop());
  const runExample = async (file) => {
    const { stdout } = await run("node", [file], {
      cwd: pkg,
      env: { ...process.env, ASYNCSTATUS_URL: svc.url, ASYNCSTATUS_API_KEY: svc.key },
    });
    return stdout.trim().split("\n");
  };

  test("examples/export.mjs: created, run by runJob, followed to its end with the poll token", async () => {
    const lines = await runExample("examples/export.mjs");
    assert.equal(lines.at(-1), "final: succeeded https://files.example/statement.pdf");
    const seen = lines.slice(0, -1);
    // The first poll waits the create's Retry-After (1 s); the job takes 2 s.
    assert.ok(seen.length >= 2, lines.join("\n"));
    assert.match(seen[0], /^seen: processing /);
    assert.equal(seen.at(-1), "seen: succeeded page 4 of 4");
  });

  test("examples/stream.mjs: stream, list and an error by code", async () => {
    assert.deepEqual(await runExample("examples/stream.mjs"), [
      "stream: 1 queued",
      "stream: 2 processing",
      "stream: 3 succeeded",
      'listed: this one succeeded {"rows":42}',
      "refused: 409 ASYNC_REQUEST_ALREADY_TERMINAL - it is succeeded",
    ]);
  });

  for (const doc of ["README.md", "../../docs/client.md"]) {
    test(`${doc.replace("../../", "")} carries every example verbatim`, async () => {
      const text = await readFile(pkg + doc, "utf8");
      for (const ex of examples) {
        const code = await readFile(pkg + ex, "utf8");
        assert.ok(text.includes("\n" + code + "```"), `${doc} lacks ${ex} as it is (copy the file into it)`);
      }
    });
  }
});
