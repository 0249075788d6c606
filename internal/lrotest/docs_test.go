package lrotest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsShowTheTestedExamples: docs/client.md shows each example exactly as
// the tests run it, in a fenced block of its language.
func TestDocsShowTheTestedExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "client.md"))
	if err != nil {
		t.Fatal(err)
	}
	for file, lang := range map[string]string{
		"azure_example_test.go":     "go",
		"js/create-and-wait.mjs":    "js",
		"python/create_and_wait.py": "python",
	} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```"+lang+"\n"+string(src)+"```\n") {
			t.Errorf("docs/client.md does not show internal/lrotest/%s as it is, in a ```%s block", file, lang)
		}
	}
}
