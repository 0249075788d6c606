package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"regexp"
	"strings"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Endpoints is what the registration service needs of the store.
type Endpoints interface {
	SaveWebhook(ctx context.Context, c domain.Call, w domain.Webhook, max int) error
	Webhooks(ctx context.Context, c domain.Call) ([]domain.Webhook, error)
	Webhook(ctx context.Context, c domain.Call, id string) (*domain.Webhook, error)
	DeleteWebhook(ctx context.Context, c domain.Call, id string) error
	WebhookDeliveries(ctx context.Context, c domain.Call, id string) ([]domain.WebhookDelivery, error)
	Frozen(ctx context.Context, tenant string) (bool, error)
}

// MaxEndpoints is how many endpoints one tenant may register: every
// transition writes one outbox entry per interested endpoint.
const MaxEndpoints = 20

// Service registers, lists and removes endpoints: what the /v1/webhooks routes call.
type Service struct {
	st     Endpoints
	guard  *Guard
	sealer *Sealer
	now    func() time.Time
	// Registered, when set, is told the tenant of each new endpoint (the
	// dispatcher of this replica, so that it starts watching the tenant at once).
	Registered func(tenant string)
}

// NewService makes the registration service. now may be nil (time.Now).
func NewService(st Endpoints, guard *Guard, sealer *Sealer, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{st: st, guard: guard, sealer: sealer, now: now}
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// idPattern: "ep_" + 24 lower-case base32 characters (120 random bits).
var idPattern = regexp.MustCompile(`^ep_[a-z2-7]{24}$`)

func newEndpointID() (string, error) {
	b := make([]byte, 15)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "ep_" + strings.ToLower(idEncoding.EncodeToString(b)), nil
}

func (s *Service) checkFrozen(ctx context.Context, tenant string) error {
	fz, err := s.st.Frozen(ctx, tenant)
	if err != nil {
		return err
	}
	if fz {
		return domain.Errorf(domain.TenantFrozen, "The tenant is frozen by an operator; reads and creates are refused.")
	}
	return nil
}

// RegisterWebhook checks the URL (scheme, and every address it resolves to),
// makes the endpoint and its secret, keeps the secret sealed and returns it
// this once.
func (s *Service) RegisterWebhook(ctx context.Context, c domain.Call, in domain.WebhookInput) (*domain.Webhook, error) {
	tenant := c.Tenant
	if err := s.checkFrozen(ctx, tenant); err != nil {
		return nil, err
	}
	if err := s.guard.CheckURL(ctx, in.URL); err != nil {
		return nil, err
	}
	id, err := newEndpointID()
	if err != nil {
		return nil, err
	}
	secret, err := NewSecret()
	if err != nil {
		return nil, err
	}
	sealed, err := s.sealer.Seal(tenant, id, secret)
	if err != nil {
		return nil, err
	}
	w := domain.Webhook{ID: id, URL: in.URL, Events: in.Events, Description: in.Description,
		CreatedAt: domain.TimeMs(s.now().UnixMilli()), SealedSecret: sealed}
	if err := s.st.SaveWebhook(ctx, c, w, MaxEndpoints); err != nil {
		return nil, err
	}
	if s.Registered != nil {
		s.Registered(tenant)
	}
	w.Secret, w.SealedSecret = secret, ""
	return &w, nil
}

// ListWebhooks lists the tenant's endpoints, oldest first, without secrets.
func (s *Service) ListWebhooks(ctx context.Context, c domain.Call) ([]domain.Webhook, error) {
	if err := s.checkFrozen(ctx, c.Tenant); err != nil {
		return nil, err
	}
	ws, err := s.st.Webhooks(ctx, c)
	for i := range ws {
		ws[i].SealedSecret = ""
	}
	return ws, err
}

// Webhook reads one endpoint, without its secret.
func (s *Service) Webhook(ctx context.Context, c domain.Call, id string) (*domain.Webhook, error) {
	if !idPattern.MatchString(id) {
		return nil, domain.ErrNotFound()
	}
	if err := s.checkFrozen(ctx, c.Tenant); err != nil {
		return nil, err
	}
	w, err := s.st.Webhook(ctx, c, id)
	if err != nil {
		return nil, err
	}
	w.SealedSecret = ""
	return w, nil
}

// DeleteWebhook removes an endpoint; messages still queued for it are dropped.
// It works on a frozen tenant too: removing a destination only narrows what
// leaves the service.
func (s *Service) DeleteWebhook(ctx context.Context, c domain.Call, id string) error {
	if !idPattern.MatchString(id) {
		return domain.ErrNotFound()
	}
	return s.st.DeleteWebhook(ctx, c, id)
}

// WebhookDeliveries lists an endpoint's recent attempts, newest first.
func (s *Service) WebhookDeliveries(ctx context.Context, c domain.Call, id string) ([]domain.WebhookDelivery, error) {
	if !idPattern.MatchString(id) {
		return nil, domain.ErrNotFound()
	}
	if err := s.checkFrozen(ctx, c.Tenant); err != nil {
		return nil, err
	}
	return s.st.WebhookDeliveries(ctx, c, id)
}
