package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Requests is what the HTTP layer needs of the request store.
type Requests interface {
	Create(ctx context.Context, p domain.CreateParams) (*domain.Request, bool, error)
	Poll(ctx context.Context, tenant, id, caller string) (*domain.Request, int, error)
	Events(ctx context.Context, tenant, id string) ([]domain.Event, error)
	MarkProcessing(ctx context.Context, p domain.TransitionParams, in domain.ProgressInput) (*domain.Request, error)
	Complete(ctx context.Context, p domain.TransitionParams, in domain.CompleteInput) (*domain.Request, error)
	Fail(ctx context.Context, p domain.TransitionParams, in domain.FailInput) (*domain.Request, error)
	Cancel(ctx context.Context, p domain.TransitionParams, in domain.CancelInput) (*domain.Request, error)
	Delete(ctx context.Context, tenant, id string) error
	Ready(ctx context.Context) error
}

// Authenticator checks credentials.
type Authenticator interface {
	APIKey(ctx context.Context, plain string) (domain.Principal, error)
	PollTokenPrincipal(token, id string) (domain.Principal, error)
	PollToken(tenant, id string) string
}

// RateDecision is a rate limiter's answer.
type RateDecision struct {
	Allowed    bool
	Headers    map[string]string // RateLimit-* (and Retry-After when refused)
	RetryAfter int
}

// RateLimiter counts authenticated calls; nil disables rate limiting.
type RateLimiter interface {
	Allow(ctx context.Context, tenant, keyID, scope string) RateDecision
}

// Options configure the server.
type Options struct {
	// PublicURL is the base of absolute URLs; "" derives it from each request.
	PublicURL string
	// BodyLimitBytes: larger bodies answer 413. default: 1 MiB.
	BodyLimitBytes int
	// Limits on stored payloads.
	Limits domain.Limits
	// Schedule and ScheduleByType (whole seconds) bound the create answer's Retry-After.
	Schedule       []int
	ScheduleByType map[string][]int
	// ReadTimeout, WriteTimeout, IdleTimeout of connections.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// Server is the HTTP API.
type Server struct {
	app   *fiber.App
	reqs  Requests
	auth  Authenticator
	limit RateLimiter
	opts  Options
	log   *slog.Logger
	json  jsonCodec
}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// New builds the server and registers every route.
func New(reqs Requests, auth Authenticator, limit RateLimiter, opts Options, log *slog.Logger) *Server {
	if opts.BodyLimitBytes <= 0 {
		opts.BodyLimitBytes = 1 << 20
	}
	if len(opts.Schedule) == 0 {
		opts.Schedule = []int{1, 2, 5, 10, 30}
	}
	if opts.Limits.ContextBytes <= 0 {
		opts.Limits.ContextBytes = 4096
	}
	if opts.Limits.ResultBytes <= 0 {
		opts.Limits.ResultBytes = 16384
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{reqs: reqs, auth: auth, limit: limit, opts: opts, log: log}
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
	})
	s.app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: func(c *fiber.Ctx, e any) {
		s.log.Error("panic", "panic", e, "path", c.Path())
	}}))
	s.routes()
	return s
}

// App is the Fiber app (for Listen, Shutdown and app.Test).
func (s *Server) App() *fiber.App { return s.app }
