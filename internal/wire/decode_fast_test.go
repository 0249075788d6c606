package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// refLimits are the service's default limits (config defaults.go).
var refLimits = domain.Limits{ContextBytes: 4096, ResultBytes: 16384}

// reference reads the shared reference request's members: compact, as the load
// tool sends them, and as they stand (indented) in the file.
func reference(tb testing.TB) (compact, indented map[string][]byte) {
	tb.Helper()
	raw := testenv.ReferenceRequest(tb)
	compact, indented = map[string][]byte{}, map[string][]byte{}
	for _, k := range []string{"create", "processing", "complete"} {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw[k]); err != nil {
			tb.Fatal(err)
		}
		compact[k], indented[k] = buf.Bytes(), raw[k]
	}
	return compact, indented
}

// TestFastPathTaken guards the benchmarks' premise: the reference bodies and
// their everyday variants are decoded without the slow path.
func TestFastPathTaken(t *testing.T) {
	compact, indented := reference(t)
	for name, ref := range map[string]map[string][]byte{"compact": compact, "indented": indented} {
		if _, ok := fastCreate(ref["create"], refLimits); !ok {
			t.Errorf("%s create: slow path", name)
		}
		if _, ok := fastComplete(ref["complete"], refLimits); !ok {
			t.Errorf("%s complete: slow path", name)
		}
		if _, ok := fastProgress(ref["processing"]); !ok {
			t.Errorf("%s processing: slow path", name)
		}
	}
	for _, body := range []string{
		`{"result_type":"link","result":{"url":"https://f.example/x.pdf","expires_at":"2026-11-30T10:00:00Z"}}`,
		`{"result_type":"confirmation","result":{"confirmed":true}}`,
	} {
		if _, ok := fastComplete([]byte(body), refLimits); !ok {
			t.Errorf("%s: slow path", body)
		}
	}
	if _, ok := fastFail([]byte(`{"code":"ERR_X","reason":"disk full"}`)); !ok {
		t.Error("fail: slow path")
	}
}

// TestDecodeDoesNotAlias: fasthttp reuses request bodies, so nothing decoded may
// point into the body once the handler has returned.
func TestDecodeDoesNotAlias(t *testing.T) {
	compact, _ := reference(t)
	body := bytes.Clone(compact["create"])
	c, err := DecodeCreate(body, refLimits)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := decodeCreateSlow(compact["create"], refLimits)
	body2 := bytes.Clone(compact["complete"])
	d, err := DecodeComplete(body2, refLimits)
	if err != nil {
		t.Fatal(err)
	}
	want2, _ := decodeCompleteSlow(compact["complete"], refLimits)
	for _, b := range [][]byte{body, body2} {
		for i := range b {
			b[i] = 'X'
		}
	}
	if !reflect.DeepEqual(c, want) || !reflect.DeepEqual(d, want2) {
		t.Fatalf("decoded values changed with the body: %+v %+v", c, d)
	}
}

// seeds are bodies for the differential fuzzers: valid ones, and every kind of
// input the fast path must leave to the slow one.
var seeds = []string{
	`{"type":"statement.export","context":{"account":"acc_1","tax_year":2025},"estimated_duration_seconds":180}`,
	" \t\r\n{ \"type\" : \"a.b\" , \"context\" : { \"x\" : [ 1 , 2 ] , \"s\" : \"a b\\\" c\" } , \"estimated_duration_seconds\" : 30 } \n",
	`{"type":"a","context":null,"estimated_duration_seconds":null}`, `{"type":"a","context":{}}`, `{"type":"a","context":[]}`,
	`{"type":"a","context":"{}"}`, `{"type":"a","context":1}`, `{"type":"a","estimated_duration_seconds":"5"}`,
	`{"type":"a","estimated_duration_seconds":86401}`, `{"type":"a","estimated_duration_seconds":1e2}`,
	`{"type":"a","estimated_duration_seconds":1.0}`, `{"type":"a","estimated_duration_seconds":-0}`,
	`{"type":"a","estimated_duration_seconds":99999999999999999999999}`, `{"type":"a","estimated_duration_seconds":0}`,
	`{"type":"a","type":"b"}`, `{"type":"a","TYPE":"b"}`, `{"Type":"a"}`, `{"typ\u0065":"a"}`, `{"type":"\u0061"}`,
	`{"type":"a","extra":1}`, `{"type":null}`, `{"type":1}`, `{"type":""}`, `{"type":"A"}`, `{"type":"-a"}`,
	`{"type":"` + strings.Repeat("a", 64) + `"}`, `{"type":"` + strings.Repeat("a", 65) + `"}`,
	`{"type":"a"}{"type":"b"}`, `{"type":"a"} x`, "{\"type\":\"a\"}\xff", "\ufeff{\"type\":\"a\"}", "\v{\"type\":\"a\"}",
	`{"type":"a",}`, `{"type":"a"`, `{"type":"a","context":{"a":"` + "\xff\xfe" + `"}}`, "{\"type\":\"a\xff\"}",
	`{"type":"a","context":{"a":{"b":{"c":[[[{"d":null}]]]}}}}`, `{"type":"a","context":` + strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200) + `}`,
	`{"type":"a","context":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"result_type":"answer","result":{"statement_id":"stmt","pages":14,"totals":{"income":"48211.09"}}}`,
	`{ "result_type" : "answer" , "result" : { "a" : [ 1 , "x y" ] } }`, `{"result_type":"answer","result":[]}`,
	`{"result_type":"answer","result":null}`, `{"result_type":"answer"}`, `{"result":{}}`, `{"result_type":"other","result":{}}`,
	`{"result_type":"answer","result":{},"result":{"a":1}}`, `{"result_type":"Answer","result":{}}`, `{"result_type":"answ\u0065r","result":{}}`,
	`{"result_type":"link","result":{"url":"https://f.example/x.pdf","expires_at":"2026-11-30T10:00:00Z","size_bytes":1,"content_type":"a/b"}}`,
	`{"result_type":"link","result":{"url":"https://f.example/x.pdf","expires_at":"2026-11-30T10:00:00+25:00"}}`,
	`{"result_type":"link","result":{"url":1}}`, `{"result_type":"confirmation","result":{"confirmed":false,"message":"ok"}}`,
	`{"result_type":"confirmation","result":{"confirmed":"yes"}}`, `{"result_type":null,"result":null}`,
	`{"percent":40,"message":"page 6 of 14"}`, `{"percent":0}`, `{"percent":-0}`, `{"percent":101}`, `{"percent":null,"message":null}`,
	`{"message":""}`, `{"percent":5,"message":""}`, `{"message":"a<b & c>d"}`, `{"message":"\u00e9t\u00e9"}`, `{"message":"été"}`,
	"{\"message\":\"a\u2028b\"}", `{"message":"` + strings.Repeat("é", 256) + `"}`, `{"message":"` + strings.Repeat("é", 257) + `"}`,
	`{"code":"ERR_X"}`, `{"code":"ERR_X","reason":"disk full"}`, `{"code":"ERR_X","reason":""}`, `{"code":"9X"}`, `{"code":"E","reason":null}`,
	`{"reason":"\ud800"}`, `{}`, `[]`, `null`, `"a"`, ``, ` `, `{"a":1}`,
	// labels (docs/reference.md §16)
	`{"type":"a","labels":{"env":"prod","team":"billing-eu"}}`, ` {"type":"a", "labels" : { "b" : "x" , "a" : "y:z/1" } } `,
	`{"type":"a","labels":{}}`, `{"type":"a","labels":null}`, `{"type":"a","labels":[]}`, `{"type":"a","labels":"env=prod"}`,
	`{"type":"a","labels":{"Env":"x"}}`, `{"type":"a","labels":{"env":"-x"}}`, `{"type":"a","labels":{"env":"x-"}}`,
	`{"type":"a","labels":{"env":1}}`, `{"type":"a","labels":{"env":null}}`, `{"type":"a","labels":{"env":""}}`,
	`{"type":"a","labels":{"env":"a","env":"b"}}`, `{"type":"a","labels":{"\u0065nv":"x"}}`, `{"type":"a","labels":{"env":"\u0078"}}`,
	`{"type":"a","labels":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8"}}`,
	`{"type":"a","labels":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9"}}`,
	`{"type":"a","labels":{"` + strings.Repeat("n", 63) + `":"` + strings.Repeat("v", 63) + `"}}`,
	`{"type":"a","labels":{"` + strings.Repeat("n", 64) + `":"v"}}`, `{"type":"a","labels":{"n":"` + strings.Repeat("v", 64) + `"}}`,
	`{"type":"a","labels":{"n":"é"}}`, `{"type":"a","labels":{"n":"a b"}}`, `{"type":"a","labels":{"n":{"x":1}}}`,
}

func addSeeds(f *testing.F, withLimit bool) {
	compact, indented := map[string][]byte{}, map[string][]byte{}
	if b, err := os.ReadFile(testenv.ReferencePath(f)); err == nil {
		var raw map[string]json.RawMessage
		if json.Unmarshal(b, &raw) == nil {
			for k, v := range raw {
				var buf bytes.Buffer
				if json.Compact(&buf, v) == nil {
					compact[k], indented[k] = buf.Bytes(), v
				}
			}
		}
	}
	all := make([][]byte, 0, len(seeds)+6)
	for _, s := range seeds {
		all = append(all, []byte(s))
	}
	for _, m := range []map[string][]byte{compact, indented} {
		for _, v := range m {
			all = append(all, v)
		}
	}
	for _, b := range all {
		if withLimit {
			f.Add(b, uint16(4096))
			f.Add(b, uint16(20))
		} else {
			f.Add(b)
		}
	}
}

// decodeBoth runs the public decoder on a copy of body that it then spoils, so
// that a result aliasing the body shows as a difference from the slow path.
func decodeBoth[T any](t *testing.T, body []byte, public, slow func([]byte) (T, error)) {
	b := bytes.Clone(body)
	got, gotErr := public(b)
	for i := range b {
		b[i] = 0
	}
	want, wantErr := slow(body)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("body %q:\n fast %+v, %#v\n slow %+v, %#v", body, got, gotErr, want, wantErr)
	}
}

func FuzzDecodeCreateFastSlow(f *testing.F) {
	addSeeds(f, true)
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		lim := domain.Limits{ContextBytes: int(limit), ResultBytes: int(limit)}
		decodeBoth(t, body,
			func(b []byte) (domain.CreateInput, error) { return DecodeCreate(b, lim) },
			func(b []byte) (domain.CreateInput, error) { return decodeCreateSlow(b, lim) })
	})
}

func FuzzDecodeCompleteFastSlow(f *testing.F) {
	addSeeds(f, true)
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		lim := domain.Limits{ContextBytes: int(limit), ResultBytes: int(limit)}
		decodeBoth(t, body,
			func(b []byte) (domain.CompleteInput, error) { return DecodeComplete(b, lim) },
			func(b []byte) (domain.CompleteInput, error) { return decodeCompleteSlow(b, lim) })
	})
}

func FuzzDecodeTransitionFastSlow(f *testing.F) {
	addSeeds(f, false)
	f.Fuzz(func(t *testing.T, body []byte) {
		decodeBoth(t, body, DecodeProgress, decodeProgressSlow)
		decodeBoth(t, body, DecodeFail, decodeFailSlow)
	})
}

// benchDecode compares the slow (old) and the public (new) decoder on the
// reference body, compact as the load tool sends it and indented as in the file.
func benchDecode[T any](b *testing.B, member string, public, slow func([]byte) (T, error)) {
	compact, indented := reference(b)
	for _, c := range []struct {
		name string
		body []byte
		fn   func([]byte) (T, error)
	}{
		{"old", compact[member], slow}, {"new", compact[member], public},
		{"old-indented", indented[member], slow}, {"new-indented", indented[member], public},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if _, err := c.fn(c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeCreate(b *testing.B) {
	benchDecode(b, "create",
		func(body []byte) (domain.CreateInput, error) { return DecodeCreate(body, refLimits) },
		func(body []byte) (domain.CreateInput, error) { return decodeCreateSlow(body, refLimits) })
}

func BenchmarkDecodeComplete(b *testing.B) {
	benchDecode(b, "complete",
		func(body []byte) (domain.CompleteInput, error) { return DecodeComplete(body, refLimits) },
		func(body []byte) (domain.CompleteInput, error) { return decodeCompleteSlow(body, refLimits) })
}

func BenchmarkDecodeProgress(b *testing.B) {
	benchDecode(b, "processing", DecodeProgress, decodeProgressSlow)
}

// isIJSON: checkIJSON finds nothing to refuse in valid JSON b.
func isIJSON(b []byte) bool {
	fe, _, _ := checkIJSON(b)
	return fe == nil
}

// FuzzValueScanner holds the fast path's syntax check to json.Valid: it may
// decline only what nests too deep for it, never accept what json.Valid
// refuses, and its whitespace count must be what json.Compact removes.
func FuzzValueScanner(f *testing.F) {
	for _, s := range append(seeds, `-0.5e+7`, `01`, `1.`, `1e`, `-`, `"\u12g4"`, `"\/"`, "\"\x1f\"", `[1,]`, `[,1]`, `{"a" 1}`, `tru`, `nul`, `[]]`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		i := skipSpace(b, 0)
		end, space, ok := value(b, i, 0)
		ok = ok && skipSpace(b, end) == len(b)
		switch valid := json.Valid(b); {
		case ok && !valid:
			t.Fatalf("%q accepted, json.Valid refuses it", b)
		case ok && !isIJSON(b):
			t.Fatalf("%q accepted, it is not I-JSON", b)
		case !ok && valid && bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) < maxFastDepth && isIJSON(b) &&
			!bytes.Contains(b, []byte(`\`)) && bytes.Count(b, []byte(",")) < maxFastMembers:
			// Declining is allowed for what is not I-JSON, and for the fast
			// path's own limits: escapes (names are compared unescaped by the
			// slow path only) and objects of many members.
			t.Fatalf("%q declined, it is valid I-JSON", b)
		case ok:
			var buf bytes.Buffer
			if err := json.Compact(&buf, b[i:end]); err != nil || buf.Len() != end-i-space {
				t.Fatalf("%q: %d whitespace bytes counted, json.Compact removes %d", b, space, end-i-buf.Len())
			}
			if !bytes.Equal(compactCopy(field{raw: b[i:end], space: space}), buf.Bytes()) {
				t.Fatalf("%q: compactCopy differs from json.Compact", b)
			}
		}
	})
}
