"""`pip install` of the package into a fresh virtual environment, with no
package index, and a call through the installed copy.

The interpreter is Debian's /usr/bin/python3 (python3-venv, python3-pip,
python3-setuptools and python3-wheel from `make deps`), or
$ASYNCSTATUS_TEST_VENV_PYTHON. The venv sees the system's site-packages because
setuptools before 70 needs the `wheel` package to build one, and no index is
there to fetch it from. It is made without a pip of its own: Debian's pip, run
by the venv's interpreter, installs into the venv all the same, and seeding a
pip (ensurepip) costs some 15 s on a busy two-core machine for nothing this
test checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import harness

PYTHON = os.environ.get("ASYNCSTATUS_TEST_VENV_PYTHON", "/usr/bin/python3")


class InstallTest(unittest.TestCase):
    def test_pip_install_into_a_fresh_venv(self) -> None:
        if not os.access(PYTHON, os.X_OK):
            self.fail("%s is missing: run `make deps` (python3-venv python3-pip python3-setuptools python3-wheel)"
                      % PYTHON)
        tmp = tempfile.mkdtemp(prefix="asyncstatus-venv-")
        self.addCleanup(shutil.rmtree, tmp, True)
        # A copy, so that the build leaves nothing in the source tree.
        src = os.path.join(tmp, "src")
        shutil.copytree(harness.PACKAGE_ROOT, src,
                        ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
        venv = os.path.join(tmp, "venv")
        r = subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", venv],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, "python3 -m venv failed (is python3-venv installed? make deps):\n" + r.stderr)
        py = os.path.join(venv, "bin", "python")
        r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", src],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, "pip install failed:\n" + r.stdout + r.stderr)

        serve = harness.Serve()
        self.addCleanup(serve.stop)
        code = """
import json, os, sys, asyncstatus
c = asyncstatus.Client(sys.argv[1], api_key=sys.argv[2])
cr = c.create("py.installed")
r = c.complete(cr.id, {"from": "venv"})
here = os.path.dirname(asyncstatus.__file__)
print(json.dumps({"file": asyncstatus.__file__, "typed": os.path.exists(os.path.join(here, "py.typed")),
                  "status": r.status, "answer": r.answer()}))
"""
        r = subprocess.run([py, "-c", code, serve.url, str(serve.demo_key)], capture_output=True, text=True,
                           cwd=tmp, timeout=60, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertTrue(got["file"].startswith(os.path.join(venv, "lib")), got["file"])
        self.assertTrue(got["typed"], "py.typed is installed")
        self.assertEqual((got["status"], got["answer"]), ("succeeded", {"from": "venv"}))
