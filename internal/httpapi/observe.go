package httpapi

import (
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
)

// routeKey names a registered route.
type routeKey struct{ method, path string }

// transitionOf maps the routes that change a request's status to the transition
// label and target status counted when they answer successStatus.
var transitionOf = map[routeKey]struct {
	name, to      string
	successStatus int
}{
	{fiber.MethodPost, "/v1/requests"}:                {metrics.TransitionCreate, string(domain.StatusQueued), fiber.StatusAccepted},
	{fiber.MethodPost, "/v1/requests/:id/processing"}: {metrics.TransitionProcessing, string(domain.StatusProcessing), fiber.StatusOK},
	{fiber.MethodPost, "/v1/requests/:id/complete"}:   {metrics.TransitionComplete, string(domain.StatusSucceeded), fiber.StatusOK},
	{fiber.MethodPost, "/v1/requests/:id/fail"}:       {metrics.TransitionFail, string(domain.StatusFailed), fiber.StatusOK},
	{fiber.MethodPost, "/v1/requests/:id/cancel"}:     {metrics.TransitionCancel, string(domain.StatusCancelled), fiber.StatusOK},
}

// observer is the state of the observe middleware, built on the first answer
// (when every route is registered) and read-only after.
type observer struct {
	once      sync.Once
	routes    map[routeKey]*routeObs // every registered (non-middleware) route
	unmatched map[string]*routeObs   // by method label
}

// routeObs is what observe needs of one route, resolved once: its labels, its
// metric series and the transition it counts, if any.
type routeObs struct {
	route, method string
	series        *metrics.RouteSeries
	transition    interface{ Inc() } // nil: the route is not a transition
	successStatus int                // the status at which transition counts
}

func (s *Server) buildObserver() {
	m := s.opts.Metrics
	obs := func(method, route string) *routeObs {
		o := &routeObs{route: route, method: method, series: m.RouteSeries(method, route)}
		if t, ok := transitionOf[routeKey{method, route}]; ok && m != nil {
			o.transition, o.successStatus = m.TransitionCounter(t.name, t.to), t.successStatus
		}
		return o
	}
	s.obs.routes = map[routeKey]*routeObs{}
	for _, r := range s.app.GetRoutes(true) {
		s.obs.routes[routeKey{r.Method, r.Path}] = obs(r.Method, r.Path)
	}
	s.obs.unmatched = map[string]*routeObs{}
	for _, k := range methodLabels() {
		s.obs.unmatched[k] = obs(k, metrics.Unmatched)
	}
	s.obs.unmatched["other"] = obs("other", metrics.Unmatched)
}

// observing tells whether the observe middleware has anything to do.
func (s *Server) observing() bool { return s.opts.Metrics != nil || s.opts.AccessLog != nil }

// observe counts every answer in the metrics and writes its access-log line. It
// runs the error handler itself, as Fiber's logger does, so that it sees the
// status of error answers; Fiber then has no error left to handle.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	st := s.state(c)
	st.start = start
	finished := false
	defer func() {
		if !finished { // a panic on its way to the recover middleware, which answers 500
			s.record(c, start, fiber.StatusInternalServerError)
		}
	}()
	s.answerError(c, c.Next())
	finished = true
	if !st.parked {
		s.record(c, start, c.Response().StatusCode())
	}
	return nil
}

// record writes the metrics and the log line of one answer.
func (s *Server) record(c *fiber.Ctx, start time.Time, status int) {
	s.recordRoute(c, s.routeOf(c), start, status)
}

// recordRoute is record for route o: a parked long poll's answer is written
// on a context of its own, which was never routed (park.go).
func (s *Server) recordRoute(c *fiber.Ctx, o *routeObs, start time.Time, status int) {
	now := time.Now() // the duration's end and the access line's time: one clock read
	d := now.Sub(start)
	route, method := o.route, o.method
	o.series.Observe(status, d)
	if o.transition != nil && status == o.successStatus {
		o.transition.Inc()
	}
	if l := s.opts.AccessLog; l != nil {
		st := s.state(c)
		p := st.principal
		line := accessLine{method: method, route: route, status: status, duration: d, requestID: st.id,
			tenant: p.Tenant, keyID: p.KeyID, code: string(st.problem), hasCode: st.hasProblem}
		if line.keyID == "" && p.PollTokenFor != "" {
			line.keyID = "poll_token"
		}
		writeAccessLine(c.UserContext(), l, now, &line)
	}
}

// routeOf is the matched route pattern and method for labels: constant strings
// only (Fiber's own method and path strings are reused between requests), and
// metrics.Unmatched when no route matched (404, 405), never the raw path.
func (s *Server) routeOf(c *fiber.Ctx) *routeObs {
	s.obs.once.Do(s.buildObserver)
	r := c.Route()
	// A request no route matched reports the last middleware it passed
	// (app.Use, path "/"), which is not the root route GET / for another path.
	if r.Path == "/" && c.Path() != "/" {
		return s.obs.unmatched[methodLabel(c.Method())]
	}
	if o, ok := s.obs.routes[routeKey{r.Method, r.Path}]; ok {
		return o
	}
	return s.obs.unmatched[methodLabel(c.Method())]
}

// methodLabels are the methods Fiber accepts.
func methodLabels() [9]string {
	return [...]string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodDelete,
		fiber.MethodConnect, fiber.MethodOptions, fiber.MethodTrace, fiber.MethodPatch}
}

// methodLabel maps a method to a constant string (Fiber accepts only these).
func methodLabel(m string) string {
	for _, k := range methodLabels() {
		if m == k {
			return k
		}
	}
	return "other"
}

// countProblem counts the refusals that have their own metrics and keeps the
// code for the access log. errorHandler calls it for every error answer.
func (s *Server) countProblem(c *fiber.Ctx, code domain.Code) {
	switch code {
	case domain.PolledTooEarly:
		s.opts.Metrics.Throttled(metrics.ReasonPolledTooEarly)
	case domain.RateLimited:
		s.opts.Metrics.Throttled(metrics.ReasonRateLimited)
	case domain.BackendUnavailable:
		s.opts.Metrics.BackendUnavailable()
	}
	if s.opts.AccessLog != nil {
		st := s.state(c)
		st.problem, st.hasProblem = code, true
	}
}

// metricsHandler serves /metrics in the Prometheus text format.
func (s *Server) metricsHandler() fiber.Handler {
	return adaptor.HTTPHandler(s.opts.Metrics.Handler())
}
