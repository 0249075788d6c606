package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/asyncstatus/asyncstatus/client"
)

// TestCreateWithLabels: labels go out with Create and come back in the
// representation; a bad one is the service's 400 naming it.
func TestCreateWithLabels(t *testing.T) {
	eachBackend(t, serviceOptions{schedule: []int{1, 2, 5}}, func(t *testing.T, s *service) {
		ctx := context.Background()
		c := s.client(t, "admin")
		cr, err := c.Create(ctx, client.CreateParams{Type: "x", Labels: map[string]string{"team": "billing", "env": "prod"}})
		if err != nil || cr.Labels["team"] != "billing" || cr.Labels["env"] != "prod" || len(cr.Labels) != 2 {
			t.Fatalf("create: %+v %v", cr, err)
		}
		got, err := c.Get(ctx, cr.ID)
		if err != nil || len(got.Labels) != 2 || got.Labels["env"] != "prod" {
			t.Fatalf("get: %+v %v", got, err)
		}
		_, err = c.Create(ctx, client.CreateParams{Type: "x", Labels: map[string]string{"Team": "x"}})
		var pe *client.Error
		if !errors.As(err, &pe) || pe.Status != 400 || len(pe.Fields) == 0 || pe.Fields[0].Field != "labels.Team" {
			t.Fatalf("bad label: %v", err)
		}
	})
}

// TestListLookupCountsByLabel: the client's label listing, Lookup and
// Counts against the service.
func TestListLookupCountsByLabel(t *testing.T) {
	eachBackend(t, serviceOptions{schedule: []int{1, 2, 5}}, func(t *testing.T, s *service) {
		ctx := context.Background()
		c := s.client(t, "admin")
		var ids []string
		for i, env := range []string{"prod", "dev", "prod"} {
			cr, err := c.Create(ctx, client.CreateParams{Type: "lbl", Labels: map[string]string{"env": env, "n": string(rune('a' + i))}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, cr.ID)
		}
		p, err := c.ListPage(ctx, client.ListOptions{Labels: map[string]string{"env": "prod"}})
		if err != nil || len(p.Items) != 2 || p.Items[0].ID != ids[2] || p.Items[1].ID != ids[0] {
			t.Fatalf("list by label: %+v %v", p, err)
		}
		got, err := c.Lookup(ctx, []string{ids[0], ids[1], "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"})
		if err != nil || len(got) != 2 || got[0].ID != ids[1] || got[1].ID != ids[0] {
			t.Fatalf("lookup: %+v %v", got, err)
		}
		if _, err := c.Lookup(ctx, nil); err == nil {
			t.Fatal("a lookup of no ids")
		}
		n, err := c.Counts(ctx, client.CountOptions{Label: &[2]string{"env", "prod"}})
		if err != nil || n.Queued != 2 || n.Succeeded != 0 {
			t.Fatalf("counts: %+v %v", n, err)
		}
		n, err = c.Counts(ctx, client.CountOptions{Type: "lbl"})
		if err != nil || n.Queued != 3 {
			t.Fatalf("counts by type: %+v %v", n, err)
		}
	})
}
