package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// The real-browser tests (docs/reference.md §14): headless Chromium driven by chromedp,
// against the console and the public API over one store, on the embedded
// store's miniredis and on the local Redis Cluster. A missing Chromium FAILS
// them (.ci/run and `make tools` install it).
//
// Screenshots of every page go to $ASYNCSTATUS_ARTIFACTS_DIR (default: a
// directory under the system temp dir, printed in the test log); with
// ASYNCSTATUS_UPDATE_DOCS=1 the miniredis run also rewrites the two shown in
// the README (docs/console-requests.png, docs/console-request.png).

// browser starts a headless Chromium for the test (testenv.Browser: Debian's
// chromium, FAIL when it is missing) with a desktop-sized viewport, and bounds
// the whole test's browsing.
func browser(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(testenv.Browser(tb), 45*time.Second)
	tb.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		tb.Fatalf("viewport: %v", err)
	}
	return ctx
}

// artifacts is where the screenshots of this run go.
func artifacts(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("ASYNCSTATUS_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "asyncstatus-console-screenshots")
	}
	dir = filepath.Join(dir, strings.ReplaceAll(tb.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("screenshots in %s", dir)
	return dir
}

// shot saves a screenshot of the whole page as dir/name.png.
func shot(dir, name string, also ...string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, t)
		if err != nil {
			return fmt.Errorf("screenshot %s: %w", name, err)
		}
		for _, p := range append([]string{filepath.Join(dir, name+".png")}, also...) {
			if err := os.WriteFile(p, png, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
}

// docsShot is the docs/ path of a README screenshot when this run updates them.
func docsShot(tb testing.TB, name string) []string {
	if os.Getenv("ASYNCSTATUS_UPDATE_DOCS") != "1" || !strings.Contains(tb.Name(), "miniredis") {
		return nil
	}
	return []string{filepath.Join("..", "..", "docs", name)}
}

// call makes a public API call with key and decodes the JSON answer.
func (s *stack) call(tb testing.TB, method, path, key, body string) (int, map[string]any) {
	tb.Helper()
	req, _ := http.NewRequest(method, s.api+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func (s *stack) apiCreate(tb testing.TB, key, typ string) string {
	tb.Helper()
	code, m := s.call(tb, http.MethodPost, "/v1/requests", key, `{"type":"`+typ+`","context":{"account":"acc_881204"}}`)
	if code != http.StatusAccepted {
		tb.Fatalf("create: %d %v", code, m)
	}
	return m["id"].(string)
}

// byName finds a button by its accessible name (its text).
func byName(name string) string { return fmt.Sprintf(`//button[normalize-space()=%q]`, name) }

func signInActions(base, key string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`//label[normalize-space()="API key"]`),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(byName("Sign in")),
	)
}

func browserBackends() []testenv.Backend {
	all := testenv.Backends()
	return []testenv.Backend{all[0], all[2]} // the embedded store's miniredis, and the Cluster
}

// TestBrowserTenantAdmin: an admin key signs in, finds a request it created in
// the list, opens it, watches its timeline gain "succeeded" live (the page is
// not reloaded) when the request is completed through the API, cancels another
// through the confirmation, and signs out.
func TestBrowserTenantAdmin(t *testing.T) {
	for _, b := range browserBackends() {
		t.Run(b.Name, func(t *testing.T) {
			// an hour between re-reads: only the hub's wake-up makes the page live
			s := newStack(t, b, stackOptions{withAPI: true, live: time.Hour})
			admin, _ := s.key(t, "demo", adminScopes)
			other := s.apiCreate(t, admin, "statement.export")
			id := s.apiCreate(t, admin, "statement.export")
			if code, m := s.call(t, http.MethodPost, "/v1/requests/"+id+"/processing", admin, `{"percent":40,"message":"page 4 of 10"}`); code != 200 {
				t.Fatalf("processing: %d %v", code, m)
			}
			dir := artifacts(t)
			bctx := browser(t)
			step(t, bctx, "sign in and find the request",
				signInActions(s.url, admin),
				chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+id+`"] a`)))
			loc := value(t, bctx, chromedp.Location())
			step(t, bctx, "open the request",
				shot(dir, "requests", docsShot(t, "console-requests.png")...),
				chromedp.Click(chromedp.CSS(`tr[data-id="`+id+`"] a`)),
				chromedp.WaitVisible(`//div[@data-terminal="false"]//span[normalize-space()="processing"]`))
			// a marker that a reload would lose: the page must change in place
			value(t, bctx, chromedp.Evaluate[string](`window.notReloaded = "yes"; "set"`))
			title := value(t, bctx, chromedp.AttributeValue(chromedp.CSS(`time[datetime]`), "title")).Value
			if loc != s.url+"/t/demo/requests" {
				t.Fatalf("after sign-in the browser is at %s", loc)
			}
			if !strings.HasSuffix(title, "(UTC)") {
				t.Fatalf("times must keep the UTC value on hover (script ran): title %q", title)
			}
			if code, m := s.call(t, http.MethodPost, "/v1/requests/"+id+"/complete", admin,
				`{"result_type":"link","result":{"url":"https://files.example/x.pdf","expires_at":"2030-01-01T00:00:00Z"}}`); code != 200 {
				t.Fatalf("complete: %d %v", code, m)
			}
			step(t, bctx, "watch the timeline gain succeeded",
				chromedp.WaitVisible(`//div[@data-terminal="true"]//ol[@class="timeline"]//span[normalize-space()="succeeded"]`),
				shot(dir, "request", docsShot(t, "console-request.png")...))
			marker := value(t, bctx, chromedp.Evaluate[string](`window.notReloaded || "reloaded"`))
			if marker != "yes" {
				t.Fatalf("the page reloaded instead of updating live (%q)", marker)
			}
			step(t, bctx, "cancel another and sign out",
				chromedp.Navigate(s.url+"/t/demo/requests/"+other),
				// the stream's first fragment replaces the button: click the new one
				chromedp.WaitVisible(chromedp.CSS(`#live[data-streamed="true"] .live`)),
				chromedp.Click(byName("Cancel request")),
				chromedp.WaitVisible(byName("Confirm")),
				shot(dir, "confirm-cancel"),
				chromedp.Click(byName("Confirm")),
				chromedp.WaitVisible(`//div[@data-terminal="true"]//dd/span[normalize-space()="cancelled"]`),
				chromedp.Navigate(s.url+"/t/demo/webhooks"), shot(dir, "webhooks"),
				chromedp.Navigate(s.url+"/t/demo/keys"), shot(dir, "keys"),
				chromedp.Click(byName("Sign out")),
				chromedp.WaitVisible(byName("Sign in")),
				shot(dir, "signin"))
			loc = value(t, bctx, chromedp.Location())
			if st := s.status(t, "demo", other); st != domain.StatusCancelled {
				t.Fatalf("the cancelled request is %s", st)
			}
			if loc != s.url+"/signin" {
				t.Fatalf("after sign-out the browser is at %s", loc)
			}
		})
	}
}

// TestBrowserOperator: an operator key sees two tenants, freezes one through
// the confirmation (the API then refuses its reads), looks at a request of the
// other, the figures, the configuration and the operator keys, and signs out.
func TestBrowserOperator(t *testing.T) {
	for _, b := range browserBackends() {
		t.Run(b.Name, func(t *testing.T) {
			s := newStack(t, b, stackOptions{withAPI: true, config: []byte("redis:\n  url: redis://:***@redis.internal:6379/0\n")})
			op, _ := s.operatorKey(t)
			acme, _ := s.key(t, "acme", adminScopes)
			globex, _ := s.key(t, "globex", adminScopes)
			id := s.apiCreate(t, acme, "report.pdf")
			gid := s.apiCreate(t, globex, "invoice.batch")
			dir := artifacts(t)
			bctx := browser(t)
			step(t, bctx, "sign in",
				signInActions(s.url, op),
				chromedp.WaitVisible(chromedp.CSS(`tr[data-tenant="acme"]`)),
				chromedp.WaitVisible(chromedp.CSS(`tr[data-tenant="globex"]`)))
			loc := value(t, bctx, chromedp.Location())
			step(t, bctx, "freeze globex",
				shot(dir, "tenants"),
				chromedp.Click(`//tr[@data-tenant="globex"]`+byName("Freeze tenant")),
				chromedp.WaitVisible(byName("Confirm")),
				chromedp.Click(byName("Confirm")),
				chromedp.WaitVisible(`//tr[@data-tenant="globex"]`+byName("Unfreeze tenant")),
				chromedp.WaitVisible(`//tr[@data-tenant="globex"]//span[normalize-space()="frozen"]`),
				shot(dir, "tenants-frozen"))
			if loc != s.url+"/tenants" {
				t.Fatalf("after sign-in the operator is at %s", loc)
			}
			if code, m := s.call(t, http.MethodGet, "/v1/requests/"+gid, globex, ""); code != http.StatusForbidden || m["code"] != "TENANT_FROZEN" {
				t.Fatalf("the frozen tenant's read: %d %v", code, m)
			}
			if code, _ := s.call(t, http.MethodGet, "/v1/requests/"+id, op, ""); code != http.StatusUnauthorized {
				t.Fatalf("the operator key on the public API: %d, want 401", code)
			}
			step(t, bctx, "operator pages and sign-out",
				chromedp.Click(`//tr[@data-tenant="acme"]//a[normalize-space()="acme"]`),
				chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+id+`"] a`)),
				shot(dir, "requests"),
				chromedp.Click(chromedp.CSS(`tr[data-id="`+id+`"] a`)),
				chromedp.WaitVisible(byName("Delete request")),
				shot(dir, "request"),
				chromedp.Navigate(s.url+"/figures"),
				chromedp.WaitVisible(`//dt[normalize-space()="p99 latency"]`),
				shot(dir, "figures"),
				chromedp.Navigate(s.url+"/config"),
				chromedp.WaitVisible(chromedp.CSS(`pre.yaml`)),
				shot(dir, "config"),
				chromedp.Navigate(s.url+"/operator-keys"),
				chromedp.WaitVisible(byName("Revoke key")),
				shot(dir, "operator-keys"),
				chromedp.Click(byName("Sign out")),
				chromedp.WaitVisible(byName("Sign in")),
				chromedp.Navigate(s.url+"/tenants"))
			body := value(t, bctx, chromedp.OuterHTML(chromedp.CSS("body")))
			if !strings.Contains(body, "Sign in") || strings.Contains(body, `data-tenant="acme"`) {
				t.Fatalf("after sign-out the tenants page must refuse:\n%s", body)
			}
		})
	}
}

// step runs browser actions and fails the test, naming what it was doing,
// when one fails.
func step(tb testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
}

// value runs one browser action and returns its value.
func value[T any](tb testing.TB, ctx context.Context, a chromedp.Action[T]) T {
	tb.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.Fatalf("browser: %v", err)
	}
	return v
}
