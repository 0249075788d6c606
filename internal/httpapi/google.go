package httpapi

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/metrics"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// Google Operations (docs/reference.md §15; AIP-151 and the REST bindings of
// google.longrunning.Operations): the requests of the caller's tenant as
// Operations named "operations/{id}", with the same credentials, scopes,
// pacing, rate limits and 404s as §4, and errors as AIP-193 JSON.
//
// The custom verbs are routes of their own (routes.go): in `:id\:cancel`
// Fiber matches the escaped colon literally and ends the parameter before it.

// googlePath reports whether path is under /v1/operations, whose every error
// answer, those refused before any route too (a body over the limit), is an
// AIP-193 error (writeGoogleError) rather than a problem.
func googlePath(path string) bool {
	const p = "/v1/operations"
	return strings.HasPrefix(path, p) && (len(path) == len(p) || path[len(p)] == '/')
}

// getOperation answers GET /v1/operations/{id}: a poll in the Operation view.
func (s *Server) getOperation(c *fiber.Ctx) error { return s.pollAs(c, viewOperation) }

// emptyMessage is google.protobuf.Empty, the answer of cancel and delete.
var emptyMessage = []byte("{}")

func sendEmpty(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(emptyMessage)
}

// operationCall reads the body of :cancel or :wait; a name in it must be the
// path's.
func (s *Server) operationCall(c *fiber.Ctx, wait bool) (wire.OperationCall, error) {
	body, err := s.jsonBody(c)
	if err != nil {
		return wire.OperationCall{}, err
	}
	in, err := wire.DecodeOperationCall(body, wait)
	if err != nil {
		return in, err
	}
	if in.Name != "" && in.Name != wire.OperationPrefix+c.Params("id") {
		return in, &domain.Error{Code: domain.ValidationFailed, Message: "The request body is not valid.",
			Fields: []domain.FieldError{{Field: "name", Message: "must be the operation's name in the path, or absent"}}}
	}
	return in, nil
}

// cancelOperation answers POST /v1/operations/{id}:cancel: the cancel of §4;
// an operation already cancelled answers as if this call had cancelled it,
// another ended one FAILED_PRECONDITION.
func (s *Server) cancelOperation(c *fiber.Ctx) error {
	if _, err := s.operationCall(c, false); err != nil {
		return err
	}
	ik, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	tp := domain.TransitionParams{Call: s.call(c), ID: pathID(c), IdemKey: ik}
	_, err = s.reqs.Cancel(c.UserContext(), tp, domain.CancelInput{})
	if err != nil {
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.AlreadyTerminal && de.Request != nil && de.Request.Status == domain.StatusCancelled {
			return sendEmpty(c)
		}
		return err
	}
	if ctr := s.opts.Metrics.TransitionCounter(metrics.TransitionCancel, string(domain.StatusCancelled)); ctr != nil {
		ctr.Inc()
	}
	return sendEmpty(c)
}

// deleteOperation answers DELETE /v1/operations/{id}: the delete of §4.
func (s *Server) deleteOperation(c *fiber.Ctx) error {
	err := s.reqs.Remove(c.UserContext(), domain.TransitionParams{Call: s.call(c), ID: pathID(c)})
	if err != nil {
		return err
	}
	return sendEmpty(c)
}

// waitOperation answers POST /v1/operations/{id}:wait: the operation once it
// is done, or as it is when the timeout (clamped as Prefer: wait; wait.max
// when not given) passes. Unlike a long poll it does not end on a change that
// leaves the request running. It holds its handler (a :wait is rarer than a
// poll; parking is for those), counts as a held wait, and answers at once, as
// an ordinary paced read, when no wait can be held.
func (s *Server) waitOperation(c *fiber.Ctx) error {
	in, err := s.operationCall(c, true)
	if err != nil {
		return err
	}
	secs := int(s.opts.Wait.Max / time.Second)
	if in.HasTimeout {
		secs = int(min((in.Timeout+time.Second-1)/time.Second, s.opts.Wait.Max/time.Second))
	}
	applied := s.appliedWait(secs)
	if s.opts.Waits == nil {
		return s.pacedPoll(c, viewOperation)
	}
	wa, sl, err := s.watch(c)
	if err != nil {
		return err
	}
	if sl == nil {
		return s.pacedPoll(c, viewOperation)
	}
	s.opts.Metrics.LongPollHeld(1)
	r, err := s.waitDone(c, wa, time.Duration(applied)*time.Second)
	wa.Close()
	s.releaseSlot(sl)
	s.opts.Metrics.LongPollHeld(-1)
	if err != nil {
		return err
	}
	if !r.Done {
		retryAfter(c, 0) // the caller may wait again at once
	}
	return s.writeView(c, viewOperation, r)
}

// waitDone reads the request once the watch is live, then follows it until it
// is done, d passes or the server stops.
func (s *Server) waitDone(c *fiber.Ctx, wa domain.Watch, d time.Duration) (*domain.Request, error) {
	r, err := s.firstRead(c)
	if err != nil || r.Done {
		return r, err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case snap := <-wa.Changes():
			if snap.Err != nil {
				if domain.ErrorCode(snap.Err) == domain.NotFound {
					return nil, snap.Err
				}
				continue // a re-read that failed: the last read decides
			}
			if snap.Request.Done {
				return snap.Request, nil
			}
		case <-t.C:
			return s.lastRead(wa)
		case <-s.stopping:
			return s.lastRead(wa)
		}
	}
}

// listOperations answers GET /v1/operations: a page of the caller's tenant's
// requests, newest first, as Operations, through the list of §4. Query
// parameters other than filter, pageSize and pageToken are ignored: Google's
// clients add their own ($alt, $prettyPrint).
func (s *Server) listOperations(c *fiber.Ctx) error {
	q := c.Context().QueryArgs()
	f := domain.ListFilter{Limit: domain.DefaultListLimit, Cursor: string(q.Peek("pageToken"))}
	var bad []domain.FieldError
	if q.Has("pageSize") {
		raw := string(q.Peek("pageSize"))
		n, err := strconv.Atoi(raw)
		switch {
		case !allIn(raw, isDigit) || err == nil && n < 1:
			bad = append(bad, domain.FieldError{Field: "pageSize", Message: "must be a positive integer"})
		case err != nil || n > domain.MaxListLimit: // above 200 (or past int) means 200
			f.Limit = domain.MaxListLimit
		default:
			f.Limit = n
		}
	}
	empty, err := parseOperationFilter(string(q.Peek("filter")), &f)
	if err != nil {
		bad = append(bad, domain.FieldError{Field: "filter", Message: err.Error()})
	}
	if len(bad) > 0 {
		return &domain.Error{Code: domain.ValidationFailed, Message: "The query is not valid.", Fields: bad}
	}
	var page *domain.ListPage
	if empty {
		page = &domain.ListPage{} // terms no request can meet, such as done = true AND metadata.status = "queued"
	} else {
		f.Call = s.call(c)
		page, err = s.reqs.List(c.UserContext(), f)
		if err != nil {
			return err
		}
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	b := append((*bp)[:0], `{"operations":[`...)
	for i, r := range page.Items {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = wire.AppendOperation(b, r); err != nil {
			return err
		}
	}
	b = append(b, ']')
	if page.NextCursor != "" {
		tok, _ := json.Marshal(page.NextCursor)
		b = append(append(b, `,"nextPageToken":`...), tok...)
	}
	b = append(b, '}')
	if cap(b) <= maxPooledBuf {
		*bp = b
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b) // copies
}

// filterError says what is wrong with a filter.
type filterError string

func (e filterError) Error() string { return string(e) }

// parseOperationFilter reads the AIP-160 subset of §15 into f: terms
// `done = true|false`, `metadata.type = "T"` and `metadata.status = "S"`
// (values quoted or bare), joined by AND. empty: the terms contradict each
// other, so that no request matches.
func parseOperationFilter(filter string, f *domain.ListFilter) (empty bool, _ error) {
	toks, err := filterTokens(filter)
	if err != nil {
		return false, err
	}
	if len(toks) == 0 {
		return false, nil
	}
	var allowed []domain.Status // nil: any
	restrict := func(to []domain.Status) {
		if allowed == nil {
			allowed = to
			return
		}
		allowed = slices.DeleteFunc(allowed, func(s domain.Status) bool { return !slices.Contains(to, s) })
		if allowed == nil {
			allowed = []domain.Status{}
		}
	}
	for i := 0; ; i += 4 {
		if i+3 > len(toks) || toks[i+1].text != "=" || toks[i].quoted || toks[i+1].quoted {
			return false, filterError(`terms are FIELD = VALUE joined by AND; fields: done, metadata.type, metadata.status`)
		}
		field, value := toks[i].text, toks[i+2]
		switch field {
		case "done":
			switch {
			case value.text == "true" && !value.quoted:
				restrict([]domain.Status{domain.StatusCancelled, domain.StatusExpired, domain.StatusFailed, domain.StatusSucceeded})
			case value.text == "false" && !value.quoted:
				restrict([]domain.Status{domain.StatusProcessing, domain.StatusQueued})
			default:
				return false, filterError("done takes true or false")
			}
		case "metadata.type":
			if !domain.ValidType(value.text) {
				return false, filterError("metadata.type must match " + domain.TypePattern)
			}
			if f.Type != "" && f.Type != value.text {
				empty = true
			}
			f.Type = value.text
		case "metadata.status":
			st := domain.Status(value.text)
			if !st.Valid() {
				return false, filterError("metadata.status must be one of queued, processing, succeeded, failed, cancelled, expired")
			}
			restrict([]domain.Status{st})
		default:
			return false, filterError("unknown field " + strconv.Quote(field) + "; fields: done, metadata.type, metadata.status")
		}
		if i+3 == len(toks) {
			break
		}
		if toks[i+3].text != "AND" || toks[i+3].quoted {
			return false, filterError("terms are joined by AND")
		}
	}
	if allowed != nil {
		if len(allowed) == 0 {
			empty = true
		}
		slices.Sort(allowed) // the list's normal form (wire.DecodeListQuery)
		f.Statuses = allowed
	}
	return empty, nil
}

type filterToken struct {
	text   string
	quoted bool
}

// filterTokens splits a filter into words, "=" and quoted strings.
func filterTokens(s string) ([]filterToken, error) {
	if len(s) > 1024 {
		return nil, filterError("at most 1024 bytes")
	}
	var out []filterToken
	for i := 0; i < len(s); {
		switch ch := s[i]; {
		case ch == ' ' || ch == '\t':
			i++
		case ch == '=':
			out = append(out, filterToken{text: "="})
			i++
		case ch == '"':
			var b strings.Builder
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, filterError("a quoted value is not closed")
			}
			i++
			out = append(out, filterToken{text: b.String(), quoted: true})
		default:
			j := i
			for j < len(s) && s[j] != ' ' && s[j] != '\t' && s[j] != '=' && s[j] != '"' {
				j++
			}
			out = append(out, filterToken{text: s[i:j]})
			i = j
		}
	}
	return out, nil
}

// googleCodes are the google.rpc.Code names of our codes on the Operations
// routes (AIP-193), and the HTTP status where it is not the §7 one: a cancel
// of an operation that ended otherwise is FAILED_PRECONDITION, 400.
var googleCodes = map[domain.Code]struct {
	name   string
	status int // 0: the §7 status
}{
	domain.Unauthenticated:      {"UNAUTHENTICATED", 0},
	domain.Forbidden:            {"PERMISSION_DENIED", 0},
	domain.TenantFrozen:         {"PERMISSION_DENIED", 0},
	domain.NotFound:             {"NOT_FOUND", 0},
	domain.MethodNotAllowed:     {"UNIMPLEMENTED", 0},
	domain.NotAcceptable:        {"INVALID_ARGUMENT", 0},
	domain.ValidationFailed:     {"INVALID_ARGUMENT", 0},
	domain.InvalidCursor:        {"INVALID_ARGUMENT", 0},
	domain.AlreadyTerminal:      {"FAILED_PRECONDITION", fiber.StatusBadRequest},
	domain.PayloadTooLarge:      {"INVALID_ARGUMENT", 0},
	domain.UnsupportedMediaType: {"INVALID_ARGUMENT", 0},
	domain.IdempotencyKeyReused: {"INVALID_ARGUMENT", 0},
	domain.PolledTooEarly:       {"RESOURCE_EXHAUSTED", 0},
	domain.RateLimited:          {"RESOURCE_EXHAUSTED", 0},
	domain.BackendUnavailable:   {"UNAVAILABLE", 0},
	domain.Internal:             {"INTERNAL", 0},
}

// googleError is an AIP-193 error body.
type googleError struct {
	Error googleStatus `json:"error"`
}

type googleStatus struct {
	Code    int           `json:"code"`
	Message string        `json:"message"`
	Status  string        `json:"status"`
	Details []googleAnyed `json:"details"`
}

// googleAnyed is one google.protobuf.Any of the details: an ErrorInfo, or a
// BadRequest naming the invalid fields.
type googleAnyed struct {
	Type            string            `json:"@type"`
	Reason          string            `json:"reason,omitempty"`
	Domain          string            `json:"domain,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	FieldViolations []fieldViolation  `json:"fieldViolations,omitempty"`
}

type fieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// writeGoogleError writes de as an AIP-193 error; errorHandler has set the
// headers every error answer carries. status is de's §7 HTTP status.
func (s *Server) writeGoogleError(c *fiber.Ctx, de *domain.Error, status int) error {
	g, ok := googleCodes[de.Code]
	if !ok {
		g = googleCodes[domain.Internal]
	}
	if g.status != 0 {
		status = g.status
	}
	body := googleError{Error: googleStatus{Code: status, Message: de.Message, Status: g.name,
		Details: []googleAnyed{{Type: wire.ErrorInfoTypeURL, Reason: string(de.Code), Domain: wire.ErrorDomain,
			Metadata: map[string]string{"request_id": s.requestID(c)}}}}}
	if len(de.Fields) > 0 {
		bad := googleAnyed{Type: "type.googleapis.com/google.rpc.BadRequest"}
		for _, f := range de.Fields {
			bad.FieldViolations = append(bad.FieldViolations, fieldViolation{Field: f.Field, Description: f.Message})
		}
		body.Error.Details = append(body.Error.Details, bad)
	}
	b, err := s.json.Marshal(body)
	if err != nil {
		return c.Status(fiber.StatusInternalServerError).SendString("internal error")
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(status).Send(b)
}
