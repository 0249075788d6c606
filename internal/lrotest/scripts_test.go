package lrotest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// pythonPath is Debian's interpreter, the one that has python3-azure (a
// python3 earlier on PATH may be another installation without it).
const pythonPath = "/usr/bin/python3"

// scriptOutcome is what run.mjs and run.py print.
type scriptOutcome struct {
	OK      bool `json:"ok"`
	Request *struct {
		ID     string          `json:"id"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	} `json:"request"`
	Error string `json:"error"`
}

// nodeCommand is node and the JavaScript driver, or a failure saying how to
// install them.
func nodeCommand(t *testing.T) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: run `make deps` (mk/lro.mk): %v", err)
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "@azure", "core-lro", "package.json")); err != nil {
		t.Fatalf("@azure/core-lro is not installed in internal/lrotest/js: run `make deps` (mk/lro.mk): %v", err)
	}
	return []string{node, "run.mjs"}
}

// pythonCommand is Debian's python3 and the Python driver, or a failure
// saying how to install them.
func pythonCommand(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command(pythonPath, "-c", "import azure.core; print(azure.core.__version__)").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import azure.core (Debian's python3-azure): run `make deps` (mk/lro.mk): %v\n%s", pythonPath, err, out)
	}
	return []string{pythonPath, "run.py"}
}

// runScript runs a driver in dir on one request of typ and decodes its outcome.
func runScript(ctx context.Context, t *testing.T, dir string, argv []string, s *service, typ string) scriptOutcome {
	t.Helper()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], s.URL, s.Keys["rw"], typ)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // nothing written into the source tree
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v (within %s?)\nstdout: %s\nstderr: %s", strings.Join(argv, " "), err, clientBound, stdout.Bytes(), stderr.Bytes())
	}
	var o scriptOutcome
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &o); err != nil {
		t.Fatalf("%s printed %q: %v\nstderr: %s", strings.Join(argv, " "), stdout.Bytes(), err, stderr.Bytes())
	}
	return o
}

// driveScript runs the driver to each end on every backend: a succeeded
// request is the poller's result; the other ends are errors.
func driveScript(t *testing.T, name, dir string, argv []string) {
	eachBackend(t, func(t *testing.T, s *service) {
		for _, end := range ends {
			t.Run(string(end), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), clientBound)
				defer cancel()
				typ := scenarioType(name, end)
				found := s.worker(ctx, t, typ, end)
				o := runScript(ctx, t, dir, argv, s, typ)
				id := <-found
				if end == domain.StatusSucceeded {
					var result bytes.Buffer
					if o.Request != nil {
						_ = json.Compact(&result, o.Request.Result) // Python writes it with spaces
					}
					if !o.OK || o.Request == nil || o.Request.ID != id || o.Request.Status != "succeeded" || result.String() != `{"rows":42}` {
						t.Fatalf("outcome %+v (request %+v), want request %s succeeded", o, o.Request, id)
					}
					return
				}
				if o.OK || o.Error == "" {
					t.Fatalf("outcome %+v (request %+v), want an error", o, o.Request)
				}
				t.Logf("%s ended with: %s", end, o.Error)
			})
		}
	})
}

// TestAzureJavaScriptPoller: @azure/core-lro's createHttpPoller, started on
// the create answer, resolves to the request when it succeeded and rejects
// when it failed, expired or was cancelled.
func TestAzureJavaScriptPoller(t *testing.T) {
	t.Parallel()
	driveScript(t, "js", "js", nodeCommand(t))
}

// TestAzurePythonPoller: azure-core's LROPoller with LROBasePolling over a
// PipelineClient returns the request when it succeeded and raises when it
// failed, expired or was cancelled.
func TestAzurePythonPoller(t *testing.T) {
	t.Parallel()
	driveScript(t, "py", "python", pythonCommand(t))
}
