"""The examples of docs/client.md ("From Python") and of the README are the files
in examples/, run here against a real service; the docs carry them verbatim."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import subprocess
import sys
import threading
import unittest

import harness

EXAMPLES = os.path.join(harness.PACKAGE_ROOT, "examples")


def setUpModule() -> None:
    global serve, worker, waiter
    serve = harness.Serve()
    os.environ["ASYNCSTATUS_URL"] = serve.url
    os.environ["ASYNCSTATUS_API_KEY"] = str(serve.demo_key)
    worker = importlib.import_module("worker")
    waiter = importlib.import_module("wait_for_export")


def tearDownModule() -> None:
    serve.stop()
    for k in ("ASYNCSTATUS_URL", "ASYNCSTATUS_API_KEY"):
        os.environ.pop(k, None)


class ExamplesTest(unittest.TestCase):
    def run_worker(self, fn, *args) -> threading.Thread:
        def run() -> None:
            try:
                fn(*args)
            except Exception:
                pass  # the exception went into the request; the waiter reports it

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.addCleanup(t.join, 10)
        return t

    def test_a_worker_and_a_waiting_client(self) -> None:
        created = worker.start_export("acc_881204")
        self.assertEqual(created.context, {"account": "acc_881204"})
        self.run_worker(worker.export_statement, created.id, "acc_881204", 4)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            url = waiter.wait_for_export(created.id, created.poll_token, created.retry_after)
        self.assertEqual(url, "https://files.example/statements/acc_881204.pdf")
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[-1], "succeeded 100% page 4 of 4")
        steps = ["queued --% ", "processing --% "] + ["processing %d%% page %d of 4" % (25 * i, i) for i in range(1, 5)]
        for ln in lines[:-1]:
            self.assertIn(ln, steps)
        self.assertEqual(lines[:-1], sorted(lines[:-1], key=steps.index), "states in order")

    def test_a_failing_job_reaches_the_waiter(self) -> None:
        created = worker.start_export("acc_broken")
        self.run_worker(worker.export_statement, created.id, "acc_broken")
        with contextlib.redirect_stdout(io.StringIO()):
            with self.assertRaises(RuntimeError) as e:
                waiter.wait_for_export(created.id, created.poll_token)
        self.assertEqual(str(e.exception), "export failed: ERR_JOB_FAILED: ledger service unavailable")

    def test_the_plain_worker_and_the_waiter_as_a_script(self) -> None:
        created = worker.start_export("acc_7")
        worker.export_statement_plain(created.id, "acc_7")
        env = dict(os.environ, PYTHONPATH=os.path.join(harness.PACKAGE_ROOT, "src"))
        p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "wait_for_export.py"), created.id,
                            created.poll_token], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines(),
                         ["succeeded 100% page 1 of 1", "https://files.example/statements/acc_7.pdf"])

        failed = worker.start_export("acc_broken")
        with self.assertRaises(RuntimeError):
            worker.export_statement_plain(failed.id, "acc_broken")
        p = subprocess.run([sys.executable, os.path.join(EXAMPLES, "wait_for_export.py"), failed.id,
                            failed.poll_token], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.strip(), "export failed: ERR_JOB_FAILED: ledger service unavailable")

    def test_the_docs_carry_the_examples_verbatim(self) -> None:
        with open(os.path.join(harness.REPO_ROOT, "docs", "client.md")) as f:
            docs = f.read()
        with open(os.path.join(harness.PACKAGE_ROOT, "README.md")) as f:
            readme = f.read()
        for name in ("worker.py", "wait_for_export.py"):
            with open(os.path.join(EXAMPLES, name)) as f:
                code = f.read()
            self.assertTrue("```python\n" + code + "```" in docs, "docs/client.md lacks examples/%s as it is" % name)
            self.assertIn("examples/" + name, readme)
