package wire

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// DecodeWebhook validates a registration body {"url", "events", "description"}.
// The URL must be absolute http or https with a host and no credentials or
// fragment; whether http and the address it names are allowed is the webhook
// package's guard's decision. Events are deduplicated and kept in lifecycle order.
func DecodeWebhook(body []byte) (domain.WebhookInput, error) {
	var raw struct {
		URL         *string   `json:"url"`
		Events      *[]string `json:"events"`
		Description *string   `json:"description"`
	}
	if err := decodeObject(body, &raw, false); err != nil {
		return domain.WebhookInput{}, err
	}
	var v validator
	var in domain.WebhookInput
	switch {
	case raw.URL == nil:
		v.add("url", "is required")
	default:
		in.URL = *raw.URL
		if msg := checkWebhookURL(in.URL); msg != "" {
			v.add("url", "%s", msg)
		}
	}
	if raw.Events == nil {
		in.Events = append([]domain.WebhookEvent(nil), domain.DefaultWebhookEvents...)
	} else if len(*raw.Events) == 0 {
		v.add("events", "must list at least one event type (omit it for the four terminal ones)")
	} else {
		seen := map[domain.WebhookEvent]bool{}
		for _, e := range *raw.Events {
			ev := domain.WebhookEvent(e)
			if !ev.Valid() {
				v.add("events", "unknown event type %q (want one of request.created, request.processing, request.succeeded, request.failed, request.cancelled, request.expired)", truncate(e, 64))
				continue
			}
			seen[ev] = true
		}
		for _, ev := range domain.WebhookEvents {
			if seen[ev] {
				in.Events = append(in.Events, ev)
			}
		}
	}
	if raw.Description != nil {
		in.Description = *raw.Description
		if !utf8.ValidString(in.Description) || utf8.RuneCountInString(in.Description) > domain.WebhookDescriptionMaxChars {
			v.add("description", "must be at most %d characters", domain.WebhookDescriptionMaxChars)
		}
	}
	if err := v.err(); err != nil {
		return domain.WebhookInput{}, err
	}
	return in, nil
}

func checkWebhookURL(s string) string {
	if s == "" {
		return "is required"
	}
	if len(s) > domain.WebhookURLMaxBytes {
		return "must be at most 2048 bytes"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "is not a valid URL"
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		// Whether http is allowed too is webhooks.allow_http's, checked by
		// the webhook guard, which says "must use https" when it is not.
		return "must be an absolute http or https URL"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case strings.HasSuffix(u.Host, ":") || u.Port() != "" && !validPort(u.Port()):
		return "must name a port from 1 to 65535, or none"
	case u.User != nil:
		return "must not carry credentials"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "must not carry a fragment"
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return "must be ASCII without spaces (percent-encode the rest)"
		}
	}
	return ""
}

// validPort reports whether p (digits, as url.Parse leaves a port) is 1..65535
// written without leading zeros.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && p[0] != '0'
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
