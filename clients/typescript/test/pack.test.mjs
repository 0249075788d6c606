// `npm pack` gives a tarball a user installs: it installs into a fresh folder
// with no dependency, imports in Node, and its types compile (and refuse a
// wrong call) with tsc.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const pkg = fileURLToPath(new URL("..", import.meta.url));
const tsc = join(pkg, "node_modules/.bin/tsc");

test("npm pack installs into a fresh folder, imports, and carries its types", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "asyncstatus-pack-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", dir], { cwd: pkg });
  const [packed] = JSON.parse(stdout);
  const files = packed.files.map((f) => f.path).sort();
  assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts") && files.includes("dist/react.d.ts"), files.join(" "));
  assert.deepEqual(files.filter((f) => !f.startsWith("dist/")), ["README.md", "package.json"]);

  const app = join(dir, "app");
  await run("mkdir", ["-p", app]);
  await writeFile(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", join(dir, packed.filename)], { cwd: app });
  assert.deepEqual((await readdir(join(app, "node_modules"))).filter((f) => !f.startsWith(".")), ["@asyncstatus"], "no runtime dependency came along");

  const { stdout: names } = await run("node", ["-e", "import('@asyncstatus/client').then(m => console.log(Object.keys(m).sort().join(' ')))"], { cwd: app });
  assert.equal(names.trim(), "AsyncStatusError Client JobFailure isProblem runJob");

  await writeFile(
    join(app, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { strict: true, module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", lib: ["ES2022", "DOM"], types: [], noEmit: true } }),
  );
  await writeFile(
    join(app, "main.ts"),
    `import { AsyncStatusError, Client, type AsyncRequest, type Created } from "@asyncstatus/client";
const c = new Client({ baseUrl: "http://127.0.0.1:8080", apiKey: "k" });
export async function go(): Promise<string> {
  const created: Created = await c.create({ type: "statement.export" });
  const r: AsyncRequest = await c.wait(created.id, { retryAfter: created.retryAfter });
  try { await c.get(r.id); } catch (e) { if (e instanceof AsyncStatusError && e.code === "NOT_FOUND") return "gone"; }
  return r.status;
}
`,
  );
  await run(tsc, ["-p", "."], { cwd: app });
  await writeFile(join(app, "wrong.ts"), `import { Client } from "@asyncstatus/client";\nnew Client({ baseUrl: "http://x" }).wait(42);\n`);
  const wrong = await run(tsc, ["-p", "."], { cwd: app }).catch((e) => e);
  assert.match(String(wrong.stdout), /wrong\.ts.*TS2345/, "the types refuse a number for a request id");
});
