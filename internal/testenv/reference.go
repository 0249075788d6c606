package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// ReferencePath is the reference request of every benchmark and memory figure,
// testdata/reference-request.json at the module's root, found from this file's
// own location so that any package's tests reach it.
func ReferencePath(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("testenv: cannot locate the module")
	}
	// file is <module>/internal/testenv/reference.go
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "reference-request.json")
}

// ReferenceRequest reads the reference request's members (create, processing,
// complete) as they stand in the file. A missing file fails the test.
func ReferenceRequest(tb testing.TB) map[string]json.RawMessage {
	tb.Helper()
	b, err := os.ReadFile(ReferencePath(tb))
	if err != nil {
		tb.Fatalf("reference request: %v", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		tb.Fatalf("reference request: %v", err)
	}
	for _, k := range []string{"create", "processing", "complete"} {
		if len(raw[k]) == 0 {
			tb.Fatalf("reference request: no %q member", k)
		}
	}
	return raw
}
