package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/valyala/fasthttp"

	"github.com/asyncstatus/asyncstatus/internal/buildinfo"
	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// Requests is what the HTTP layer needs of the request store. Every call
// carries the caller's domain.Call (call, middleware.go): the store counts
// it on the rate limits when it counts that scope (CountsRateLimits) and
// writes what it counted through Call.Rate.
type Requests interface {
	Create(ctx context.Context, p domain.CreateParams) (*domain.Request, bool, error)
	Poll(ctx context.Context, p domain.PollParams) (domain.PollResult, error)
	// ReadEvents reads a request with its events, counted as Poll is.
	ReadEvents(ctx context.Context, p domain.PollParams) (domain.PollResult, error)
	List(ctx context.Context, f domain.ListFilter) (*domain.ListPage, error)
	// Counts counts f.Tenant's requests by status under f's type, label
	// selector (one term) and time bounds, counted as List is.
	Counts(ctx context.Context, f domain.ListFilter) (domain.StatusCounts, error)
	MarkProcessing(ctx context.Context, p domain.TransitionParams, in domain.ProgressInput) (*domain.Request, error)
	Complete(ctx context.Context, p domain.TransitionParams, in domain.CompleteInput) (*domain.Request, error)
	Fail(ctx context.Context, p domain.TransitionParams, in domain.FailInput) (*domain.Request, error)
	Cancel(ctx context.Context, p domain.TransitionParams, in domain.CancelInput) (*domain.Request, error)
	// Remove deletes a request; p.By (the caller's key id) goes into the audit trail.
	Remove(ctx context.Context, p domain.TransitionParams) error
	Ready(ctx context.Context) error
	// CountsRateLimits reports whether the store counts the calls of scope
	// against the rate limits itself, in the call's own round trip (on the
	// Call's Credential). Those routes then skip the RateLimiter: the store's
	// configuration is the one switch.
	CountsRateLimits(scope string) bool
}

// Webhooks is what the HTTP layer needs to manage webhook endpoints (docs/reference.md §10).
// Options.Webhooks nil turns the /v1/webhooks routes off (webhooks.enabled false).
type Webhooks interface {
	RegisterWebhook(ctx context.Context, c domain.Call, in domain.WebhookInput) (*domain.Webhook, error)
	ListWebhooks(ctx context.Context, c domain.Call) ([]domain.Webhook, error)
	Webhook(ctx context.Context, c domain.Call, id string) (*domain.Webhook, error)
	DeleteWebhook(ctx context.Context, c domain.Call, id string) error
	WebhookDeliveries(ctx context.Context, c domain.Call, id string) ([]domain.WebhookDelivery, error)
}

// Authenticator checks credentials.
type Authenticator interface {
	// APIKeyFrom authenticates a key sent from source (the client's address),
	// which bounds how many unknown keys one source may have looked up.
	APIKeyFrom(ctx context.Context, plain string, source netip.Addr) (domain.Principal, error)
	PollTokenPrincipal(token, id string) (domain.Principal, error)
	PollToken(tenant, id string) string
}

// RateLimiter counts the authenticated calls the store does not count itself
// (Requests.CountsRateLimits), and those of the routes it counts that were
// refused before their script counted them (authenticate); nil disables that.
// *ratelimit.Limiter is one.
// Allow may let a call through uncounted when its store fails (fail open); the
// read routes use it. Count answers the error instead; the write and admin
// routes use it and answer 503, so that no write passes uncounted.
type RateLimiter interface {
	Allow(ctx context.Context, tenant, credential, scope string) ratelimit.Decision
	Count(ctx context.Context, tenant, credential, scope string) (ratelimit.Decision, error)
}

// Options configure the server.
type Options struct {
	// PublicURL is the base of absolute URLs; "" derives it from each request.
	PublicURL string
	// TrustedProxies (IPs, CIDRs) may set the scheme and host of a derived
	// base with X-Forwarded-Proto and X-Forwarded-Host; nobody else can.
	// default: none.
	TrustedProxies []string
	// BodyLimitBytes: larger bodies answer 413. default: 1 MiB.
	BodyLimitBytes int
	// Limits on stored payloads.
	Limits domain.Limits
	// Schedule and ScheduleByType (whole seconds) bound the create answer's Retry-After.
	Schedule       []int
	ScheduleByType map[string][]int
	// ReadTimeout, WriteTimeout, IdleTimeout of connections.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// Metrics receives request, transition and refusal counts, and its registry is
	// served at /metrics. default: nil, nothing is counted and /metrics is empty.
	Metrics *metrics.Metrics
	// MetricsElsewhere: /metrics is served on a listener of its own
	// (metrics.addr), so this server does not serve it. default: false.
	MetricsElsewhere bool
	// Webhooks manages webhook endpoints; nil: the /v1/webhooks routes are not
	// served. default: nil.
	Webhooks Webhooks
	// AccessLog receives one line per request (method, route, status, duration,
	// request id, tenant, key id). default: nil, no access log; the error handler
	// still logs internal errors to the server's logger.
	AccessLog *slog.Logger
	// Build names the running build in /healthz's body. default: the zero
	// Info, whose members are then empty.
	Build buildinfo.Info
	// Waits follows requests for long polls (Prefer: wait) and event streams
	// (docs/reference.md §12; wait.go). default: nil, Prefer: wait is ignored and the
	// stream route is not served.
	Waits Waits
	// Wait tunes waiting.
	Wait WaitOptions
	// CORSOrigins are the origins allowed to call the API from a browser, "*"
	// for every one (docs/reference.md §13; cors.go). default: none, no CORS headers.
	CORSOrigins []string
	// AuditStatus, when set, says whether the audit sink takes lines; /readyz
	// shows it (and stays 200: a failing sink does not stop the service, its
	// entries wait in Redis). default: nil, /readyz says nothing of the audit.
	AuditStatus func() (ok bool, detail string)
	// Tracing, when set, runs first on every call: the server span of
	// docs/reference.md §17 (internal/tracing's Middleware). default: nil, no
	// tracing work.
	Tracing fiber.Handler

	// withoutLRO leaves out the routes of §15 (azure.go, google.go): the
	// baseline of the router-cost benchmark (lro_bench_test.go), set through
	// export_test.go.
	withoutLRO bool
}

// Server is the HTTP API.
type Server struct {
	app   *fiber.App
	reqs  Requests
	auth  Authenticator
	limit RateLimiter
	opts  Options
	// proxies are opts.TrustedProxies, parsed (source.go).
	proxies []netip.Prefix
	log     *slog.Logger
	json    jsonCodec
	obs     observer
	// ids makes request ids; states pools the per-request state (middleware.go).
	ids    *idSource
	states sync.Pool
	// bufs pools the buffers writeRequest encodes into; one larger than
	// maxPooledBuf (a request near the body limit) is left to the GC.
	bufs sync.Pool
	// held counts the wait slots taken (wait.go); stopping closes at StopWaits.
	held     atomic.Int64
	stopping chan struct{}
	stopOnce sync.Once
	clock    waitClock // ends held long polls (waitclock.go)
	shares   waitShares
	beats    beats // keep-alives and ends of streams (waitclock.go)
	// parkedWaits counts the parked long polls that have not answered yet (park.go).
	parkedWaits sync.WaitGroup
	parkMu      sync.Mutex // orders parkedWaits.Add before StopWaits' Wait
	cors        corsPolicy
}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// New builds the server and registers every route.
func New(reqs Requests, auth Authenticator, limit RateLimiter, opts Options, log *slog.Logger) *Server {
	if opts.BodyLimitBytes <= 0 {
		opts.BodyLimitBytes = defaults.BodyLimitBytes
	}
	if len(opts.Schedule) == 0 {
		opts.Schedule = defaults.PollScheduleSeconds()
	}
	if opts.Limits.ContextBytes <= 0 {
		opts.Limits.ContextBytes = defaults.ContextBytes
	}
	if opts.Limits.ResultBytes <= 0 {
		opts.Limits.ResultBytes = defaults.ResultBytes
	}
	if log == nil {
		log = slog.Default()
	}
	opts.Wait.defaults()
	s := &Server{reqs: reqs, auth: auth, limit: limit, opts: opts, log: log, ids: newIDSource(),
		stopping: make(chan struct{}), cors: newCORSPolicy(opts.CORSOrigins)}
	s.proxies = parseProxies(opts.TrustedProxies)
	s.clock.heartbeat = opts.Wait.Heartbeat
	s.beats.every = opts.Wait.Heartbeat
	s.states.New = func() any { return &reqState{} }
	s.bufs.New = func() any { b := make([]byte, 0, 2048); return &b }
	s.app = fiber.New(fiber.Config{
		AppName:               "asyncstatus",
		DisableStartupMessage: true,
		BodyLimit:             opts.BodyLimitBytes,
		ReadTimeout:           opts.ReadTimeout,
		WriteTimeout:          opts.WriteTimeout,
		IdleTimeout:           opts.IdleTimeout,
		ErrorHandler:          s.errorHandler,
		// Our own JSON error answers carry the request id; fasthttp's plain ones do not.
		DisableDefaultContentType: false,
		StrictRouting:             false,
		CaseSensitive:             true,
		// Bodies are read only when a route asks for them (edge.go): no
		// memory for a declared body before the caller is authenticated,
		// and no multipart parsing before any handler (it read whole
		// forms, into temporary files, and answered its errors itself).
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		// X-Forwarded-* only from the configured proxies (requestURL): any
		// client could otherwise choose the scheme and host of Location.
		EnableTrustedProxyCheck: true,
		TrustedProxies:          opts.TrustedProxies,
	})
	quietOnNothingRead(s.app.Server())
	// A parked long poll (park.go) owns its connection from the hijack on,
	// and gives it back with ServeConn or closes it.
	s.app.Server().KeepHijackedConns = true
	s.refuseUnknownMethods(s.app.Server())
	s.app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: func(c *fiber.Ctx, e any) {
		s.log.Error("panic", "panic", e, "path", c.Path())
	}}))
	s.routes()
	return s
}

// quietOnNothingRead makes a connection that delivered no request close without
// an answer. fasthttp answers the read error of a connection's first request
// even when not a byte arrived: a client that connected ahead of need and sat
// out http.read_timeout got an unsolicited 400, which it can take for the
// answer to the request it sends just then. fasthttp already closes quietly
// when a later request on a kept-alive connection never starts, and net/http
// never replies to a timed-out read.
//
// fasthttp v1.51 (serveConn) passes the socket's error on bare when nothing was
// read, and wraps it ("error when reading request headers: ...") when part of
// a header was, so a half-sent header still gets its 400. A body that stalls
// also comes bare, with the request already reset, so it cannot be told from
// silence and closes quietly too.
func quietOnNothingRead(fs *fasthttp.Server) {
	answer := fs.ErrorHandler
	fs.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
		if _, bare := err.(net.Error); bare {
			// fasthttp still writes its (empty) error answer after this
			// handler returns; on the closed connection that write fails,
			// unseen.
			_ = ctx.Conn().Close()
			return
		}
		answer(ctx, err)
	}
}

// App is the Fiber app (for Listen, Shutdown and app.Test).
func (s *Server) App() *fiber.App { return s.app }
