package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// browserPage is served from another origin than the API. It first holds a
// watch of the tenant's exports (reference §16), then creates a request,
// follows it with EventSource (?poll_token=) and with fetch + Prefer: wait,
// and lists each state it sees in #w, #es and #lp. A long-poll answer without
// Preference-Applied (not exposed by CORS) is marked "!". The watch is read
// with fetch and a stream reader, not EventSource: it needs the key, and
// EventSource cannot send an Authorization header (the poll token of
// ?poll_token= is one request's, and only the request's stream takes it).
// That is how the TypeScript client reads it in a browser.
const browserPage = `<!doctype html><meta charset="utf-8"><title>wait</title>
<p id="id"></p><p id="w"></p><p id="es"></p><p id="lp"></p><p id="err"></p>
<script>
const api = %q, key = %q;
const show = (el, s) => { const p = document.getElementById(el); p.textContent = (p.textContent + " " + s).trim(); };
let held;
const watching = new Promise(r => held = r);
const watch = async () => {
  const res = await fetch(api + "/v1/requests?watch=true&type=export", {headers: {"Authorization": "Bearer " + key}});
  if (res.status !== 200 || !res.headers.get("Content-Type").startsWith("text/event-stream")) {
    show("err", "watch answered " + res.status); held(); return;
  }
  const rd = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const {value, done} = await rd.read();
    if (done) { show("err", "watch ended"); return; }
    held();
    buf += value;
    for (let i; (i = buf.indexOf("\n\n")) >= 0; ) {
      const lines = buf.slice(0, i).split("\n");
      buf = buf.slice(i + 2);
      const data = lines.filter(l => l.startsWith("data:")).map(l => l.slice(5).trim()).join("");
      if (!lines.includes("event: request") || !data) continue;
      const v = JSON.parse(data);
      show("w", v.status);
      if (v.done) { rd.cancel(); return; }
    }
  }
};
(async () => {
  watch().catch(e => show("err", "watch: " + String(e)));
  await watching;
  const r = await fetch(api + "/v1/requests", {method: "POST",
    headers: {"Authorization": "Bearer " + key, "Content-Type": "application/json"}, body: JSON.stringify({type: "export"})});
  const created = await r.json();
  const es = new EventSource(api + "/v1/requests/" + created.id + "/stream?poll_token=" + encodeURIComponent(created.poll_token));
  es.addEventListener("request", e => { const v = JSON.parse(e.data); show("es", v.status); if (v.done) es.close(); });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) show("err", "es closed"); };
  // the state now, then a long poll per change (If-None-Match: what it has)
  const first = await fetch(api + "/v1/requests/" + created.id, {headers: {"X-Poll-Token": created.poll_token}});
  let etag = first.headers.get("ETag");
  show("lp", (await first.json()).status);
  document.getElementById("id").textContent = created.id;
  for (;;) {
    const h = {"X-Poll-Token": created.poll_token, "Prefer": "wait=20"};
    if (etag) h["If-None-Match"] = etag;
    const res = await fetch(api + "/v1/requests/" + created.id, {headers: h});
    if (res.status === 304) continue;
    const v = await res.json();
    etag = res.headers.get("ETag");
    show("lp", v.status + (res.headers.get("Preference-Applied") ? "" : "!"));
    if (v.done) break;
  }
})().catch(e => show("err", String(e)));
</script>`

// TestBrowserWaits runs the page in headless Chromium: a page on a second
// origin creates a request, follows it by stream and by long poll, and shows
// every state; the test drives the request to its end through the API (the
// other replica) and checks what the page shows.
func TestBrowserWaits(t *testing.T) {
	var page *httptest.Server
	page = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, browserPage, pageAPI, pageKey)
	}))
	defer page.Close()
	p := newReplicaPair(t, testenv.Backends()[1], func(o *app.Options) { o.HTTP.CORSOrigins = []string{page.URL} }, nil)
	pageAPI, pageKey = p.urlA, p.key

	ctx := testenv.Browser(t)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatal(err)
	}
	until := func(expr string) error { _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr)); return err }
	show := func(sel string) string {
		s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("`+sel+`").textContent`))
		return s
	}
	if err := until(`document.getElementById("id").textContent !== "" || document.getElementById("err").textContent !== ""`); err != nil {
		t.Fatal(err)
	}
	id := show("id")
	if id == "" {
		t.Fatalf("the page could not create a request: %s", show("err"))
	}
	// both followers have seen the queued state before the request moves on
	if err := until(`document.getElementById("es").textContent.includes("queued")`); err != nil {
		t.Fatalf("stream: %v (shows %q, errors %q)", err, show("es"), show("err"))
	}
	if err := until(`document.getElementById("w").textContent.includes("queued")`); err != nil {
		t.Fatalf("watch: %v (shows %q, errors %q)", err, show("w"), show("err"))
	}
	waitWaiting(t, p.a, 3) // the watch, the stream and the long poll
	p.transition(t, id, "processing", `{"percent":50}`)
	if err := until(`["lp", "es", "w"].every(e => document.getElementById(e).textContent.includes("processing"))`); err != nil {
		t.Fatalf("processing: %v (w %q, es %q, lp %q, errors %q)", err, show("w"), show("es"), show("lp"), show("err"))
	}
	p.transition(t, id, "complete", `{"result_type":"confirmation","result":{"confirmed":true}}`)
	done := `["lp", "es", "w"].every(e => document.getElementById(e).textContent.includes("succeeded"))`
	if err := until(done); err != nil {
		t.Fatalf("succeeded: %v (w %q, es %q, lp %q, errors %q)", err, show("w"), show("es"), show("lp"), show("err"))
	}
	// the watch was held on this replica; the changes were made through the other
	if w := show("w"); w != "queued processing succeeded" {
		t.Fatalf("the watch showed %q", w)
	}
	if es := show("es"); es != "queued processing succeeded" {
		t.Fatalf("the stream showed %q", es)
	}
	if lp := show("lp"); lp != "queued processing succeeded" {
		t.Fatalf("the long poll showed %q (a ! marks an answer without Preference-Applied)", lp)
	}
	if e := show("err"); e != "" && !strings.Contains(e, "es closed") {
		t.Fatalf("page errors: %q", e)
	}
}

// pageAPI and pageKey are what the page's server writes into the page; set
// once the API servers exist (the page's origin must be known first).
var pageAPI, pageKey string
