"""The test's driver (internal/lrotest/python_test.go): runs create_and_wait
and prints its outcome as one JSON line."""
import json
import sys

from create_and_wait import create_and_wait

base_url, api_key, type_ = sys.argv[1:4]
try:
    request = create_and_wait(base_url, api_key, type_)
    print(json.dumps({"ok": True, "request": request}))
except Exception as err:  # every way the poller can end with an error
    print(json.dumps({"ok": False, "error": "%s: %s" % (type(err).__name__, err)}))
