package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/problem"
)

// Store is what the console needs of the request store. Every call names one
// tenant (one cluster slot) or none; pages over many tenants make one call per
// tenant.
type Store interface {
	Tenants(ctx context.Context) ([]string, error)
	TenantSummary(ctx context.Context, tenant string) (domain.TenantSummary, error)
	// ReadTenantPage is List and TenantSummary of f.Tenant and, when
	// sessionDigest is not "", ConsoleSession(sessionDigest), in about the
	// time of List alone.
	ReadTenantPage(ctx context.Context, f domain.ListFilter, sessionDigest string) (domain.TenantPage, error)
	List(ctx context.Context, f domain.ListFilter) (*domain.ListPage, error)
	Poll(ctx context.Context, p domain.PollParams) (domain.PollResult, error)
	Cancel(ctx context.Context, p domain.TransitionParams, in domain.CancelInput) (*domain.Request, error)
	DeleteBy(ctx context.Context, tenant, id, by string) error
	SetFrozen(ctx context.Context, tenant string, frozen bool) error
	Webhooks(ctx context.Context, c domain.Call) ([]domain.Webhook, error)
	WebhookDeliveries(ctx context.Context, c domain.Call, id string) ([]domain.WebhookDelivery, error)
	ListKeys(ctx context.Context, tenant string) ([]domain.APIKey, error)
	ListOperatorKeys(ctx context.Context) ([]domain.APIKey, error)
	RevokeKey(ctx context.Context, id string) error

	SaveConsoleSession(ctx context.Context, digest string, s domain.ConsoleSession) error
	ConsoleSession(ctx context.Context, digest string) (domain.ConsoleSession, error)
	DeleteConsoleSession(ctx context.Context, digest string) error
	SaveSignInToken(ctx context.Context, digest, keyID string, ttl time.Duration) error
	TakeSignInToken(ctx context.Context, digest string) (string, error)
}

// Authenticator checks console credentials (internal/auth).
type Authenticator interface {
	// ConsoleKey accepts an operator key or a tenant admin key.
	ConsoleKey(ctx context.Context, plain string) (domain.APIKey, error)
	// KeyByID tells whether a key still exists (cached for auth.key_cache_ttl).
	KeyByID(ctx context.Context, id string) (domain.APIKey, bool, error)
}

// Options configure the console.
type Options struct {
	// SessionTTL: how long a session lasts after sign-in. default: 8h.
	SessionTTL time.Duration
	// Config is the effective configuration, secrets already masked, as shown
	// on the configuration page. default: none.
	Config []byte
	// Gatherer is the service's own metrics registry, for the figures page.
	// default: nil, no figures.
	Gatherer prometheus.Gatherer
	// Watcher wakes a request's live view at each change (the store's
	// notification hub). default: nil, the view re-reads every LiveInterval.
	Watcher Watcher
	// LiveInterval: how often a live view without a Watcher re-reads what it
	// shows, and how often the figures are sent. default: 1s.
	LiveInterval time.Duration
	// LiveMax bounds one live stream; the browser then reconnects. default: 10m.
	LiveMax time.Duration
	// Log receives one line per answer (method, path without its query, status,
	// duration, key id) and internal errors. default: slog.Default().
	Log *slog.Logger
	// Now is the clock. default: time.Now.
	Now func() time.Time
}

// Server is the console.
type Server struct {
	st    Store
	auth  Authenticator
	opts  Options
	log   *slog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
	figs  *sampler
	seen  seenSessions
	bufs  buffers
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// New builds the console and registers its routes.
func New(st Store, a Authenticator, o Options) (*Server, error) {
	if o.SessionTTL <= 0 {
		o.SessionTTL = defaults.ConsoleSessionTTL
	}
	if o.LiveInterval <= 0 {
		o.LiveInterval = time.Second
	}
	if o.LiveMax <= 0 {
		o.LiveMax = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{st: st, auth: a, opts: o, log: o.Log, figs: newSampler(o.Gatherer, o.Now)}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Handler is the console's whole HTTP surface, security headers and access log
// included.
func (s *Server) Handler() http.Handler { return s.logged(s.secured(s.mux)) }

// Run samples the figures until ctx ends.
func (s *Server) Run(ctx context.Context) { s.figs.run(ctx) }

// routes registers every route; see docs/console.md for what each page shows.
func (s *Server) routes() {
	m := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	m.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	m.HandleFunc("GET /{$}", s.root)
	m.HandleFunc("GET /signin", s.signInPage)
	m.HandleFunc("POST /signin", s.signIn)
	m.HandleFunc("GET /signin/once", s.signInOnce)
	m.HandleFunc("POST /signout", s.session(s.signOut))

	m.HandleFunc("GET /tenants", s.operator(s.tenantsPage))
	m.HandleFunc("GET /figures", s.operator(s.figuresPage))
	m.HandleFunc("GET /figures/live", s.operator(s.figuresLive))
	m.HandleFunc("GET /config", s.operator(s.configPage))
	m.HandleFunc("GET /operator-keys", s.operator(s.operatorKeysPage))
	m.HandleFunc("GET /operator-keys/{key}/revoke", s.operator(s.confirmRevokeOperatorKey))
	m.HandleFunc("POST /operator-keys/{key}/revoke", s.operator(s.revokeOperatorKey))
	m.HandleFunc("GET /t/{tenant}/freeze", s.operatorTenant(s.confirmFreeze(true)))
	m.HandleFunc("POST /t/{tenant}/freeze", s.operatorTenant(s.freeze(true)))
	m.HandleFunc("GET /t/{tenant}/unfreeze", s.operatorTenant(s.confirmFreeze(false)))
	m.HandleFunc("POST /t/{tenant}/unfreeze", s.operatorTenant(s.freeze(false)))

	m.HandleFunc("GET /t/{tenant}/requests", s.tenantWith(s.requestsPage, readsOwnSession))
	m.HandleFunc("GET /t/{tenant}/requests/{id}", s.tenant(s.requestPage))
	m.HandleFunc("GET /t/{tenant}/requests/{id}/live", s.tenant(s.requestLive))
	m.HandleFunc("GET /t/{tenant}/requests/{id}/cancel", s.tenant(s.confirmRequestAction("cancel")))
	m.HandleFunc("POST /t/{tenant}/requests/{id}/cancel", s.tenant(s.cancelRequest))
	m.HandleFunc("GET /t/{tenant}/requests/{id}/delete", s.tenant(s.confirmRequestAction("delete")))
	m.HandleFunc("POST /t/{tenant}/requests/{id}/delete", s.tenant(s.deleteRequest))
	m.HandleFunc("GET /t/{tenant}/webhooks", s.tenant(s.webhooksPage))
	m.HandleFunc("GET /t/{tenant}/webhooks/{id}", s.tenant(s.deliveriesPage))
	m.HandleFunc("GET /t/{tenant}/keys", s.tenant(s.keysPage))
	m.HandleFunc("GET /t/{tenant}/keys/{key}/revoke", s.tenant(s.confirmRevokeKey))
	m.HandleFunc("POST /t/{tenant}/keys/{key}/revoke", s.tenant(s.revokeKey))

	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.notFound(w, r, nil) })
	s.mux = m
}

// contentSecurityPolicy allows nothing from elsewhere: scripts, styles and
// images from the console itself only, no inline script (none is used, so no
// nonce is needed), no eval, no framing, forms posting back to the console.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secured sets the security headers of docs/reference.md §14 on every answer, and refuses
// a state-changing request that another origin sent (the CSRF token is the
// main defence; this one costs nothing).
func (s *Server) secured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: under no-referrer browsers send
		// "Origin: null" with forms, which the origin check below must refuse
		h.Set("Referrer-Policy", "same-origin")
		if r.Method == http.MethodPost {
			if o := r.Header.Get("Origin"); o != "" && o != origin(r) {
				s.refuse(w, r, http.StatusForbidden, "FORBIDDEN", "This form came from another site.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// origin is the console's own origin as this request reached it.
func origin(r *http.Request) string {
	if secure(r) {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// secure reports whether the browser sees the console over https: directly,
// or behind a TLS-terminating proxy that says so (it only adds Secure to the
// cookies, so trusting the header costs nothing).
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// statusWriter remembers the status for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
	keyID  string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets event streams through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logged writes one line per answer. The path is logged without its query
// (a one-time sign-in token travels in one) and no header is logged.
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.opts.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		s.log.Info("console", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"duration_ms", float64(s.opts.Now().Sub(start).Microseconds())/1000, "key_id", sw.keyID)
	})
}

// failed answers a store error as a page, with the status the API answers its
// code with (internal/problem).
func (s *Server) failed(w http.ResponseWriter, r *http.Request, v *view, err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		s.log.Error("console: internal error", "path", r.URL.Path, "err", err)
		s.refuse(w, r, http.StatusInternalServerError, "INTERNAL", "Internal error.")
		return
	}
	switch de.Code {
	case domain.NotFound:
		s.notFound(w, r, v)
		return
	case domain.BackendUnavailable:
		s.log.Warn("console: backend unavailable", "path", r.URL.Path, "err", de.Err)
		w.Header().Set("Retry-After", "1")
	}
	info, _ := problem.For(de.Code)
	s.refuseAs(w, r, v, info.Status, string(de.Code), de.Message)
}

// notFound is the one "not found" page: unknown, malformed, another tenant's
// and deleted ids all get exactly this.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request, v *view) {
	s.refuseAs(w, r, v, http.StatusNotFound, "NOT_FOUND", "There is nothing here, or you may not see it.")
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	s.refuseAs(w, r, nil, status, code, detail)
}

func (s *Server) refuseAs(w http.ResponseWriter, r *http.Request, v *view, status int, code, detail string) {
	if v == nil {
		v = &view{}
	}
	// the refusal page names no tenant: nothing on it may depend on what the id was
	page := &view{Session: v.Session, CSRF: v.CSRF, Title: http.StatusText(status)}
	page.Data = map[string]any{"Status": status, "Code": code, "Detail": detail}
	s.render(w, r, status, "error", page)
}
