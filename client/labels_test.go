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
