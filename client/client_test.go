package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/client"
)

// mustClient makes a client of base with the named key of s ("" for none).
func mustClient(t testing.TB, base string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(base, append([]client.Option{client.WithRetry(client.RetryPolicy{MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *service) client(t testing.TB, key string, opts ...client.Option) *client.Client {
	t.Helper()
	return mustClient(t, s.URL, append([]client.Option{client.WithAPIKey(s.Keys[key])}, opts...)...)
}

func mustCreate(t testing.TB, c *client.Client, typ string) *client.Created {
	t.Helper()
	cr, err := c.Create(context.Background(), client.CreateParams{Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// wantErr fails unless err matches sentinel and is an *Error of this status
// and code, and returns it.
func wantErr(t testing.TB, err, sentinel error, status int, code string) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &e) {
		t.Fatalf("got %v, want %v", err, sentinel)
	}
	if e.Status != status || e.Code != code {
		t.Fatalf("got %d %s, want %d %s (%v)", e.Status, e.Code, status, code, err)
	}
	if e.Code != "" && (e.RequestID == "" || e.Detail == "" || e.Type == "") {
		t.Fatalf("problem members missing: %+v", e)
	}
	return e
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "status.example", "ftp://x", "http://", "::"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	if _, err := client.New("https://status.example/base/"); err != nil {
		t.Fatal(err)
	}
}

func TestRequests(t *testing.T) {
	eachBackend(t, serviceOptions{schedule: []int{1, 2, 5}}, func(t *testing.T, s *service) {
		ctx := context.Background()
		c := s.client(t, "admin")

		t.Run("Create", func(t *testing.T) {
			cr, err := c.Create(ctx, client.CreateParams{Type: "statement.export", Context: map[string]any{"account": "acc_1"},
				EstimatedDuration: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if cr.Status != client.StatusQueued || cr.Done || cr.Version != 1 || cr.PollToken == "" ||
				cr.Location != s.URL+"/v1/requests/"+cr.ID || cr.RetryAfter != 2*time.Second ||
				string(cr.Context) != `{"account":"acc_1"}` || cr.CreatedAt.IsZero() {
				t.Fatalf("created: %+v", cr)
			}
			got, err := mustClient(t, s.URL, client.WithPollToken(cr.PollToken)).Get(ctx, cr.ID)
			if err != nil || got.ID != cr.ID || got.Status != client.StatusQueued {
				t.Fatalf("get by poll token: %+v %v", got, err)
			}
			// a conditional poll: 304 while the state is the one named
			pr, err := c.Poll(ctx, cr.ID, client.PollOptions{})
			if err != nil || pr.NotModified || pr.Request == nil || pr.ETag != `"1"` || !pr.HasRetryAfter || pr.LongPolled {
				t.Fatalf("poll: %+v %v", pr, err)
			}
			pr, err = s.client(t, "rw").Poll(ctx, cr.ID, client.PollOptions{IfNoneMatch: pr.ETag})
			if err != nil || !pr.NotModified || pr.Request != nil || pr.ETag != `"1"` || !pr.HasRetryAfter {
				t.Fatalf("conditional poll: %+v %v", pr, err)
			}
			if !json.Valid(got.Raw()) || !strings.Contains(string(got.Raw()), `"id":"`+cr.ID+`"`) {
				t.Fatalf("raw: %s", got.Raw())
			}
		})

		t.Run("IdempotencyKey", func(t *testing.T) {
			p := client.CreateParams{Type: "statement.export", Context: map[string]int{"n": 1}}
			a, err := c.Create(ctx, p, client.IdempotencyKey("order-1"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Create(ctx, p, client.IdempotencyKey("order-1"))
			if err != nil || b.ID != a.ID || b.PollToken != a.PollToken {
				t.Fatalf("replay: %+v %v, first %s", b, err, a.ID)
			}
			_, err = c.Create(ctx, client.CreateParams{Type: "other.type"}, client.IdempotencyKey("order-1"))
			wantErr(t, err, client.ErrIdempotencyKeyReused, 422, client.CodeIdempotencyKeyReused)
			// without a key, two calls are two requests
			if x, y := mustCreate(t, c, "statement.export"), mustCreate(t, c, "statement.export"); x.ID == y.ID {
				t.Fatal("two creates without a key made one request")
			}
		})

		t.Run("Transitions", func(t *testing.T) {
			cr := mustCreate(t, c, "statement.export")
			r, err := c.MarkProcessing(ctx, cr.ID, nil)
			if err != nil || r.Status != client.StatusProcessing || r.Version != 2 || r.Progress != nil {
				t.Fatalf("processing: %+v %v", r, err)
			}
			r, err = c.Heartbeat(ctx, cr.ID, client.NewProgress(40, "page 4 of 10"))
			if err != nil || r.Version != 3 || r.Progress == nil || *r.Progress.Percent != 40 || r.Progress.Message != "page 4 of 10" {
				t.Fatalf("heartbeat: %+v %v", r, err)
			}
			r, err = c.Heartbeat(ctx, cr.ID, &client.Progress{Message: "almost"})
			if err != nil || r.Version != 4 || r.Progress.Percent != nil || r.Progress.Message != "almost" {
				t.Fatalf("message-only progress: %+v %v", r.Progress, err)
			}
			exp := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
			size := int64(1234)
			r, err = c.Complete(ctx, cr.ID, &client.Link{URL: "https://files.example/x.pdf", ExpiresAt: exp,
				ChecksumSHA256: strings.Repeat("ab", 32), SizeBytes: &size, ContentType: "application/pdf"})
			if err != nil || r.Status != client.StatusSucceeded || !r.Done || r.CompletedAt == nil || r.ExpiresAt == nil {
				t.Fatalf("complete: %+v %v", r, err)
			}
			l, err := r.Link()
			if err != nil || l.URL != "https://files.example/x.pdf" || !l.ExpiresAt.Equal(exp) || *l.SizeBytes != 1234 ||
				l.ContentType != "application/pdf" || l.ChecksumSHA256 != strings.Repeat("ab", 32) {
				t.Fatalf("link: %+v %v", l, err)
			}
			if _, err := r.Confirmation(); err == nil {
				t.Fatal("a link read as a confirmation")
			}
			ev, err := c.Events(ctx, cr.ID)
			if err != nil || len(ev) != 3 || ev[0].From != nil || ev[0].To != client.StatusQueued ||
				*ev[1].From != client.StatusQueued || ev[2].To != client.StatusSucceeded || ev[2].Seq != 3 || ev[0].By == "" {
				t.Fatalf("events: %+v %v", ev, err)
			}

			cr = mustCreate(t, c, "statement.export")
			r, err = c.Complete(ctx, cr.ID, &client.Confirmation{Confirmed: true, Message: "sent"})
			if cf, _ := r.Confirmation(); err != nil || cf == nil || !cf.Confirmed || cf.Message != "sent" {
				t.Fatalf("confirmation: %+v %v", r, err)
			}
			cr = mustCreate(t, c, "statement.export")
			r, err = c.Complete(ctx, cr.ID, &client.Answer{Value: map[string]any{"total": 12.5, "rows": []int{1, 2}}})
			var ans struct {
				Total float64
				Rows  []int
			}
			if err != nil || r.DecodeAnswer(&ans) != nil || ans.Total != 12.5 || len(ans.Rows) != 2 {
				t.Fatalf("answer: %+v %+v %v", r, ans, err)
			}
			cr = mustCreate(t, c, "statement.export")
			r, err = c.Fail(ctx, cr.ID, "ERR_UPSTREAM", "ledger down")
			if err != nil || r.Status != client.StatusFailed || r.Failure == nil || r.Failure.Code != "ERR_UPSTREAM" ||
				r.Failure.Reason != "ledger down" {
				t.Fatalf("fail: %+v %v", r, err)
			}
			cr = mustCreate(t, c, "statement.export")
			r, err = c.Cancel(ctx, cr.ID, "not needed")
			if err != nil || r.Status != client.StatusCancelled || r.Cancellation == nil || r.Cancellation.Reason != "not needed" {
				t.Fatalf("cancel: %+v %v", r, err)
			}
			cr = mustCreate(t, c, "statement.export")
			if r, err = c.Cancel(ctx, cr.ID, ""); err != nil || r.Status != client.StatusCancelled || r.Cancellation != nil {
				t.Fatalf("cancel without reason: %+v %v", r, err)
			}
			// A terminal request refuses every transition and says how it is.
			for name, f := range map[string]func() error{
				"processing": func() error { _, err := c.MarkProcessing(ctx, cr.ID, nil); return err },
				"complete":   func() error { _, err := c.Complete(ctx, cr.ID, &client.Confirmation{}); return err },
				"fail":       func() error { _, err := c.Fail(ctx, cr.ID, "ERR_X", ""); return err },
				"cancel":     func() error { _, err := c.Cancel(ctx, cr.ID, ""); return err },
			} {
				e := wantErr(t, f(), client.ErrAlreadyTerminal, 409, client.CodeAlreadyTerminal)
				if e.Request == nil || e.Request.ID != cr.ID || e.Request.Status != client.StatusCancelled {
					t.Fatalf("%s: the error carries %+v", name, e.Request)
				}
			}
			// Delete, then it is gone.
			if err := c.Delete(ctx, cr.ID); err != nil {
				t.Fatal(err)
			}
			_, err = c.Get(ctx, cr.ID)
			wantErr(t, err, client.ErrNotFound, 404, client.CodeNotFound)
			wantErr(t, c.Delete(ctx, cr.ID), client.ErrNotFound, 404, client.CodeNotFound)
			if _, err := c.Get(ctx, ""); err == nil {
				t.Fatal("an empty id was sent")
			}
		})

		t.Run("List", func(t *testing.T) {
			typ := "list.test"
			var ids []string
			for range 5 {
				ids = append(ids, mustCreate(t, c, typ).ID)
			}
			if _, err := c.Cancel(ctx, ids[1], ""); err != nil {
				t.Fatal(err)
			}
			var got []string
			for r, err := range c.List(ctx, client.ListOptions{Type: typ, Limit: 2}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, r.ID)
			}
			if len(got) != 5 || got[0] != ids[4] || got[4] != ids[0] {
				t.Fatalf("listing %v, created %v", got, ids)
			}
			pages := 0
			for p, err := range c.Pages(ctx, client.ListOptions{Type: typ, Limit: 2}) {
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if (pages < 3) != (p.NextCursor != "") {
					t.Fatalf("page %d cursor %q", pages, p.NextCursor)
				}
			}
			if pages != 3 {
				t.Fatalf("%d pages", pages)
			}
			n := 0
			for r, err := range c.List(ctx, client.ListOptions{Type: typ, Statuses: []client.Status{client.StatusCancelled, client.StatusFailed}}) {
				if err != nil || r.ID != ids[1] {
					t.Fatalf("status filter: %+v %v", r, err)
				}
				n++
			}
			if n != 1 {
				t.Fatalf("status filter: %d", n)
			}
			n = 0
			for range c.List(ctx, client.ListOptions{Type: typ, CreatedAfter: time.Now().Add(time.Hour)}) {
				n++
			}
			if n != 0 {
				t.Fatalf("created_after in the future listed %d", n)
			}
			// breaking the loop stops the listing
			for range c.List(ctx, client.ListOptions{Type: typ, Limit: 1}) {
				break
			}
			_, err := c.ListPage(ctx, client.ListOptions{Type: typ, Cursor: "garbled"})
			wantErr(t, err, client.ErrInvalidCursor, 400, client.CodeInvalidCursor)
			for _, err := range c.List(ctx, client.ListOptions{Limit: 500}) {
				wantErr(t, err, client.ErrValidation, 400, client.CodeValidationFailed)
			}
		})
	})
}

// TestErrors maps every problem the service answers to its sentinel.
func TestErrors(t *testing.T) {
	eachBackend(t, serviceOptions{bodyLimit: 64 << 10}, func(t *testing.T, s *service) {
		ctx := context.Background()
		c := s.client(t, "admin")
		cr := mustCreate(t, c, "statement.export")

		_, err := mustClient(t, s.URL).Get(ctx, cr.ID)
		wantErr(t, err, client.ErrUnauthenticated, 401, client.CodeUnauthenticated)
		_, err = mustClient(t, s.URL, client.WithAPIKey("ask_not_a_real_key")).Get(ctx, cr.ID)
		wantErr(t, err, client.ErrUnauthenticated, 401, client.CodeUnauthenticated)
		_, err = s.client(t, "r").Create(ctx, client.CreateParams{Type: "x"})
		wantErr(t, err, client.ErrForbidden, 403, client.CodeForbidden)
		err = s.client(t, "rw").Delete(ctx, cr.ID)
		wantErr(t, err, client.ErrForbidden, 403, client.CodeForbidden)
		_, err = s.client(t, "other").Get(ctx, cr.ID)
		wantErr(t, err, client.ErrNotFound, 404, client.CodeNotFound)
		_, err = mustClient(t, s.URL, client.WithPollToken(cr.PollToken)).ListPage(ctx, client.ListOptions{})
		wantErr(t, err, client.ErrUnauthenticated, 401, client.CodeUnauthenticated)

		_, err = c.Create(ctx, client.CreateParams{Type: "Bad Type"})
		e := wantErr(t, err, client.ErrValidation, 400, client.CodeValidationFailed)
		if len(e.Fields) == 0 || e.Fields[0].Field != "type" {
			t.Fatalf("fields: %+v", e.Fields)
		}
		_, err = c.Create(ctx, client.CreateParams{Type: "x", Context: map[string]string{"big": strings.Repeat("x", 70<<10)}})
		wantErr(t, err, client.ErrPayloadTooLarge, 413, client.CodePayloadTooLarge)

		// A poll token's second poll inside the Retry-After it was given.
		pt := mustClient(t, s.URL, client.WithPollToken(cr.PollToken))
		if _, err := pt.Get(ctx, cr.ID); err != nil {
			t.Fatal(err)
		}
		_, err = pt.Get(ctx, cr.ID)
		e = wantErr(t, err, client.ErrPolledTooEarly, 429, client.CodePolledTooEarly)
		if !errors.Is(err, client.ErrRateLimited) || e.RetryAfter < time.Second {
			t.Fatalf("early poll: %+v", e)
		}

		if err := s.Store.SetFrozen(ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		_, err = c.Get(ctx, cr.ID)
		wantErr(t, err, client.ErrTenantFrozen, 403, client.CodeTenantFrozen)
		if _, err := c.Cancel(ctx, cr.ID, ""); err != nil { // transitions still work
			t.Fatal(err)
		}
		if err := s.Store.SetFrozen(ctx, "acme", false); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Injected", func(t *testing.T) {
		s := startService(t, backends()[0], serviceOptions{})
		p := newProxy(t, s.URL)
		c := mustClient(t, p.URL, client.WithAPIKey(s.Keys["admin"]))
		cr := mustCreate(t, c, "statement.export")
		for _, tc := range []struct {
			status   int
			code     string
			sentinel error
		}{
			{429, client.CodeRateLimited, client.ErrRateLimited},
			{503, client.CodeBackendUnavailable, client.ErrBackendUnavailable},
		} {
			p.setInject(func(w http.ResponseWriter, r *http.Request) bool { problem(w, tc.status, tc.code, 1); return true })
			_, err := c.Events(context.Background(), cr.ID)
			e := wantErr(t, err, tc.sentinel, tc.status, tc.code)
			if e.RetryAfter != time.Second {
				t.Fatalf("retry-after %v", e.RetryAfter)
			}
		}
		p.setInject(func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(502)
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
			return true
		})
		_, err := c.Get(context.Background(), cr.ID)
		e := wantErr(t, err, err, 502, "")
		if !strings.Contains(e.Detail, "bad gateway") || errors.Is(err, client.ErrNotFound) {
			t.Fatalf("non-problem answer: %+v", e)
		}
	})
}

// TestRetries: GETs are retried after 503 and transport errors, POSTs too
// under one Idempotency-Key, DELETE never; 4xx answers are not retried.
func TestRetries(t *testing.T) {
	s := startService(t, backends()[0], serviceOptions{})
	ctx := context.Background()
	p := newProxy(t, s.URL)
	c := mustClient(t, p.URL, client.WithAPIKey(s.Keys["admin"]))
	cr := mustCreate(t, c, "statement.export")

	// failing makes the first n calls of this method fail with fail.
	failing := func(method string, n int, fail func(w http.ResponseWriter, r *http.Request)) {
		var mu sync.Mutex
		p.setInject(func(w http.ResponseWriter, r *http.Request) bool {
			mu.Lock()
			defer mu.Unlock()
			if r.Method != method || n == 0 {
				return false
			}
			n--
			fail(w, r)
			return true
		})
	}
	unavailable := func(w http.ResponseWriter, r *http.Request) { problem(w, 503, client.CodeBackendUnavailable, 0) }
	hangUp := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(*recorder).ResponseWriter.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}

	t.Run("GET503", func(t *testing.T) {
		before := len(p.calls("GET"))
		failing("GET", 2, unavailable)
		if _, err := c.Get(ctx, cr.ID); err != nil {
			t.Fatal(err)
		}
		if n := len(p.calls("GET")) - before; n != 3 {
			t.Fatalf("%d calls", n)
		}
	})
	t.Run("GETTransport", func(t *testing.T) {
		failing("GET", 2, hangUp)
		if _, err := c.Events(ctx, cr.ID); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("GiveUp", func(t *testing.T) {
		before := len(p.calls("GET"))
		failing("GET", 100, unavailable)
		_, err := c.Get(ctx, cr.ID)
		wantErr(t, err, client.ErrBackendUnavailable, 503, client.CodeBackendUnavailable)
		if n := len(p.calls("GET")) - before; n != client.DefaultRetryPolicy().MaxAttempts {
			t.Fatalf("%d calls, want %d", n, client.DefaultRetryPolicy().MaxAttempts)
		}
	})
	t.Run("NotRetried", func(t *testing.T) {
		p.setInject(nil)
		before := len(p.calls("GET"))
		_, err := c.Get(ctx, "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a")
		wantErr(t, err, client.ErrNotFound, 404, client.CodeNotFound)
		if n := len(p.calls("GET")) - before; n != 1 {
			t.Fatalf("a 404 was tried %d times", n)
		}
		x := mustCreate(t, c, "statement.export")
		before = len(p.calls("DELETE"))
		failing("DELETE", 1, unavailable)
		wantErr(t, c.Delete(ctx, x.ID), client.ErrBackendUnavailable, 503, client.CodeBackendUnavailable)
		if n := len(p.calls("DELETE")) - before; n != 1 {
			t.Fatalf("DELETE tried %d times", n)
		}
	})
	t.Run("POSTLostAnswer", func(t *testing.T) {
		// The service applies the create, but its answer is lost: the retry
		// carries the same key, and the replay names the same request.
		var mu sync.Mutex
		lost := 1
		p.setInject(func(w http.ResponseWriter, r *http.Request) bool {
			mu.Lock()
			defer mu.Unlock()
			if r.Method != "POST" || lost == 0 {
				return false
			}
			lost--
			p.rp.ServeHTTP(httptest.NewRecorder(), r)
			hangUp(w, r)
			return true
		})
		before := len(p.calls("POST"))
		x, err := c.Create(ctx, client.CreateParams{Type: "lost.answer"})
		if err != nil {
			t.Fatal(err)
		}
		posts := p.calls("POST")[before:]
		if len(posts) != 2 || posts[0].Req.Get("Idempotency-Key") == "" ||
			posts[0].Req.Get("Idempotency-Key") != posts[1].Req.Get("Idempotency-Key") {
			t.Fatalf("posts: %+v", posts)
		}
		n := 0
		for r, err := range c.List(ctx, client.ListOptions{Type: "lost.answer"}) {
			if err != nil || r.ID != x.ID {
				t.Fatalf("%+v %v", r, err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("%d requests made", n)
		}
		// A transition's lost answer, likewise: one heartbeat, one version.
		mu.Lock()
		lost = 1
		mu.Unlock()
		r, err := c.MarkProcessing(ctx, x.ID, nil)
		if err != nil || r.Version != 2 {
			t.Fatalf("processing after a lost answer: %+v %v", r, err)
		}
		p.setInject(nil)
		// Two calls without a caller's key carry different keys.
		for range 2 {
			if _, err := c.MarkProcessing(ctx, x.ID, nil); err != nil {
				t.Fatal(err)
			}
		}
		posts = p.calls("POST")
		k1, k2 := posts[len(posts)-1].Req.Get("Idempotency-Key"), posts[len(posts)-2].Req.Get("Idempotency-Key")
		if k1 == k2 {
			t.Fatal("two calls shared a key")
		}
		if r, _ := c.Get(ctx, x.ID); r.Version != 4 {
			t.Fatalf("version %d after three heartbeats", r.Version)
		}
	})
	t.Run("POST503Retried", func(t *testing.T) {
		before := len(p.calls("POST"))
		failing("POST", 2, unavailable)
		if _, err := c.Create(ctx, client.CreateParams{Type: "x"}); err != nil {
			t.Fatal(err)
		}
		if n := len(p.calls("POST")) - before; n != 3 {
			t.Fatalf("%d calls", n)
		}
	})
}

func TestWebhooks(t *testing.T) {
	eachBackend(t, serviceOptions{}, func(t *testing.T, s *service) {
		ctx := context.Background()
		got := make(chan http.Header, 10)
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
		defer recv.Close()
		c := s.client(t, "admin")
		w, err := c.RegisterWebhook(ctx, client.WebhookParams{URL: recv.URL + "/hook", Description: "test"})
		if err != nil || w.ID == "" || !strings.HasPrefix(w.Secret, "whsec_") || len(w.Events) != 4 || w.Description != "test" {
			t.Fatalf("register: %+v %v", w, err)
		}
		list, err := c.ListWebhooks(ctx)
		if err != nil || len(list) != 1 || list[0].ID != w.ID || list[0].Secret != "" {
			t.Fatalf("list: %+v %v", list, err)
		}
		one, err := c.GetWebhook(ctx, w.ID)
		if err != nil || one.URL != recv.URL+"/hook" || one.Secret != "" {
			t.Fatalf("get: %+v %v", one, err)
		}
		cr := mustCreate(t, c, "statement.export")
		if _, err := c.Complete(ctx, cr.ID, &client.Confirmation{Confirmed: true}); err != nil {
			t.Fatal(err)
		}
		select {
		case h := <-got:
			if h.Get("webhook-signature") == "" {
				t.Fatalf("delivery headers %v", h)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
		}
		var ds []client.Delivery
		for deadline := time.Now().Add(10 * time.Second); len(ds) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if ds, err = c.WebhookDeliveries(ctx, w.ID); err != nil {
				t.Fatal(err)
			}
		}
		if len(ds) != 1 || ds[0].RequestID != cr.ID || ds[0].EventType != client.EventSucceeded || ds[0].State != "delivered" ||
			ds[0].HTTPStatus == nil || *ds[0].HTTPStatus != 200 || ds[0].Attempt != 1 {
			t.Fatalf("deliveries: %+v", ds)
		}
		_, err = s.client(t, "rw").ListWebhooks(ctx)
		wantErr(t, err, client.ErrForbidden, 403, client.CodeForbidden)
		if err := c.DeleteWebhook(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		_, err = c.GetWebhook(ctx, w.ID)
		wantErr(t, err, client.ErrNotFound, 404, client.CodeNotFound)
	})
}
