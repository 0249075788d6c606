package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/bench/yardstick"
	"github.com/asyncstatus/asyncstatus/internal/auth"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/httpapi/logbuf"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// ---- BenchmarkServer*: the HTTP server's own CPU per call against a yardstick ----
//
// Each benchmark runs two sub-benchmarks on the same machine in the same run:
//
//	yardstick:   a bare Fiber app doing what bench/baseline does around its Redis
//	             call (encoding/json of the representation, the same headers);
//	asyncstatus: the real server (requestID, observe with Prometheus metrics and
//	             the JSON access log, auth by a cached API key, the handler).
//
// Neither talks to Redis: the yardstick's HGETALL answer is a prebuilt map, the
// asyncstatus store is a fake returning the reference request
// (testdata/reference-request.json). What is left is the server-side
// CPU that is ours to cut. The access log is written to a file in b.TempDir()
// exactly as serve wires it to stderr (see accessLogWriter), so its write
// syscalls are paid as in production.
//
//	go test -run '^$' -bench BenchmarkServer -benchmem -count 5 ./internal/httpapi/

// referenceRequest is the reference request of the benchmark harness.
type referenceRequest struct {
	Create struct {
		Type     string          `json:"type"`
		Context  json.RawMessage `json:"context"`
		Estimate int             `json:"estimated_duration_seconds"`
	} `json:"create"`
	Processing json.RawMessage `json:"processing"`
	Complete   json.RawMessage `json:"complete"`
}

func loadReference(b *testing.B) (referenceRequest, []byte, []byte) {
	b.Helper()
	raw, err := os.ReadFile(testenv.ReferencePath(b))
	if err != nil {
		b.Fatal(err)
	}
	var all map[string]json.RawMessage
	var ref referenceRequest
	if err := json.Unmarshal(raw, &all); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		b.Fatal(err)
	}
	return ref, all["create"], all["complete"]
}

func compactJSON(b *testing.B, raw []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

const benchID = "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"

// benchRequests is a fake store returning the reference request in the state each
// call leaves it in.
type benchRequests struct {
	httpapi.Requests
	processing, queued, succeeded domain.Request
}

func newBenchRequests(b *testing.B, ref referenceRequest) *benchRequests {
	now := domain.Time{Time: time.Date(2026, 5, 4, 12, 0, 0, 123e6, time.UTC)}
	later := domain.Time{Time: now.Add(72 * time.Second)}
	ctxJSON := compactJSON(b, ref.Create.Context)
	var progress struct {
		Percent int    `json:"percent"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(ref.Processing, &progress); err != nil {
		b.Fatal(err)
	}
	var complete struct {
		ResultType string          `json:"result_type"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(ref.Complete, &complete); err != nil {
		b.Fatal(err)
	}
	q := domain.Request{ID: benchID, Type: ref.Create.Type, Status: domain.StatusQueued, Context: ctxJSON,
		CreatedBy: "key_abcdefghijklmnop", CreatedAt: now, UpdatedAt: now, Version: 1}
	p := q
	p.Status, p.Progress, p.UpdatedAt, p.Version = domain.StatusProcessing, compactJSON(b, ref.Processing), later, 2
	s := p
	s.Status, s.Done, s.ResultType, s.Result = domain.StatusSucceeded, true, complete.ResultType, compactJSON(b, complete.Result)
	s.CompletedAt, s.Version = &later, 3
	return &benchRequests{queued: q, processing: p, succeeded: s}
}

// CountsRateLimits: the benchmark's server runs without rate limits.
func (f *benchRequests) CountsRateLimits(string) bool { return false }

func (f *benchRequests) Poll(context.Context, domain.PollParams) (domain.PollResult, error) {
	r := f.processing
	return domain.PollResult{Request: &r, RetryAfter: 2}, nil
}

func (f *benchRequests) Create(context.Context, domain.CreateParams) (*domain.Request, bool, error) {
	r := f.queued
	return &r, true, nil
}

func (f *benchRequests) Complete(context.Context, domain.TransitionParams, domain.CompleteInput) (*domain.Request, error) {
	r := f.succeeded
	return &r, nil
}

// benchAsyncstatus is the production server over the fake store reqs: real
// Authenticator with a long key cache, metrics, and the JSON access log on a
// file; mod, when set, changes its options. It returns a key to call it with.
func benchAsyncstatus(b *testing.B, reqs httpapi.Requests, mod func(*httpapi.Options)) (*httpapi.Server, string) {
	b.Helper()
	keys := memKeys{m: map[string]domain.APIKey{}}
	plain, k, err := auth.NewKey("acme", domain.ScopeRead|domain.ScopeWrite, "bench", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	_ = keys.SaveKey(context.Background(), k)
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	w := accessLogWriter(b, tempFile(b))
	o := httpapi.Options{Metrics: m, AccessLog: newAccessLog(w)}
	if mod != nil {
		mod(&o)
	}
	a := auth.New(keys, []byte("0123456789abcdef0123456789abcdef"), time.Minute, time.Now)
	return httpapi.New(reqs, a, nil, o, slog.New(slog.NewJSONHandler(w, nil))), plain
}

// ---- the yardstick: bench/baseline's work around its Redis call ----

func ydRecord(r domain.Request) map[string]string {
	m := map[string]string{"type": r.Type, "status": string(r.Status), "context": string(r.Context), "created_by": r.CreatedBy,
		"created_at": strconv.FormatInt(r.CreatedAt.UnixMilli(), 10), "updated_at": strconv.FormatInt(r.UpdatedAt.UnixMilli(), 10),
		"version": strconv.FormatInt(r.Version, 10)}
	if r.Progress != nil {
		m["progress"] = string(r.Progress)
	}
	if r.Result != nil {
		m["result"], m["result_type"] = string(r.Result), r.ResultType
		m["completed_at"] = strconv.FormatInt(r.CompletedAt.UnixMilli(), 10)
	}
	return m
}

// benchYardstick is bench/baseline's app with HGETALL answered from memory.
func benchYardstick(f *benchRequests) fasthttp.RequestHandler {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	processing, succeeded := ydRecord(f.processing), ydRecord(f.succeeded)
	app.Get("/v1/requests/:id", func(c *fiber.Ctx) error {
		id := c.Params("id")
		return yardstick.Write(c, fiber.StatusOK, yardstick.FromMap(id, processing))
	})
	app.Post("/v1/requests", func(c *fiber.Ctx) error {
		var in struct {
			Type     string          `json:"type"`
			Context  json.RawMessage `json:"context"`
			Estimate int             `json:"estimated_duration_seconds"`
		}
		if err := json.Unmarshal(c.Body(), &in); err != nil || in.Type == "" {
			return fiber.ErrBadRequest
		}
		var ctxJSON bytes.Buffer
		if err := json.Compact(&ctxJSON, in.Context); err != nil {
			return fiber.ErrBadRequest
		}
		u, err := uuid.NewV7()
		if err != nil {
			return err
		}
		id, now := u.String(), time.Now().UnixMilli()
		c.Set(fiber.HeaderLocation, c.BaseURL()+"/v1/requests/"+id)
		r := yardstick.Representation{ID: id, Type: in.Type, Status: "queued", CreatedBy: "bench", CreatedAt: yardstick.MsTime(now),
			UpdatedAt: yardstick.MsTime(now), Version: 1, Context: ctxJSON.Bytes()}
		return yardstick.Write(c, fiber.StatusAccepted, r)
	})
	app.Post("/v1/requests/:id/complete", func(c *fiber.Ctx) error {
		var in struct {
			ResultType string          `json:"result_type"`
			Result     json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(c.Body(), &in); err != nil || in.ResultType == "" {
			return fiber.ErrBadRequest
		}
		var result bytes.Buffer
		if err := json.Compact(&result, in.Result); err != nil {
			return fiber.ErrBadRequest
		}
		id := c.Params("id")
		_ = strconv.FormatInt(time.Now().UnixMilli(), 10) // the script's argument
		return yardstick.Write(c, fiber.StatusOK, yardstick.FromMap(id, succeeded))
	})
	return app.Handler()
}

// runServer calls h b.N times with one reused RequestCtx, as a fasthttp worker
// does, and reports the process CPU per call.
func runServer(b *testing.B, h fasthttp.RequestHandler, method, uri, key string, body []byte, want int) {
	b.Helper()
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	req.Header.SetHost("asyncstatus.test")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testenv.ProcessCPU()
	for range b.N {
		// what a fasthttp server does between two requests on a connection: the
		// user values hold Fiber's Locals (request id, principal)
		ctx.ResetUserValues()
		ctx.Response.Reset()
		h(&ctx)
		if code := ctx.Response.StatusCode(); code != want {
			b.Fatalf("%s %s answered %d: %s", method, uri, code, ctx.Response.Body())
		}
	}
	b.ReportMetric(float64(testenv.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

func benchPair(b *testing.B, method, uri string, body func(ref referenceRequest, create, complete []byte) []byte, want, ydWant int) {
	ref, create, complete := loadReference(b)
	f := newBenchRequests(b, ref)
	bd := body(ref, create, complete)
	b.Run("yardstick", func(b *testing.B) {
		runServer(b, benchYardstick(f), method, uri, "", bd, ydWant)
	})
	b.Run("asyncstatus", func(b *testing.B) {
		srv, key := benchAsyncstatus(b, f, nil)
		runServer(b, srv.App().Handler(), method, uri, key, bd, want)
	})
}

// BenchmarkServerPoll: GET /v1/requests/{id} by a cached API key, the request processing.
func BenchmarkServerPoll(b *testing.B) {
	benchPair(b, "GET", "/v1/requests/"+benchID, func(referenceRequest, []byte, []byte) []byte { return nil }, 200, 200)
}

// BenchmarkServerCreate: POST /v1/requests with the reference create body.
func BenchmarkServerCreate(b *testing.B) {
	benchPair(b, "POST", "/v1/requests", func(_ referenceRequest, create, _ []byte) []byte { return create }, 202, 202)
}

// BenchmarkServerComplete: POST /v1/requests/{id}/complete with the reference result.
func BenchmarkServerComplete(b *testing.B) {
	benchPair(b, "POST", "/v1/requests/"+benchID+"/complete", func(_ referenceRequest, _, complete []byte) []byte { return complete }, 200, 200)
}

// accessLogWriter is what serve puts between the access log's handler and
// stderr: a logbuf.Writer with its flush interval and size.
func accessLogWriter(b *testing.B, f *os.File) io.Writer {
	w := logbuf.New(f, 100*time.Millisecond, 64<<10)
	b.Cleanup(func() { w.Close() })
	return w
}

// newAccessLog is the access log serve makes for the JSON format.
func newAccessLog(w io.Writer) *slog.Logger { return httpapi.NewAccessLog(w, &slog.HandlerOptions{}) }
