package lrotest

import (
	"context"
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// wantFailureCode is the failure code of each end other than succeeded.
var wantFailureCode = map[domain.Status]string{
	domain.StatusFailed:    "ERR_UPSTREAM",
	domain.StatusCancelled: "CANCELLED",
	domain.StatusExpired:   "REQUEST_EXPIRED",
}

// TestAzureGoPoller: azcore's runtime.NewPoller, started on the create
// answer, ends with the representation for a succeeded request and with a
// ResponseError naming the failure for a failed, cancelled or expired one.
func TestAzureGoPoller(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *service) {
		for _, end := range ends {
			t.Run(string(end), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), clientBound)
				defer cancel()
				typ := scenarioType("go", end)
				found := s.worker(ctx, t, typ, end)
				got, err := createAndWait(ctx, s.URL, s.Keys["rw"], typ)
				id := <-found
				if ctx.Err() != nil {
					t.Fatalf("the poller did not end within %s: %v", clientBound, err)
				}
				if end == domain.StatusSucceeded {
					if err != nil {
						t.Fatalf("poller: %v", err)
					}
					if got.ID != id || got.Status != "succeeded" || string(got.Result) != `{"rows":42}` {
						t.Fatalf("poller result %+v (%s), want request %s succeeded", got, got.Result, id)
					}
					return
				}
				// On Failed and Canceled, azcore's Operation-Location poller
				// fetches the Location of a POST (the request) and makes it the
				// error's response.
				var re *azcore.ResponseError
				if !errors.As(err, &re) {
					t.Fatalf("poller ended with %v (%+v), want a ResponseError", err, got)
				}
				var r struct {
					ID      string `json:"id"`
					Status  string `json:"status"`
					Failure *struct {
						Code string `json:"code"`
					} `json:"failure"`
				}
				if err := runtime.UnmarshalAsJSON(re.RawResponse, &r); err != nil {
					t.Fatal(err)
				}
				if r.ID != id || r.Status != string(end) {
					t.Fatalf("the error's response is %+v, want request %s %s", r, id, end)
				}
				if end != domain.StatusCancelled && (r.Failure == nil || r.Failure.Code != wantFailureCode[end]) {
					t.Fatalf("the error's response has failure %+v, want code %s", r.Failure, wantFailureCode[end])
				}
			})
		}
	})
}
