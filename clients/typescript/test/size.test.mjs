// The core's size as a browser app ships it: bundled, minified, gzipped.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const pkg = fileURLToPath(new URL("..", import.meta.url));
const LIMIT = 6 * 1024;

async function gzipped(entry, external = []) {
  const out = await build({ entryPoints: [pkg + entry], bundle: true, minify: true, format: "esm", write: false, external, logLevel: "silent" });
  const js = out.outputFiles[0].contents;
  return { min: js.length, gz: gzipSync(js, { level: 9 }).length, text: Buffer.from(js).toString() };
}

test(`core (every export of @asyncstatus/client), minified and gzipped, is at most ${LIMIT} bytes`, async () => {
  const core = await gzipped("dist/index.js");
  const react = await gzipped("dist/react.js", ["react"]);
  console.log(`size: core ${core.min} bytes minified, ${core.gz} bytes gzipped (limit ${LIMIT}); ` +
    `the react hook with what it uses of the core ${react.min} minified, ${react.gz} gzipped (react itself not bundled)`);
  assert.ok(core.gz <= LIMIT, `core is ${core.gz} bytes gzipped`);
  assert.match(react.text, /from"react"/, "react stays an import of the app's own copy");
});
