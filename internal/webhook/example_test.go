package webhook_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/webhook"
)

// verify is the receiver code of docs/webhooks.md: a partner's check of an
// asyncstatus delivery, with the standard library only.
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil || sigs == "" {
		return errors.New("missing or malformed webhook headers")
	}
	// Refuse old (replayed) and future messages.
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("timestamp outside the tolerance")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	// The header may list several signatures ("v1,<sig> v1,<sig>").
	for _, s := range strings.Fields(sigs) {
		version, sig, _ := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if version == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no valid signature")
}

// Example_receiver verifies a delivery the way a receiver should, then answers
// 2xx quickly (do the work after answering, and deduplicate by webhook-id).
func Example_receiver() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	seen := map[string]bool{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || verify(secret, r.Header, body, time.Now()) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get("webhook-id")
		if !seen[id] { // at-least-once: the same webhook-id may come again
			seen[id] = true
			fmt.Println("accepted", id)
		}
		w.WriteHeader(http.StatusNoContent)
	})

	// What the dispatcher sends (webhook.Sign is the service's side).
	body := []byte(`{"type":"request.succeeded","timestamp":"2026-11-29T10:00:04.512Z","data":{"id":"01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"}}`)
	key, _ := webhook.SecretKey(secret)
	for _, sign := range []string{"good", "good", "forged"} {
		ts := time.Now().Unix()
		req := httptest.NewRequest("POST", "/hooks/asyncstatus", bytes.NewReader(body))
		req.Header.Set("webhook-id", "msg_01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a_s")
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		sig := webhook.Sign(key, "msg_01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a_s", ts, body)
		if sign == "forged" {
			sig = webhook.Sign([]byte("not the secret"), "msg_01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a_s", ts, body)
		}
		req.Header.Set("webhook-signature", sig)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// accepted msg_01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a_s
	// 204
	// 204
	// 401
}
