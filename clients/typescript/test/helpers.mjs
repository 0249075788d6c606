// Test helpers: a real `asyncstatus serve` (embedded store or a redis-server
// of its own on a free loopback port), and a proxy in front of it that logs
// every call and can strip headers, answer in the service's place or cut a
// stream. Nothing here skips: a missing binary or server fails the test with
// a message saying what to do.
import { spawn, execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { promisify } from "node:util";

const execFileP = promisify(execFile);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The asyncstatus binary the tests run (built by `make test-typescript`). */
export function binary() {
  const bin = process.env.ASYNCSTATUS_BIN;
  if (!bin || !existsSync(bin)) {
    throw new Error(
      `ASYNCSTATUS_BIN=${bin ?? ""} is not an asyncstatus binary: run the tests with \`make test-typescript\`, ` +
        "or build one (go build -o /tmp/asyncstatus ./cmd/asyncstatus) and set ASYNCSTATUS_BIN",
    );
  }
  return bin;
}

/** A loopback port that was free a moment ago. */
export async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

const children = new Set();
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

/**
 * The environment of a child: this process's without its ASYNCSTATUS_*
 * variables (ASYNCSTATUS_BIN, CI's ASYNCSTATUS_TEST_*: serve refuses
 * variables that name no configuration key), plus env.
 */
const childEnv = (env) => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ASYNCSTATUS_"))),
  ...env,
});

function launch(cmd, args, env) {
  const child = spawn(cmd, args, { env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let out = "";
  let err = "";
  child.stdout.on("data", (b) => (out += b));
  child.stderr.on("data", (b) => (err += b));
  child.exited = new Promise((r) => child.on("exit", (code, sig) => (children.delete(child), r(code ?? sig))));
  child.output = () => out;
  child.errors = () => err;
  child.stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    const t = setTimeout(() => child.kill("SIGKILL"), 5000);
    await child.exited;
    clearTimeout(t);
  };
  return child;
}

async function until(what, fn, ms = 15000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** A redis-server of the test's own, without persistence. */
export async function startRedis() {
  if (!existsSync("/usr/bin/redis-server") && !process.env.PATH.split(":").some((d) => existsSync(d + "/redis-server"))) {
    throw new Error("redis-server is missing: run `make deps` (apt-get install redis-server)");
  }
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const child = launch("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {});
    const ok = await until(`redis-server on ${port}`, async () => {
      if (child.exitCode !== null) return "exited";
      return (await ping(port)) ? "up" : undefined;
    }).catch(() => "timeout");
    if (ok === "up") return { url: `redis://127.0.0.1:${port}`, port, stop: child.stop };
    await child.stop();
    if (attempt >= 3) throw new Error(`redis-server did not start: ${child.output()}${child.errors()}`);
  }
}

function ping(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => resolve(false));
    s.on("data", (b) => (s.destroy(), resolve(b.toString().startsWith("+PONG"))));
    s.write("PING\r\n");
  });
}

/**
 * Starts `asyncstatus serve` on a free loopback port: on the embedded store
 * (its demo key, tenant demo) or, with redisUrl, on that Redis (a key made by
 * `asyncstatus keys create` for a tenant of its own). env adds configuration.
 */
export async function startService({ redisUrl, env = {} } = {}) {
  const bin = binary();
  const base = {
    ASYNCSTATUS_CONSOLE_ADDR: "off",
    ASYNCSTATUS_LOG_LEVEL: "warn",
    ASYNCSTATUS_AUDIT_SINK: "none",
    ASYNCSTATUS_POLLING_SCHEDULE: "1s",
    ASYNCSTATUS_RATELIMIT_READ: "1000-S",
    ASYNCSTATUS_RATELIMIT_ADMIN: "100-S",
    ...env,
  };
  let tenant = "demo";
  if (redisUrl) {
    tenant = "t" + randomBytes(4).toString("hex");
    Object.assign(base, {
      ASYNCSTATUS_REDIS_URL: redisUrl,
      ASYNCSTATUS_REDIS_KEY_PREFIX: "ts" + randomBytes(3).toString("hex"),
      ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET: randomBytes(32).toString("hex"),
      ASYNCSTATUS_WEBHOOKS_SECRET_KEY: randomBytes(32).toString("hex"),
    });
  }
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const child = launch(bin, ["serve"], { ...base, ASYNCSTATUS_HTTP_ADDR: `127.0.0.1:${port}` });
    const up = await until(`asyncstatus serve on ${port}`, async () => {
      if (child.exitCode !== null) return "exited";
      return (await fetch(url + "/readyz")).ok ? "up" : undefined;
    }).catch(() => "timeout");
    if (up !== "up") {
      await child.stop();
      if (attempt < 3 && /address already in use/i.test(child.errors())) continue;
      throw new Error(`asyncstatus serve did not start (${up}):\n${child.errors().slice(-2000)}`);
    }
    let key;
    if (redisUrl) {
      const { stdout } = await execFileP(bin, ["keys", "create", "--tenant", tenant, "--scopes", "read,write,admin"], {
        env: childEnv(base),
      });
      key = stdout.trim().split("\n").pop().trim();
    } else {
      // The embedded store's banner: the demo key alone on its line.
      key = await until("the demo key on stdout", async () => child.output().match(/^\s*(ask_\S+)\s*$/m)?.[1], 5000).catch(() => undefined);
    }
    if (!key) throw new Error(`no API key for the service:\n${child.output()}`);
    return { url, key, tenant, stop: child.stop, logs: () => child.errors() };
  }
}

/** Reads a gauge's value from the service's /metrics (0 when absent). */
export async function metric(url, name) {
  const text = await (await fetch(url + "/metrics")).text();
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m"));
  return m ? Number(m[1]) : 0;
}

/**
 * A proxy in front of upstream. Every call is logged (method, path, request
 * headers as received, status and answer headers, arrival and answer times).
 * - stripPrefer: drop the Prefer header on its way up (a proxy that does not
 *   know RFC 7240), so the service answers ordinary, paced polls;
 * - inject(match, answer): the next call matching answers `answer` instead
 *   (`forward: true` sends it up first and drops the service's answer, like a
 *   connection lost after the service acted);
 * - cutStream(): the next event stream is cut after its first event.
 */
export async function startProxy(upstream) {
  const up = new URL(upstream);
  const proxy = { log: [], stripPrefer: false, injections: [], cuts: 0, cutDone: undefined };
  proxy.inject = (match, answer) => proxy.injections.push({ match, answer });
  proxy.cutStream = () => {
    proxy.cuts++;
    return new Promise((r) => (proxy.cutDone = r));
  };
  proxy.gets = (p) => proxy.log.filter((e) => e.method === "GET" && (!p || e.path.startsWith(p)));
  const server = http.createServer((req, res) => {
    const entry = { method: req.method, path: req.url, headers: { ...req.headers }, start: Date.now(), closed: false };
    proxy.log.push(entry);
    res.on("close", () => (entry.closed = true));
    const answered = (status, headers) => Object.assign(entry, { status, resHeaders: headers, at: Date.now() });
    const i = proxy.injections.findIndex((j) => j.match(req));
    const inj = i >= 0 ? proxy.injections.splice(i, 1)[0].answer : undefined;
    const headers = { ...req.headers, host: up.host };
    if (proxy.stripPrefer) delete headers.prefer;
    const reply = () => {
      const h = { "content-type": "application/problem+json" };
      if (inj.retryAfter !== undefined) h["retry-after"] = String(inj.retryAfter);
      answered(inj.status, h);
      res.writeHead(inj.status, h);
      res.end(JSON.stringify({ type: "about:blank", title: inj.code, status: inj.status, detail: "injected by the test proxy", code: inj.code }));
    };
    if (inj && !inj.forward) {
      req.resume();
      req.on("end", reply);
      return;
    }
    const upReq = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers }, (upRes) => {
      if (inj) {
        let body = "";
        upRes.on("data", (b) => (body += b));
        upRes.on("end", () => ((entry.dropped = { status: upRes.statusCode, body }), reply()));
        return;
      }
      const isStream = /event-stream/.test(upRes.headers["content-type"] ?? "");
      const cut = isStream && proxy.cuts > 0;
      if (cut) proxy.cuts--;
      answered(upRes.statusCode, upRes.headers);
      res.writeHead(upRes.statusCode, upRes.headers);
      res.flushHeaders();
      upRes.on("data", (b) => {
        res.write(b);
        if (cut && /event: request/.test(b.toString())) {
          // After the first event: the connection breaks, both ways.
          setTimeout(() => {
            res.destroy();
            upReq.destroy();
            proxy.cutDone?.();
          }, 50);
        }
      });
      upRes.on("end", () => res.end());
      upRes.on("error", () => res.destroy());
    });
    upReq.on("error", () => res.destroy());
    res.on("close", () => upReq.destroy());
    req.pipe(upReq);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  proxy.url = `http://127.0.0.1:${server.address().port}`;
  proxy.stop = () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    });
  return proxy;
}

/** Polls fn until it is truthy (a condition the test waits for, not a timing). */
export const eventually = until;
