// The React hook in real Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): a page on a second origin, bundled by esbuild from
// examples/react/RequestProgress.jsx, follows a request made through the API
// and shows each state; the service allows the page's origin (CORS).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import http from "node:http";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import { Client } from "@asyncstatus/client";
import { eventually, metric, startService } from "./helpers.mjs";

const pkg = fileURLToPath(new URL("..", import.meta.url));
const CHROMIUM = "/usr/bin/chromium";
const link = { url: "https://files.example/x.pdf", expires_at: "2030-01-01T00:00:00Z" };

/** The page's script: test/browser/main.jsx with React and the package, as a user's bundler makes it. */
async function bundle() {
  const self = {
    name: "asyncstatus-client",
    setup(b) {
      b.onResolve({ filter: /^@asyncstatus\/client(\/react)?$/ }, (a) => ({
        path: pkg + (a.path.endsWith("/react") ? "dist/react.js" : "dist/index.js"),
      }));
    },
  };
  const out = await build({
    entryPoints: [pkg + "test/browser/main.jsx"],
    bundle: true,
    format: "esm",
    jsx: "automatic",
    minify: true,
    write: false,
    define: { "process.env.NODE_ENV": '"production"' },
    plugins: [self],
    logLevel: "silent",
  });
  return out.outputFiles[0].text;
}

describe("useRequest in Chromium, from another origin", () => {
  let pageServer, origin, svc, api, browser;

  before(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run \`make deps\` (apt-get install chromium)`);
    const js = await bundle();
    pageServer = http.createServer((req, res) => {
      if (req.url === "/app.js") {
        res.writeHead(200, { "content-type": "text/javascript" });
        return res.end(js);
      }
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end('<!doctype html><meta charset="utf-8"><title>export</title><div id="root"></div><script type="module" src="/app.js"></script>');
    });
    await new Promise((r) => pageServer.listen(0, "127.0.0.1", r));
    origin = `http://127.0.0.1:${pageServer.address().port}`;
    svc = await startService({
      // A client that leaves is noticed within one heartbeat.
      env: { ASYNCSTATUS_HTTP_CORS_ALLOWED_ORIGINS: origin, ASYNCSTATUS_WAIT_HEARTBEAT: "300ms" },
    });
    api = new Client({ baseUrl: svc.url, apiKey: svc.key });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    });
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
    await new Promise((r) => (pageServer ? pageServer.close(r) : r()));
  });

  /** Opens the page on a request; records what it asks the API and what goes wrong in it. */
  async function open(created, transport, credential = { token: created.poll_token }) {
    const page = await browser.newPage();
    const calls = [];
    const problems = [];
    page.on("request", (q) => q.url().startsWith(svc.url) && calls.push({ url: q.url(), type: q.resourceType(), headers: q.headers() }));
    page.on("pageerror", (e) => problems.push(String(e)));
    page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
    const hash = new URLSearchParams({ url: created.location, transport, ...credential });
    await page.goto(`${origin}/#${hash}`);
    return { page, calls, problems };
  }

  for (const transport of ["stream", "poll"]) {
    test(`${transport}: the page shows every state, then the result`, async () => {
      const created = await api.create({ type: "export.browser" });
      const { page, calls } = await open(created, transport);
      const items = page.locator("li");
      await items.first().waitFor();
      assert.deepEqual(await items.allTextContents(), ["queued"]);
      await api.markProcessing(created.id, { percent: 40, message: "page 4 of 10" });
      await page.getByText("processing 40%").waitFor();
      await api.complete(created.id, { result_type: "link", result: link });
      await page.locator('section[aria-busy="false"]').waitFor();

      assert.deepEqual(await items.allTextContents(), ["queued", "processing 40%", "succeeded 40%"]);
      assert.equal(await page.getByRole("link", { name: "Download" }).getAttribute("href"), link.url);
      assert.equal(await page.getByRole("alert").count(), 0);
      if (transport === "stream") {
        const es = calls.filter((c) => c.type === "eventsource");
        assert.ok(es.length >= 1, JSON.stringify(calls));
        assert.equal(new URL(es[0].url).searchParams.get("poll_token"), created.poll_token);
        assert.ok(!calls.some((c) => c.headers.prefer), "no long poll on the stream path");
      } else {
        const polls = calls.filter((c) => c.type === "fetch" && c.headers.prefer === "wait=25");
        assert.ok(polls.length >= 2, JSON.stringify(calls));
        assert.equal(polls[0].headers["x-poll-token"], created.poll_token);
        assert.ok(!calls.some((c) => c.type === "eventsource"));
      }
      await page.close();
    });

    test(`${transport}: unmounting closes what the hook holds open`, async () => {
      const gauge = transport === "stream" ? "asyncstatus_wait_streams_open" : "asyncstatus_wait_long_polls_held";
      const created = await api.create({ type: "export.browser" });
      const { page } = await open(created, transport);
      await page.locator("li").first().waitFor();
      await eventually(`${gauge} = 1`, async () => (await metric(svc.url, gauge)) === 1);
      await page.getByRole("button", { name: "Stop following" }).click();
      await eventually(`${gauge} = 0 after unmount`, async () => (await metric(svc.url, gauge)) === 0);
      await page.close();
    });
  }

  test("with an API key: the event stream read over fetch, the key in a header", async () => {
    const created = await api.create({ type: "export.browser" });
    const { page, calls } = await open(created, "stream", { key: svc.key });
    const items = page.locator("li");
    await items.first().waitFor();
    await api.cancel(created.id, "not needed");
    await page.locator('section[aria-busy="false"]').waitFor();
    assert.deepEqual(await items.allTextContents(), ["queued", "cancelled"]);
    const streams = calls.filter((c) => new URL(c.url).pathname.endsWith("/stream"));
    assert.ok(streams.length >= 1 && streams.every((c) => c.type === "fetch"), JSON.stringify(calls));
    assert.equal(streams[0].headers.authorization, `Bearer ${svc.key}`);
    assert.equal(new URL(streams[0].url).search, "", "no credential in the URL");
    await page.close();
  });

  test("a wrong poll token shows the problem's code", async () => {
    const created = await api.create({ type: "export.browser" });
    const { page } = await open(created, "stream", { token: "pt_wrong" });
    const alert = page.getByRole("alert");
    await alert.waitFor();
    assert.equal(await alert.textContent(), "NOT_FOUND");
    await page.close();
  });
});
