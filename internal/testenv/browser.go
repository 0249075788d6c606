package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's headless-capable Chromium (apt-get install
// chromium; .ci/run and `make tools` install it).
const ChromiumPath = "/usr/bin/chromium"

// Browser starts a headless Chromium for the test, with a fresh profile, and
// returns a chromedp context driving its first tab. The browser is stopped
// when the test ends. A missing Chromium fails the test; it never skips.
//
// The flags keep the browser to the test's own traffic: no QUIC, no
// background or component-update requests, no sync, no first-run pages;
// --no-sandbox because CI runs as root.
func Browser(tb testing.TB) context.Context {
	tb.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		tb.Fatalf("testenv.Browser: %v: install Debian's chromium package (apt-get install -y chromium)", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(tb.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		tb.Fatalf("testenv.Browser: start %s: %v", ChromiumPath, err)
	}
	return ctx
}
