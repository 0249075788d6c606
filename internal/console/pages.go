package console

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// tenantsPage: every tenant with its counts by status and frozen flag; one
// store call per tenant (each inside its own cluster slot), a few at a time.
func (s *Server) tenantsPage(w http.ResponseWriter, r *http.Request, v *view) {
	names, err := s.st.Tenants(r.Context())
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	sort.Strings(names)
	sums := make([]domain.TenantSummary, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, t := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sums[i], errs[i] = s.st.TenantSummary(r.Context(), t)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			s.failed(w, r, v, err)
			return
		}
	}
	v.Title, v.Nav, v.Data = "Tenants", "tenants", sums
	s.render(w, r, http.StatusOK, "tenants", v)
}

// requestsPage: a tenant's requests, the list of docs/reference.md §4 with its filters and
// cursor, and the tenant's counts and oldest ages. The summary (and, answered
// ahead, the session) ride the list's round trips, so that the page costs
// little more than its list call (docs/reference.md §14).
func (s *Server) requestsPage(w http.ResponseWriter, r *http.Request, v *view) {
	q := r.URL.Query()
	f, ferr := wire.DecodeListQuery(map[string][]string(q))
	var (
		read domain.TenantPage
		err  error
	)
	if ferr != nil {
		read.Summary, err = s.st.TenantSummary(r.Context(), v.Tenant)
	} else {
		f.Tenant = v.Tenant // the console's reads are nobody's calls: not counted
		read, err = s.st.ReadTenantPage(r.Context(), f, v.check.take())
		v.check.give(read.Session, read.SessionErr)
	}
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	d := &requestsData{Summary: read.Summary, Now: s.opts.Now(), Filter: filterForm(q)}
	status := http.StatusOK
	switch {
	case ferr != nil:
		status, d.Problem = http.StatusBadRequest, ferr
	case domain.ErrorCode(read.ListErr) == domain.TenantFrozen:
		// the operator still sees the counts and the Unfreeze control
		status, d.Problem = http.StatusForbidden, read.ListErr
	case read.ListErr != nil:
		s.failed(w, r, v, read.ListErr)
		return
	default:
		d.Items = read.Page.Items
		if read.Page.NextCursor != "" {
			d.Next = nextPage(f, read.Page.NextCursor)
		}
	}
	v.Title, v.Nav = "Requests of "+v.Tenant, "requests"
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	s.bufs.writeBody(w, appendRequestsPage(s.bufs.get(), v, d))
}

// filterForm is what the filter form shows back: the values as given.
type filterValues struct {
	Type, CreatedAfter, CreatedBefore, Limit string
	LabelSelector                            string
	Status                                   map[domain.Status]bool
}

func filterForm(q url.Values) filterValues {
	fv := filterValues{Type: q.Get("type"), CreatedAfter: q.Get("created_after"), CreatedBefore: q.Get("created_before"),
		Limit: q.Get("limit"), LabelSelector: q.Get("label_selector"), Status: map[domain.Status]bool{}}
	for _, v := range q["status"] {
		for _, st := range strings.Split(v, ",") {
			fv.Status[domain.Status(st)] = true
		}
	}
	return fv
}

// nextPage is the query of the next page: the same filters and the cursor.
func nextPage(f domain.ListFilter, cursor string) string {
	q := url.Values{}
	if f.Type != "" {
		q.Set("type", f.Type)
	}
	for _, st := range f.Statuses {
		q.Add("status", string(st))
	}
	if f.CreatedAfter != nil {
		q.Set("created_after", f.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if f.CreatedBefore != nil {
		q.Set("created_before", f.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	if f.LabelSelector != "" {
		q.Set("label_selector", string(f.LabelSelector))
	}
	q.Set("limit", strconv.Itoa(f.Limit))
	q.Set("cursor", cursor)
	return "?" + q.Encode()
}

// read gets a request with its events, unpaced: the console is not a poller.
func (s *Server) read(ctx context.Context, tenant, id string) (*domain.Request, error) {
	res, err := s.st.Poll(ctx, domain.PollParams{Call: domain.Call{Tenant: tenant}, ID: id, Caller: domain.Unpaced})
	if err != nil {
		return nil, err
	}
	return res.Request, nil
}

// requestView is what the request page and its live fragment show.
type requestView struct {
	Req  *domain.Request
	Path string // the request page's path
}

// requestPage: the representation, its events as a timeline, cancel and
// delete. While the request is not terminal the page is live (script) or
// reloads itself (no script).
func (s *Server) requestPage(w http.ResponseWriter, r *http.Request, v *view) {
	req, err := s.read(r.Context(), v.Tenant, r.PathValue("id"))
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	p := "/t/" + v.Tenant + "/requests/" + req.ID
	v.Title, v.Nav, v.Data = "Request "+req.ID, "requests", requestView{Req: req, Path: p}
	if !req.Status.Terminal() {
		v.Live = p + "/live"
	}
	s.render(w, r, http.StatusOK, "request", v)
}

// confirmRequestAction asks before cancel or delete.
func (s *Server) confirmRequestAction(action string) handler {
	return func(w http.ResponseWriter, r *http.Request, v *view) {
		req, err := s.read(r.Context(), v.Tenant, r.PathValue("id"))
		if err != nil {
			s.failed(w, r, v, err)
			return
		}
		p := "/t/" + v.Tenant + "/requests/" + req.ID
		what := map[string]string{"cancel": "Cancel request " + req.ID + "? Its consumer will see it cancelled; this cannot be undone.",
			"delete": "Delete request " + req.ID + "? Its record and events are removed for good."}[action]
		s.confirm(w, r, v, what, p+"/"+action, p)
	}
}

// confirm renders a confirmation page whose "Confirm" posts to action.
func (s *Server) confirm(w http.ResponseWriter, r *http.Request, v *view, question, action, back string) {
	v.Title, v.Data = "Confirm", map[string]string{"Question": question, "Action": action, "Back": back}
	s.render(w, r, http.StatusOK, "confirm", v)
}

func (s *Server) cancelRequest(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("id")
	_, err := s.st.Cancel(r.Context(), domain.TransitionParams{Call: domain.Call{Tenant: v.Tenant, By: v.Session.KeyID}, ID: id},
		domain.CancelInput{Reason: "cancelled from the console"})
	if err != nil && domain.ErrorCode(err) != domain.AlreadyTerminal {
		s.failed(w, r, v, err)
		return
	}
	http.Redirect(w, r, "/t/"+v.Tenant+"/requests/"+id, http.StatusSeeOther)
}

func (s *Server) deleteRequest(w http.ResponseWriter, r *http.Request, v *view) {
	if err := s.st.DeleteBy(r.Context(), v.Tenant, r.PathValue("id"), v.Session.KeyID); err != nil {
		s.failed(w, r, v, err)
		return
	}
	http.Redirect(w, r, "/t/"+v.Tenant+"/requests", http.StatusSeeOther)
}

func (s *Server) confirmFreeze(freeze bool) handler {
	return func(w http.ResponseWriter, r *http.Request, v *view) {
		q, a := "Freeze tenant "+v.Tenant+"? Its reads and creates will answer 403 TENANT_FROZEN; transitions are still accepted.", "freeze"
		if !freeze {
			q, a = "Unfreeze tenant "+v.Tenant+"? Its reads and creates work again, every record intact.", "unfreeze"
		}
		s.confirm(w, r, v, q, "/t/"+v.Tenant+"/"+a, "/tenants")
	}
}

func (s *Server) freeze(freeze bool) handler {
	return func(w http.ResponseWriter, r *http.Request, v *view) {
		if err := s.st.SetFrozen(r.Context(), v.Tenant, freeze); err != nil {
			s.failed(w, r, v, err)
			return
		}
		http.Redirect(w, r, "/tenants", http.StatusSeeOther)
	}
}

func (s *Server) webhooksPage(w http.ResponseWriter, r *http.Request, v *view) {
	hooks, err := s.st.Webhooks(r.Context(), domain.Call{Tenant: v.Tenant})
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	v.Title, v.Nav, v.Data = "Webhooks of "+v.Tenant, "webhooks", hooks
	s.render(w, r, http.StatusOK, "webhooks", v)
}

func (s *Server) deliveriesPage(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("id")
	ds, err := s.st.WebhookDeliveries(r.Context(), domain.Call{Tenant: v.Tenant}, id)
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	v.Title, v.Nav, v.Data = "Deliveries of webhook "+id, "webhooks", map[string]any{"ID": id, "Deliveries": ds}
	s.render(w, r, http.StatusOK, "deliveries", v)
}

func (s *Server) keysPage(w http.ResponseWriter, r *http.Request, v *view) {
	keys, err := s.st.ListKeys(r.Context(), v.Tenant)
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	v.Title, v.Nav, v.Data = "API keys of "+v.Tenant, "keys", map[string]any{"Keys": keys, "Base": "/t/" + v.Tenant + "/keys/"}
	s.render(w, r, http.StatusOK, "keys", v)
}

func (s *Server) operatorKeysPage(w http.ResponseWriter, r *http.Request, v *view) {
	keys, err := s.st.ListOperatorKeys(r.Context())
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	v.Title, v.Nav, v.Data = "Operator keys", "operator-keys", map[string]any{"Keys": keys, "Base": "/operator-keys/"}
	s.render(w, r, http.StatusOK, "keys", v)
}

// tenantKey finds key id among the tenant's keys: a tenant admin may revoke
// only its own tenant's keys, and anything else is "not found".
func (s *Server) tenantKey(ctx context.Context, tenant, id string) (bool, error) {
	keys, err := s.st.ListKeys(ctx, tenant)
	if err != nil {
		return false, err
	}
	for _, k := range keys {
		if k.ID == id {
			return true, nil
		}
	}
	return false, nil
}

func (s *Server) confirmRevokeKey(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("key")
	ok, err := s.tenantKey(r.Context(), v.Tenant, id)
	if err != nil || !ok {
		s.failed(w, r, v, orNotFound(err))
		return
	}
	s.confirm(w, r, v, "Revoke key "+id+"? Calls with it are refused within the key cache TTL; this cannot be undone.",
		"/t/"+v.Tenant+"/keys/"+id+"/revoke", "/t/"+v.Tenant+"/keys")
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("key")
	ok, err := s.tenantKey(r.Context(), v.Tenant, id)
	if err != nil || !ok {
		s.failed(w, r, v, orNotFound(err))
		return
	}
	s.revoke(w, r, v, id, "/t/"+v.Tenant+"/keys")
}

func (s *Server) confirmRevokeOperatorKey(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("key")
	s.confirm(w, r, v, "Revoke operator key "+id+"? Its console sessions end within the key cache TTL.",
		"/operator-keys/"+id+"/revoke", "/operator-keys")
}

func (s *Server) revokeOperatorKey(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("key")
	keys, err := s.st.ListOperatorKeys(r.Context())
	if err != nil {
		s.failed(w, r, v, err)
		return
	}
	for _, k := range keys {
		if k.ID == id {
			s.revoke(w, r, v, id, "/operator-keys")
			return
		}
	}
	s.notFound(w, r, v)
}

// revoke deletes key id. Revoking the key of one's own session ends the
// session at once rather than within the key cache TTL.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request, v *view, id, back string) {
	if err := s.st.RevokeKey(r.Context(), id); err != nil {
		s.failed(w, r, v, err)
		return
	}
	if id == v.Session.KeyID {
		if err := s.st.DeleteConsoleSession(r.Context(), digest(v.Session.plain)); err != nil {
			s.failed(w, r, v, err)
			return
		}
		s.clearSession(w, r)
		back = "/signin"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func orNotFound(err error) error {
	if err != nil {
		return err
	}
	return domain.ErrNotFound()
}

func (s *Server) configPage(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav, v.Data = "Configuration", "config", string(s.opts.Config)
	s.render(w, r, http.StatusOK, "config", v)
}

func (s *Server) figuresPage(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav, v.Data, v.Live = "Figures", "figures", s.figs.figures(), "/figures/live"
	s.render(w, r, http.StatusOK, "figures", v)
}
