package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// TestLabelsKeptWithTheRecord: labels given at create are in every later
// representation (poll, transitions, listing, webhook messages), unchanged by
// transitions, and part of the Idempotency-Key fingerprint.
func TestLabelsKeptWithTheRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b, nil)
		f.mustSaveWebhook(t, "acme", "ep_1", domain.EventCreated, domain.EventSucceeded)
		labels := domain.MakeLabels([]domain.Label{{Name: "team", Value: "billing"}, {Name: "env", Value: "prod:eu/1"}})
		p := domain.CreateParams{
			Call:    domain.Call{Tenant: "acme", By: "key_a"},
			IdemKey: "k1",
			Input:   domain.CreateInput{Type: "x", Context: json.RawMessage(`{"a":1}`), Labels: labels},
		}
		r, replay, err := f.s.Create(ctx, p)
		if err != nil || replay || r.Labels != "env=prod:eu/1,team=billing" {
			t.Fatalf("create: %+v %v %v", r, replay, err)
		}
		if got := f.mustGet(t, "acme", r.ID); got.Labels != labels {
			t.Fatalf("read back %q", got.Labels)
		}
		done, err := f.s.Complete(ctx, tp("acme", r.ID), domain.CompleteInput{ResultType: "answer", Result: json.RawMessage(`{"n":1}`)})
		if err != nil || done.Labels != labels {
			t.Fatalf("complete: %+v %v", done, err)
		}
		if got := f.mustGet(t, "acme", r.ID); got.Labels != labels || got.Status != domain.StatusSucceeded {
			t.Fatalf("after complete: %+v", got)
		}
		page, err := f.s.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "acme"}, Limit: 10})
		if err != nil || len(page.Items) != 1 || page.Items[0].Labels != labels {
			t.Fatalf("list: %+v %v", page, err)
		}
		msgs, err := f.s.ReadOutbox(ctx, "c1", f.outboxWant("acme", 10))
		if err != nil || len(msgs) != 2 {
			t.Fatalf("outbox: %d %v", len(msgs), err)
		}
		for _, m := range msgs {
			body, _ := json.Marshal(m.Request)
			if m.Request.Labels != labels || !strings.Contains(string(body), `"labels":{"env":"prod:eu/1","team":"billing"}`) {
				t.Errorf("webhook message %s: %s", m.Event, body)
			}
		}

		// The fingerprint: the same labels replay, other labels are another body.
		_, replay, err = f.s.Create(ctx, p)
		if err != nil || !replay {
			t.Fatalf("replay: %v %v", replay, err)
		}
		other := p
		other.Input.Labels = "env=prod:eu/1"
		_, _, err = f.s.Create(ctx, other)
		wantCode(t, err, domain.IdempotencyKeyReused)
		other.Input.Labels = ""
		_, _, err = f.s.Create(ctx, other)
		wantCode(t, err, domain.IdempotencyKeyReused)

		// No labels: none in the representation.
		plain := f.mustCreate(t, "acme", "x")
		if plain.Labels != "" || f.mustGet(t, "acme", plain.ID).Labels != "" {
			t.Fatalf("unlabelled request has labels %q", plain.Labels)
		}
	})
}
