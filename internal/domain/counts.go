package domain

// StatusCounts are the exact numbers of a tenant's requests in each status
// under a CountsFilter (GET /v1/requests/counts, docs/reference.md §16).
type StatusCounts struct {
	Queued     int64 `json:"queued"`
	Processing int64 `json:"processing"`
	Succeeded  int64 `json:"succeeded"`
	Failed     int64 `json:"failed"`
	Cancelled  int64 `json:"cancelled"`
	Expired    int64 `json:"expired"`
}
