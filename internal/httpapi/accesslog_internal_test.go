package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// slogLine is what slog's JSON handler writes for l at t.
func slogLine(t *testing.T, at time.Time, l *accessLine) string {
	t.Helper()
	var buf bytes.Buffer
	r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
	r.AddAttrs(l.attrs()...)
	if err := slog.NewJSONHandler(&buf, nil).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestAccessLineLikeSlog: the fast access line is byte for byte slog's, and the
// values it leaves to slog are the ones it would format differently.
func TestAccessLineLikeSlog(t *testing.T) {
	strs := []string{"", "GET", "/v1/requests/:id", "unmatched", "acme", "key_abcdefghijklmnop", "poll_token",
		"trace-42", `q"uote`, `back\slash`, "<html>&amp;", "ctl\x01", "tab\t", "nl\n", "é", "\u2028", "\xff", "~!@#$%^*()_+{}|:?"}
	zones := []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+1800), time.FixedZone("PST", -8*3600), time.Local}
	times := []time.Time{time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC), time.Date(2026, 5, 4, 12, 0, 0, 120000000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Now()}
	durs := []time.Duration{0, time.Nanosecond, 999, time.Microsecond, 1234567, time.Hour, 1<<63 - 1, -5 * time.Millisecond}
	rnd := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return strs[rnd.IntN(len(strs))] }
	fast := 0
	for i := range 5000 {
		at := times[rnd.IntN(len(times))].In(zones[rnd.IntN(len(zones))])
		l := accessLine{method: pick(), route: pick(), status: rnd.IntN(700) - 50, duration: durs[rnd.IntN(len(durs))],
			requestID: pick(), tenant: pick(), keyID: pick(), code: pick(), hasCode: rnd.IntN(2) == 0}
		if i < len(durs) {
			l = accessLine{method: "GET", route: "/v1/requests/:id", status: 200, duration: durs[i], requestID: "r", tenant: "acme", keyID: "key_x"}
		}
		want := slogLine(t, at, &l)
		got, ok := appendAccessLine(nil, at, &l)
		if !ok {
			plain := true
			for _, s := range []string{l.method, l.route, l.requestID, l.tenant, l.keyID, l.code} {
				for i := 0; i < len(s); i++ {
					plain = plain && s[i] >= 0x20 && s[i] < 0x80
				}
			}
			if y := at.Year(); plain && y >= 0 && y < 10000 && l.duration >= 0 {
				t.Errorf("fast path refused a plain line: %s", want)
			}
			continue
		}
		fast++
		if string(got) != want {
			t.Fatalf("fast line differs:\n got %s\nwant %s", got, want)
		}
	}
	if fast < 100 {
		t.Fatalf("only %d lines took the fast path", fast)
	}
}

// TestNewAccessLog: the logger NewAccessLog makes writes the fast line, honours
// its level, and logs anything else as slog's JSON handler does.
func TestNewAccessLog(t *testing.T) {
	var buf bytes.Buffer
	lg := NewAccessLog(&buf, nil)
	l := accessLine{method: "GET", route: "/v1/requests/:id", status: 200, duration: 1500 * time.Microsecond, requestID: "r1", tenant: "acme", keyID: "key_x"}
	writeAccessLine(context.Background(), lg, time.Now(), &l)
	if !strings.Contains(buf.String(), `,"msg":"request","method":"GET","route":"/v1/requests/:id","status":200,"duration_ms":1.5,"request_id":"r1","tenant":"acme","key_id":"key_x"}`+"\n") {
		t.Fatalf("line %s", buf.String())
	}
	buf.Reset()
	lg.With("a", 1).Info("other", "b", 2)
	if !strings.Contains(buf.String(), `"msg":"other","a":1,"b":2}`) {
		t.Fatalf("other line %s", buf.String())
	}
	buf.Reset()
	writeAccessLine(context.Background(), NewAccessLog(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), time.Now(), &l)
	if buf.Len() != 0 {
		t.Fatalf("level warn wrote %s", buf.String())
	}
	// ReplaceAttr: the slog path, so the replacement applies
	lg = NewAccessLog(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == "tenant" {
			a.Value = slog.StringValue("X")
		}
		return a
	}})
	writeAccessLine(context.Background(), lg, time.Now(), &l)
	if !strings.Contains(buf.String(), `"tenant":"X"`) {
		t.Fatalf("ReplaceAttr ignored: %s", buf.String())
	}
}

func TestAppendRFC3339NanoLikeFormat(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("a", 5*3600+1800), time.FixedZone("b", -3599),
		time.FixedZone("c", -11*3600-1800), time.FixedZone("d", 14*3600), time.FixedZone("e", 59)}
	for i := range 20000 {
		at := time.Unix(rnd.Int64N(253402300800-86400)+86400-62135596800, rnd.Int64N(1e9)).In(zones[rnd.IntN(len(zones))])
		if i%4 == 0 {
			at = at.Truncate(time.Duration(1) * [...]time.Duration{time.Second, time.Millisecond, time.Microsecond, 10}[i/4%4])
		}
		if y := at.Year(); y < 0 || y > 9999 {
			continue
		}
		if got, want := string(appendRFC3339Nano(nil, at)), at.Format(time.RFC3339Nano); got != want {
			t.Fatalf("%v: got %s, want %s", at, got, want)
		}
	}
}

// TestSaneHostLikePattern: saneHost is the pattern it replaced.
func TestSaneHostLikePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$`)
	cases := []string{"", "localhost", "localhost:8080", "a.b-c.D9", "a:", "a:123456", "a:12345", ":80", "[::1]", "[::1]:443",
		"[]", "[::1", "[::1]x", "[::1]:", "[g::1]", "a_b", "a b", "é.com", "[::1]:80:", "a:8:0", "[[::1]]", "A.Z.a.z.0.9", "@", "[:.]"}
	rnd := rand.New(rand.NewPCG(7, 8))
	alphabet := "aZ09.-:[]_gG @\xff"
	for range 50000 {
		b := make([]byte, rnd.IntN(9))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, h := range cases {
		if got, want := saneHost(h), pattern.MatchString(h); got != want {
			t.Fatalf("saneHost(%q) = %v, the pattern says %v", h, got, want)
		}
	}
}

// TestCanonicalNames: setCanonical with our names writes what c.Set writes.
func TestCanonicalNames(t *testing.T) {
	for name, canon := range map[string]string{fiber.HeaderETag: canonETag, fiber.HeaderCacheControl: canonCacheControl,
		fiber.HeaderRetryAfter: canonRetryAfter, headerReqID: canonRequestID} {
		var a, b fasthttp.ResponseHeader
		a.Set(name, "v")
		b.SetCanonical([]byte(canon), []byte("v"))
		if a.String() != b.String() {
			t.Errorf("%s: c.Set writes %q, setCanonical %q", name, a.String(), b.String())
		}
	}
	var a, b fasthttp.ResponseHeader
	a.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	b.SetContentType(fiber.MIMEApplicationJSON)
	if a.String() != b.String() {
		t.Errorf("Content-Type: %q, %q", a.String(), b.String())
	}
	for _, v := range []int64{0, 1, -1, 1 << 62, -1 << 63} {
		if got := string(appendETag(nil, v)); got != etag(v) {
			t.Errorf("appendETag(%d) = %s, want %s", v, got, etag(v))
		}
	}
}
