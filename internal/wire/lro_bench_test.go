package wire_test

import (
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/wire"
)

// BenchmarkViews encodes one processing request as the representation, the
// status monitor and the Operation (docs/reference.md §15): the encoders'
// share of the polls' costs compared in internal/httpapi's BenchmarkLROViews.
//
//	go test -run '^$' -bench BenchmarkViews -benchmem ./internal/wire/
func BenchmarkViews(b *testing.B) {
	r := lroRequest(domain.StatusProcessing)
	// as most are: nothing encoding/json would escape, so every member is copied
	r.Progress = []byte(`{"percent":40,"message":"page 4 of 10"}`)
	r.Context = []byte(`{"account":"acc_wealth_881204","tax_year":2025,"delivery_channel":"PORTAL_DOWNLOAD","locale":"en-GB"}`)
	buf := make([]byte, 0, 2048)
	b.Run("request", func(b *testing.B) {
		for range b.N {
			buf, _ = wire.AppendRequest(buf[:0], r)
		}
	})
	b.Run("monitor", func(b *testing.B) {
		for range b.N {
			buf, _ = wire.AppendMonitor(buf[:0], r, "")
		}
	})
	b.Run("operation", func(b *testing.B) {
		for range b.N {
			buf, _ = wire.AppendOperation(buf[:0], r)
		}
	})
}
