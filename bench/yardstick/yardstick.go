// Package yardstick is the irreducible work of each call asyncstatus answers, as
// the benchmark's yardstick does it (bench/baseline serves it over HTTP; the
// server and Redis benchmarks of internal/httpapi and internal/store measure
// against it in-process): the record as a hash of the representation's
// members (times as Unix milliseconds, JSON members as strings), one index
// entry, compare-and-set scripts, and encoding/json for the answer. It is the
// plain layout a first version would use, kept in one place so that every
// comparison measures the same thing.
package yardstick

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
)

// CreateScript writes the record and its one index entry.
// KEYS[1] record  KEYS[2] index   ARGV[1] id  ARGV[2] now ms  ARGV[3] type  ARGV[4] context  ARGV[5] created_by
var CreateScript = redis.NewScript(`
redis.call('HSET', KEYS[1], 'type', ARGV[3], 'status', 'queued', 'context', ARGV[4], 'created_by', ARGV[5],
  'created_at', ARGV[2], 'updated_at', ARGV[2], 'version', '1')
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1`)

// ProcessingScript: queued|processing -> processing with progress; returns {code, record...}.
// KEYS[1] record  ARGV[1] now ms  ARGV[2] progress JSON
var ProcessingScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {1} end
if st ~= 'queued' and st ~= 'processing' then return {6, redis.call('HGETALL', KEYS[1])} end
redis.call('HSET', KEYS[1], 'status', 'processing', 'progress', ARGV[2], 'updated_at', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return {0, redis.call('HGETALL', KEYS[1])}`)

// CompleteScript: queued|processing -> succeeded with the result; returns {code, record...}.
// KEYS[1] record  ARGV[1] now ms  ARGV[2] result_type  ARGV[3] result JSON
var CompleteScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {1} end
if st ~= 'queued' and st ~= 'processing' then return {6, redis.call('HGETALL', KEYS[1])} end
redis.call('HSET', KEYS[1], 'status', 'succeeded', 'result_type', ARGV[2], 'result', ARGV[3],
  'updated_at', ARGV[1], 'completed_at', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return {0, redis.call('HGETALL', KEYS[1])}`)

// Representation is the poll answer, member for member as asyncstatus writes it.
type Representation struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Status      string          `json:"status"`
	Done        bool            `json:"done"`
	Progress    json.RawMessage `json:"progress,omitempty"`
	Context     json.RawMessage `json:"context,omitempty"`
	ResultType  string          `json:"result_type,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	CreatedBy   string          `json:"created_by"`
	CreatedAt   MsTime          `json:"created_at"`
	UpdatedAt   MsTime          `json:"updated_at"`
	CompletedAt *MsTime         `json:"completed_at"`
	ExpiresAt   *MsTime         `json:"expires_at"`
	Version     int64           `json:"version"`
}

// MsTime is Unix milliseconds, written as RFC 3339 UTC with milliseconds.
type MsTime int64

// MarshalJSON writes the time as a JSON string.
func (t MsTime) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 26)
	b = append(b, '"')
	b = time.UnixMilli(int64(t)).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, '"'), nil
}

func parseMs(v string) MsTime {
	n, _ := strconv.ParseInt(v, 10, 64)
	return MsTime(n)
}

// FromFields builds the representation of request id from a field getter.
func FromFields(id string, get func(string) (string, bool)) Representation {
	r := Representation{ID: id}
	r.Type, _ = get("type")
	r.Status, _ = get("status")
	r.Done = r.Status == "succeeded"
	if v, ok := get("context"); ok && v != "" {
		r.Context = json.RawMessage(v)
	}
	if v, ok := get("progress"); ok && v != "" {
		r.Progress = json.RawMessage(v)
	}
	r.ResultType, _ = get("result_type")
	if v, ok := get("result"); ok && v != "" {
		r.Result = json.RawMessage(v)
	}
	r.CreatedBy, _ = get("created_by")
	v, _ := get("created_at")
	r.CreatedAt = parseMs(v)
	v, _ = get("updated_at")
	r.UpdatedAt = parseMs(v)
	if v, ok := get("completed_at"); ok {
		t := parseMs(v)
		r.CompletedAt = &t
	}
	v, _ = get("version")
	r.Version, _ = strconv.ParseInt(v, 10, 64)
	return r
}

// FromMap reads an HGETALL answer.
func FromMap(id string, m map[string]string) Representation {
	return FromFields(id, func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

// FromFlat reads a script's HGETALL reply (a flat field/value array).
func FromFlat(id string, flat []any) Representation {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		m[k] = v
	}
	return FromMap(id, m)
}

// Write answers with r as the yardstick does: encoding/json, ETag,
// Cache-Control, and a fixed Retry-After while not done.
func Write(c *fiber.Ctx, status int, r Representation) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderETag, `"`+strconv.FormatInt(r.Version, 10)+`"`)
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	if !r.Done {
		c.Set(fiber.HeaderRetryAfter, "1")
	}
	return c.Status(status).Send(body)
}
