"""trace_context: the caller's W3C trace context goes out with every call
made inside it, and nothing outside it."""

from __future__ import annotations

import http.server
import json
import threading
import unittest
from typing import Dict, List

import asyncstatus


class _Capture(http.server.BaseHTTPRequestHandler):
    seen: List[Dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Capture.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = json.dumps({"id": "01a23cc7-b9b3-77ef-a05f-cf0500923ca9", "type": "x.y", "status": "queued",
                           "done": False, "created_by": "k", "created_at": "2026-12-03T16:00:00.000Z",
                           "updated_at": "2026-12-03T16:00:00.000Z", "completed_at": None, "expires_at": None,
                           "version": 1, "poll_token": "pt"}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class TraceContextTest(unittest.TestCase):
    def test_sent_inside_only(self) -> None:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        c = asyncstatus.Client("http://127.0.0.1:%d" % srv.server_address[1], api_key="ask_x")
        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        with asyncstatus.trace_context(tp, "vendor=abc"):
            c.create("x.y")
        c.create("x.y")
        self.assertEqual(_Capture.seen[0].get("traceparent"), tp)
        self.assertEqual(_Capture.seen[0].get("tracestate"), "vendor=abc")
        self.assertNotIn("traceparent", _Capture.seen[1])
        self.assertNotIn("tracestate", _Capture.seen[1])


if __name__ == "__main__":
    unittest.main()
