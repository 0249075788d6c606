"""What the tests run against: a real `asyncstatus serve` (embedded store or a
redis-server started here), and a small HTTP proxy that can strip headers,
inject answers and cut streams.

ASYNCSTATUS_BIN names the binary (`make test-python` builds it); without it
the binary is built here with `go build`. Nothing is skipped: a missing
redis-server or go fails the tests with a message saying what to install.
"""

from __future__ import annotations

import atexit
import http.client
import http.server
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
REPO_ROOT = os.path.dirname(os.path.dirname(PACKAGE_ROOT))
sys.path.insert(0, os.path.join(PACKAGE_ROOT, "src"))
sys.path.insert(0, os.path.join(PACKAGE_ROOT, "examples"))

# Requests of this type time out after SHORT_TIMEOUT without a heartbeat
# (lifecycle.by_type), so that the job helper's heartbeats can be shown to
# keep one alive past it; every other type keeps the default 15 min.
SHORT_TYPE = "job.short"
SHORT_TIMEOUT = 2.0

CONFIG = """\
lifecycle:
  sweep_interval: 200ms
  by_type:
    %s:
      processing_timeout: %dms
""" % (SHORT_TYPE, int(SHORT_TIMEOUT * 1000))

_tmp = tempfile.mkdtemp(prefix="asyncstatus-pytest-")
# Every process the tests start, stopped at exit even when a test setup failed
# half way (registered before the directory's removal, so it runs first).
_started: List[Any] = []
atexit.register(lambda: shutil.rmtree(_tmp, ignore_errors=True))
atexit.register(lambda: [p.stop() for p in list(_started)])
_bin_lock = threading.Lock()
_bin: Optional[str] = None


def binary() -> str:
    """The asyncstatus binary: $ASYNCSTATUS_BIN, else built from the repository."""
    global _bin
    with _bin_lock:
        if _bin:
            return _bin
        b = os.environ.get("ASYNCSTATUS_BIN")
        if b:
            if not os.access(b, os.X_OK):
                raise RuntimeError("ASYNCSTATUS_BIN=%s is not an executable" % b)
            _bin = b
            return b
        if shutil.which("go") is None:
            raise RuntimeError("set ASYNCSTATUS_BIN to an asyncstatus binary, or put go on PATH to build one")
        out = os.path.join(_tmp, "asyncstatus")
        subprocess.run(["go", "build", "-o", out, "./cmd/asyncstatus"], cwd=REPO_ROOT, check=True)
        _bin = out
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server of the tests' own, on a free loopback port (never 6379)."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is missing: run `make deps` (apt-get install redis-server)")
        self.dir = tempfile.mkdtemp(dir=_tmp)
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", self.dir],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._ready():
                _started.append(self)
                return
            self.stop()
        raise RuntimeError("redis-server did not start")

    def _ready(self) -> bool:
        end = time.monotonic() + 10
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return True
            except OSError:
                time.sleep(0.05)
        return False

    @property
    def url(self) -> str:
        return "redis://127.0.0.1:%d/0" % self.port

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


SECRETS = {
    "ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET": "python-tests-poll-token-secret-0123456789abcdef",
    "ASYNCSTATUS_WEBHOOKS_SECRET_KEY": "python-tests-webhooks-secret-key-0123456789abcdef",
}


def _env(redis: Optional[Redis]) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCSTATUS_")}
    env["ASYNCSTATUS_CONSOLE_ADDR"] = "off"
    if redis is not None:
        env["ASYNCSTATUS_REDIS_URL"] = redis.url
        env.update(SECRETS)
    return env


def _config() -> str:
    p = os.path.join(_tmp, "asyncstatus.yaml")
    if not os.path.exists(p):
        with open(p, "w") as f:
            f.write(CONFIG)
    return p


def create_key(redis: Redis, tenant: str, scopes: str = "read,write,admin") -> str:
    """`asyncstatus keys create` on redis: the key, printed once on stdout."""
    out = subprocess.run([binary(), "keys", "create", "--config", _config(), "--tenant", tenant,
                          "--scopes", scopes], env=_env(redis), check=True, capture_output=True, text=True)
    keys = [ln.strip() for ln in out.stdout.splitlines() if ln.strip().startswith("ask_")]
    if len(keys) != 1:
        raise RuntimeError("keys create printed no key: %r" % out.stdout)
    return keys[0]


class Serve:
    """`asyncstatus serve` on a free port; on the embedded store without redis,
    then ``demo_key`` is the key it printed."""

    def __init__(self, redis: Optional[Redis] = None) -> None:
        env = _env(redis)
        env["ASYNCSTATUS_HTTP_ADDR"] = "127.0.0.1:0"
        self.proc = subprocess.Popen([binary(), "serve", "--config", _config(), "--log-format", "json"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stdout: List[str] = []
        self.stderr: List[str] = []
        self._addr = threading.Event()
        self.addr = ""
        self.demo_key: Optional[str] = None
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout), daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True)]
        for t in self._readers:
            t.start()
        _started.append(self)
        if not self._addr.wait(30):
            self.stop()
            raise RuntimeError("serve did not start:\n" + "".join(self.stderr[-20:]))
        if redis is None:
            end = time.monotonic() + 5
            while self.demo_key is None and time.monotonic() < end:
                time.sleep(0.02)
            if self.demo_key is None:
                raise RuntimeError("serve printed no demo key:\n" + "".join(self.stdout))

    def _read(self, stream: Any, lines: List[str]) -> None:
        for line in stream:
            lines.append(line)
            s = line.strip()
            if s.startswith("ask_") and self.demo_key is None:
                self.demo_key = s
            if '"msg":"listening"' in s:
                try:
                    self.addr = json.loads(s)["addr"]
                except (ValueError, KeyError):
                    continue
                self._addr.set()

    @property
    def url(self) -> str:
        return "http://" + self.addr

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for t in self._readers:
            t.join(5)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()


def tls_cert() -> Tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (made once with openssl): (cert, key) paths."""
    cert, key = os.path.join(_tmp, "cert.pem"), os.path.join(_tmp, "key.pem")
    with _bin_lock:
        if not os.path.exists(cert):
            if shutil.which("openssl") is None:
                raise RuntimeError("openssl is missing: run `make deps` (apt-get install openssl)")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


class Proxy:
    """A reverse proxy in front of a service that notes every call and can
    strip Prefer, answer GETs of a request with injected problems, answer a
    POST with a 503 after forwarding it (a lost answer), and cut a stream
    (a TCP reset) after some events."""

    def __init__(self, upstream: str, tls: bool = False) -> None:
        host, port = upstream.split(":")
        self.tls = tls
        self.upstream = (host, int(port))
        self.strip_prefer = False
        self.inject: List[Tuple[int, str, int]] = []  # (status, code, retry_after) for the next polls
        self.inject_stream: List[Tuple[int, str, int]] = []  # the same for the next stream connections
        self.lose_next_post = False
        self.cut_stream_after: Optional[int] = None  # events, once
        self.log: List[Dict[str, Any]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy._handle(self)

            do_POST = do_GET
            do_DELETE = do_GET

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls_cert())
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def entries(self, method: str = "GET", path_part: str = "") -> List[Dict[str, Any]]:
        with self._lock:
            return [e for e in self.log if e["method"] == method and path_part in e["path"]]

    def _note(self, h: http.server.BaseHTTPRequestHandler, status: int, headers: Dict[str, str],
              answer_headers: Dict[str, str]) -> None:
        with self._lock:
            self.log.append({"at": time.monotonic(), "method": h.command, "path": h.path,
                             "sent": dict(h.headers.items()), "headers": headers,
                             "status": status, "answer": answer_headers})

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else None
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("connection", "host")}
        if self.strip_prefer:
            headers = {k: v for k, v in headers.items() if k.lower() != "prefer"}
        is_poll = h.command == "GET" and h.path.startswith("/v1/requests/") and h.path.count("/") == 3
        is_stream = h.command == "GET" and h.path.endswith("/stream")
        with self._lock:
            inject = self.inject.pop(0) if is_poll and self.inject else None
            if is_stream and self.inject_stream:
                inject = self.inject_stream.pop(0)
        if inject is not None:
            status, code, ra = inject
            b = json.dumps({"type": "about:blank", "title": code, "status": status, "code": code,
                            "detail": "injected by the test proxy", "request_id": "proxy"}).encode()
            # Noted before it is answered, so that the log is whole when the client has the answer.
            self._note(h, status, headers, {"Retry-After": str(ra)})
            h.send_response(status)
            h.send_header("Content-Type", "application/problem+json")
            h.send_header("Retry-After", str(ra))
            h.send_header("Content-Length", str(len(b)))
            h.end_headers()
            h.wfile.write(b)
            return
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.request(h.command, h.path, body=body, headers=headers)
            res = conn.getresponse()
            ans = {k: v for k, v in res.getheaders()}
            if (res.getheader("Content-Type") or "").startswith("text/event-stream"):
                self._note(h, res.status, headers, ans)
                self._pipe_stream(h, res)
                return
            data = res.read()
            with self._lock:
                lose = h.command == "POST" and self.lose_next_post
                if lose:
                    self.lose_next_post = False
            if lose:
                self._note(h, 503, headers, ans)
                h.send_response(503)
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            self._note(h, res.status, headers, ans)
            h.send_response(res.status)
            for k, v in res.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length", "date", "server"):
                    h.send_header(k, v)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        finally:
            conn.close()

    def _pipe_stream(self, h: http.server.BaseHTTPRequestHandler, res: http.client.HTTPResponse) -> None:
        h.send_response(res.status)
        for k, v in res.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length", "date", "server"):
                h.send_header(k, v)
        h.end_headers()
        events = 0
        data = False
        while True:
            line = res.readline()
            if not line:
                return
            h.wfile.write(line)
            h.wfile.flush()
            if line.startswith(b"data:"):
                data = True
            elif line in (b"\n", b"\r\n") and data:
                data = False
                events += 1
                with self._lock:
                    cut = self.cut_stream_after is not None and events >= self.cut_stream_after
                    if cut:
                        self.cut_stream_after = None
                if cut:
                    # A reset, not a clean end: the client must take it as a cut.
                    h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    h.connection.close()
                    return
