package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

var (
	failureCodePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)
	hex64Pattern       = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// validator collects field errors so that one answer names every bad field.
type validator struct{ errs []domain.FieldError }

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, domain.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return &domain.Error{Code: domain.ValidationFailed, Message: "The request body is not valid.", Fields: v.errs}
}

// decodeObject strictly decodes body (a single JSON object) into dst: unknown
// members, trailing data and wrong types are validation errors.
func decodeObject(body []byte, dst any, optional bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return &domain.Error{Code: domain.ValidationFailed, Message: "The request body is required.", Fields: []domain.FieldError{{Field: "body", Message: "a JSON object is required"}}}
	}
	if fe, names, deep := checkIJSON(body); fe != nil {
		msg := "The request body is not valid I-JSON (RFC 7493)."
		if deep {
			msg = "The request body nests too deep."
		}
		return &domain.Error{Code: domain.ValidationFailed, Message: msg, Fields: []domain.FieldError{*fe}}
	} else if name, ok := unknownMember(names, dst); !ok {
		// encoding/json would take "TYPE" for "type"; member names match exactly.
		return &domain.Error{Code: domain.ValidationFailed, Message: "The request body is not valid.", Fields: []domain.FieldError{{Field: displayName(name), Message: "unknown member"}}}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &domain.Error{Code: domain.ValidationFailed, Message: "The request body is not valid.", Fields: []domain.FieldError{{Field: "body", Message: "unexpected data after the JSON object"}}}
	}
	return nil
}

// unknownMember returns the first of names that is not exactly the json name
// of one of the fields of the struct dst points to, and false; true when
// every name is one.
func unknownMember(names []string, dst any) (string, bool) {
	t := reflect.TypeOf(dst).Elem()
	for _, n := range names {
		known := false
		for i := 0; i < t.NumField() && !known; i++ {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			known = tag == n
		}
		if !known {
			return n, false
		}
	}
	return "", true
}

func jsonError(err error) error {
	field, msg := "body", "not a valid JSON object"
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field = te.Field
		if field == "" {
			field = "body"
		}
		msg = fmt.Sprintf("must be of type %s", jsonKind(te.Type.Kind().String()))
	case errors.As(err, &se):
		msg = fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field = strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		msg = "unknown member"
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "truncated JSON"
	}
	return &domain.Error{Code: domain.ValidationFailed, Message: "The request body is not valid.", Fields: []domain.FieldError{{Field: field, Message: msg}}}
}

func jsonKind(k string) string {
	switch k {
	case "map", "struct":
		return "object"
	case "slice", "array":
		return "array"
	case "int", "int64", "float64":
		return "number"
	}
	return k
}

// compactObject checks that raw is a JSON object and returns it compacted.
func compactObject(raw json.RawMessage) (json.RawMessage, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, t); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// present reports whether an optional member was given a value (null is absence).
func present(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && string(t) != "null"
}

// intValue reads a JSON number (not a string holding one, which encoding/json
// would let into a json.Number) that must be a whole number in [lo, hi].
func intValue(raw json.RawMessage, lo, hi int64) (int64, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] == '"' {
		return 0, false
	}
	i, err := json.Number(t).Int64()
	if err != nil || i < lo || i > hi {
		return 0, false
	}
	return i, true
}

func validString(s string, max int) bool {
	return utf8.ValidString(s) && utf8.RuneCountInString(s) <= max
}

// DecodeCreate validates a create body.
func DecodeCreate(body []byte, lim domain.Limits) (domain.CreateInput, error) {
	if out, ok := fastCreate(body, lim); ok {
		return out, nil
	}
	return decodeCreateSlow(body, lim)
}

// decodeCreateSlow is the reference implementation: it decides every input the
// fast path declines, and the fuzz tests hold the fast path to its answers.
func decodeCreateSlow(body []byte, lim domain.Limits) (domain.CreateInput, error) {
	var in struct {
		Type     *string         `json:"type"`
		Context  json.RawMessage `json:"context"`
		Labels   json.RawMessage `json:"labels"`
		Estimate json.RawMessage `json:"estimated_duration_seconds"`
	}
	if err := decodeObject(body, &in, false); err != nil {
		return domain.CreateInput{}, err
	}
	var v validator
	out := domain.CreateInput{}
	switch {
	case in.Type == nil:
		v.add("type", "is required")
	case !domain.ValidType(*in.Type):
		v.add("type", "must match %s", domain.TypePattern)
	default:
		out.Type = *in.Type
	}
	if len(in.Context) > 0 && string(bytes.TrimSpace(in.Context)) != "null" {
		c, ok := compactObject(in.Context)
		switch {
		case !ok:
			v.add("context", "must be a JSON object")
		case len(c) > lim.ContextBytes:
			v.add("context", "must be at most %d bytes serialized (is %d)", lim.ContextBytes, len(c))
		default:
			out.Context = c
		}
	}
	if present(in.Labels) {
		out.Labels = decodeLabels(in.Labels, &v)
	}
	if present(in.Estimate) {
		n, ok := intValue(in.Estimate, 1, 86400)
		if !ok {
			v.add("estimated_duration_seconds", "must be an integer from 1 to 86400")
		}
		out.EstimatedDurationSeconds = int(n)
	}
	return out, v.err()
}

// DecodeProgress validates an optional processing body.
func DecodeProgress(body []byte) (domain.ProgressInput, error) {
	if out, ok := fastProgress(body); ok {
		return out, nil
	}
	return decodeProgressSlow(body)
}

// decodeProgressSlow is the reference implementation behind DecodeProgress.
func decodeProgressSlow(body []byte) (domain.ProgressInput, error) {
	var in struct {
		Percent json.RawMessage `json:"percent"`
		Message *string         `json:"message"`
	}
	if err := decodeObject(body, &in, true); err != nil {
		return domain.ProgressInput{}, err
	}
	if !present(in.Percent) && in.Message == nil {
		return domain.ProgressInput{}, nil
	}
	var v validator
	p := struct {
		Percent *int64 `json:"percent,omitempty"`
		Message string `json:"message,omitempty"`
	}{}
	if present(in.Percent) {
		n, ok := intValue(in.Percent, 0, 100)
		if !ok {
			v.add("percent", "must be an integer from 0 to 100")
		}
		p.Percent = &n
	}
	if in.Message != nil {
		if !validString(*in.Message, 256) {
			v.add("message", "must be valid UTF-8 of at most 256 characters")
		}
		p.Message = *in.Message
	}
	if err := v.err(); err != nil {
		return domain.ProgressInput{}, err
	}
	b, _ := json.Marshal(p)
	return domain.ProgressInput{Progress: b}, nil
}

// DecodeComplete validates a complete body.
func DecodeComplete(body []byte, lim domain.Limits) (domain.CompleteInput, error) {
	if out, ok := fastComplete(body, lim); ok {
		return out, nil
	}
	return decodeCompleteSlow(body, lim)
}

// decodeCompleteSlow is the reference implementation behind DecodeComplete.
func decodeCompleteSlow(body []byte, lim domain.Limits) (domain.CompleteInput, error) {
	var in struct {
		ResultType *string         `json:"result_type"`
		Result     json.RawMessage `json:"result"`
	}
	if err := decodeObject(body, &in, false); err != nil {
		return domain.CompleteInput{}, err
	}
	var v validator
	if in.ResultType == nil {
		v.add("result_type", "is required")
	}
	if len(in.Result) == 0 || string(bytes.TrimSpace(in.Result)) == "null" {
		v.add("result", "is required")
	}
	if err := v.err(); err != nil {
		return domain.CompleteInput{}, err
	}
	out := domain.CompleteInput{ResultType: *in.ResultType}
	var err error
	switch *in.ResultType {
	case domain.ResultLink:
		out.Result, err = decodeLink(in.Result)
	case domain.ResultConfirmation:
		out.Result, err = decodeConfirmation(in.Result)
	case domain.ResultAnswer:
		c, ok := compactObject(in.Result)
		switch {
		case !ok:
			v.add("result", "must be a JSON object")
		case len(c) > lim.ResultBytes:
			v.add("result", "must be at most %d bytes serialized (is %d)", lim.ResultBytes, len(c))
		}
		out.Result, err = c, v.err()
	default:
		v.add("result_type", "must be one of link, confirmation, answer")
		err = v.err()
	}
	if err != nil {
		return domain.CompleteInput{}, err
	}
	return out, nil
}

// prefixFields names nested fields as "result.<field>".
func prefixFields(err error, prefix string) error {
	var e *domain.Error
	if errors.As(err, &e) {
		for i := range e.Fields {
			if e.Fields[i].Field == "body" {
				e.Fields[i].Field = strings.TrimSuffix(prefix, ".")
			} else {
				e.Fields[i].Field = prefix + e.Fields[i].Field
			}
		}
	}
	return err
}

func decodeLink(raw json.RawMessage) (json.RawMessage, error) {
	var in struct {
		URL         *string         `json:"url"`
		ExpiresAt   *string         `json:"expires_at"`
		Checksum    *string         `json:"checksum_sha256"`
		SizeBytes   json.RawMessage `json:"size_bytes"`
		ContentType *string         `json:"content_type"`
	}
	if err := decodeObject(raw, &in, false); err != nil {
		return nil, prefixFields(err, "result.")
	}
	var v validator
	out := struct {
		URL         string       `json:"url"`
		ExpiresAt   *domain.Time `json:"expires_at"`
		Checksum    string       `json:"checksum_sha256,omitempty"`
		SizeBytes   *int64       `json:"size_bytes,omitempty"`
		ContentType string       `json:"content_type,omitempty"`
	}{}
	if in.URL == nil {
		v.add("result.url", "is required")
	} else if u, err := url.Parse(*in.URL); err != nil || len(*in.URL) > 2048 || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add("result.url", "must be an absolute http or https URL of at most 2048 characters")
	} else {
		out.URL = *in.URL
	}
	if in.ExpiresAt == nil {
		v.add("result.expires_at", "is required")
	} else if t, err := time.Parse(time.RFC3339Nano, *in.ExpiresAt); err != nil {
		v.add("result.expires_at", "must be an RFC 3339 time")
	} else {
		out.ExpiresAt = &domain.Time{Time: t.UTC().Truncate(time.Millisecond)}
	}
	if in.Checksum != nil {
		if !hex64Pattern.MatchString(*in.Checksum) {
			v.add("result.checksum_sha256", "must be 64 hexadecimal characters")
		}
		out.Checksum = strings.ToLower(*in.Checksum)
	}
	if present(in.SizeBytes) {
		n, ok := intValue(in.SizeBytes, 0, 1<<53)
		if !ok {
			v.add("result.size_bytes", "must be a non-negative integer")
		}
		out.SizeBytes = &n
	}
	if in.ContentType != nil {
		if !validString(*in.ContentType, 255) || *in.ContentType == "" {
			v.add("result.content_type", "must be a non-empty string of at most 255 characters")
		}
		out.ContentType = *in.ContentType
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(out)
	return b, nil
}

func decodeConfirmation(raw json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Confirmed *bool   `json:"confirmed"`
		Message   *string `json:"message"`
	}
	if err := decodeObject(raw, &in, false); err != nil {
		return nil, prefixFields(err, "result.")
	}
	var v validator
	if in.Confirmed == nil {
		v.add("result.confirmed", "is required")
	}
	if in.Message != nil && !validString(*in.Message, 1024) {
		v.add("result.message", "must be valid UTF-8 of at most 1024 characters")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	out := struct {
		Confirmed bool    `json:"confirmed"`
		Message   *string `json:"message,omitempty"`
	}{*in.Confirmed, in.Message}
	b, _ := json.Marshal(out)
	return b, nil
}

// DecodeFail validates a fail body.
func DecodeFail(body []byte) (domain.FailInput, error) {
	if out, ok := fastFail(body); ok {
		return out, nil
	}
	return decodeFailSlow(body)
}

// decodeFailSlow is the reference implementation behind DecodeFail.
func decodeFailSlow(body []byte) (domain.FailInput, error) {
	var in struct {
		Code   *string `json:"code"`
		Reason *string `json:"reason"`
	}
	if err := decodeObject(body, &in, false); err != nil {
		return domain.FailInput{}, err
	}
	var v validator
	if in.Code == nil {
		v.add("code", "is required")
	} else if !failureCodePattern.MatchString(*in.Code) {
		v.add("code", "must match ^[A-Z][A-Z0-9_]{0,63}$")
	}
	if in.Reason != nil && !validString(*in.Reason, 1024) {
		v.add("reason", "must be valid UTF-8 of at most 1024 characters")
	}
	if err := v.err(); err != nil {
		return domain.FailInput{}, err
	}
	reason := ""
	if in.Reason != nil {
		reason = *in.Reason
	}
	return domain.FailInput{Failure: domain.FailureJSON(*in.Code, reason)}, nil
}

// DecodeCancel validates an optional cancel body.
func DecodeCancel(body []byte) (domain.CancelInput, error) {
	var in struct {
		Reason *string `json:"reason"`
	}
	if err := decodeObject(body, &in, true); err != nil {
		return domain.CancelInput{}, err
	}
	if in.Reason != nil && !validString(*in.Reason, 1024) {
		return domain.CancelInput{}, &domain.Error{Code: domain.ValidationFailed, Message: "The request body is not valid.",
			Fields: []domain.FieldError{{Field: "reason", Message: "must be valid UTF-8 of at most 1024 characters"}}}
	}
	if in.Reason == nil {
		return domain.CancelInput{}, nil
	}
	return domain.CancelInput{Reason: *in.Reason}, nil
}
