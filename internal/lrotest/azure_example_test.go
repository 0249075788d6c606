package lrotest

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// apiKeyPolicy adds the API key to every call of the pipeline, the poller's
// included.
type apiKeyPolicy struct{ key string }

func (p apiKeyPolicy) Do(req *policy.Request) (*http.Response, error) {
	req.Raw().Header.Set("Authorization", "Bearer "+p.key)
	return req.Next()
}

// Request is the part of the representation this program reads.
type Request struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
}

// createAndWait creates a request of type typ and lets azcore's stock poller
// follow its status monitor (the answer's Operation-Location) to its end: the
// request when it succeeded, an *azcore.ResponseError naming the failure code
// when it failed, expired or was cancelled.
func createAndWait(ctx context.Context, baseURL, apiKey, typ string) (Request, error) {
	pl := runtime.NewPipeline("example", "v1.0.0",
		runtime.PipelineOptions{PerCall: []policy.Policy{apiKeyPolicy{apiKey}}}, nil)
	req, err := runtime.NewRequest(ctx, http.MethodPost, baseURL+"/v1/requests")
	if err != nil {
		return Request{}, err
	}
	if err := runtime.MarshalAsJSON(req, map[string]any{"type": typ}); err != nil {
		return Request{}, err
	}
	resp, err := pl.Do(req)
	if err != nil {
		return Request{}, err
	}
	if !runtime.HasStatusCode(resp, http.StatusAccepted) {
		return Request{}, runtime.NewResponseError(resp)
	}
	poller, err := runtime.NewPoller[Request](resp, pl, nil)
	if err != nil {
		return Request{}, err
	}
	// Frequency is used only when an answer has no Retry-After; ours have.
	return poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
}
