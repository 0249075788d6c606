package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

func TestDecodeCreateLabels(t *testing.T) {
	in, err := DecodeCreate([]byte(`{"type":"a","labels":{"team":"billing","env":"prod:eu/1"}}`), lim)
	if err != nil || in.Labels != "env=prod:eu/1,team=billing" {
		t.Fatalf("%+v %v", in, err)
	}
	if _, ok := fastCreate([]byte(`{"type":"a","labels":{"team":"billing","env":"prod"}}`), lim); !ok {
		t.Error("a body with plain labels takes the slow path")
	}
	for _, body := range []string{`{"type":"a","labels":{}}`, `{"type":"a","labels":null}`} {
		if in, err := DecodeCreate([]byte(body), lim); err != nil || in.Labels != "" {
			t.Errorf("%s: %+v %v", body, in, err)
		}
	}
	nine := `{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9"}`
	for labels, field := range map[string]string{
		`[]`: "labels", `"env=prod"`: "labels", `1`: "labels", nine: "labels",
		`{"Env":"x"}`: "labels.Env", `{"env":"-x"}`: "labels.env", `{"env":"x-"}`: "labels.env",
		`{"env":1}`: "labels.env", `{"env":""}`: "labels.env", `{"env":null}`: "labels.env",
		`{"env":"a b"}`: "labels.env", `{"env":"é"}`: "labels.env", `{"env":{"a":"b"}}`: "labels.env",
		`{"` + strings.Repeat("n", 64) + `":"v"}`: "labels." + strings.Repeat("n", 64),
		`{"n":"` + strings.Repeat("v", 64) + `"}`: "labels.n",
		`{"a":"1","a":"2"}`:                       "labels.a", // a duplicate member (the I-JSON check names it)
	} {
		_, err := DecodeCreate([]byte(`{"type":"a","labels":`+labels+`}`), lim)
		if err == nil {
			t.Errorf("%s: accepted", labels)
			continue
		}
		if got := fieldOf(t, err); got != field {
			t.Errorf("%s: field %q, want %q", labels, got, field)
		}
	}
	// the longest name and value are accepted
	long := `{"` + strings.Repeat("n", 63) + `":"` + strings.Repeat("v", 63) + `"}`
	if _, err := DecodeCreate([]byte(`{"type":"a","labels":`+long+`}`), lim); err != nil {
		t.Errorf("63-character name and value: %v", err)
	}
}

// TestLabelsInRepresentation: the representation carries labels as an object,
// omitted when there are none, byte for byte as encoding/json writes them.
func TestLabelsInRepresentation(t *testing.T) {
	for _, l := range []domain.Labels{"", "env=prod", "a=1,b=x:y/z.q-r_s"} {
		r := &domain.Request{ID: "x", Type: "t", Status: domain.StatusQueued, Labels: l}
		got, err := AppendRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(r)
		if string(got) != string(want) {
			t.Errorf("labels %q:\n got %s\nwant %s", l, got, want)
		}
		if (l == "") == strings.Contains(string(got), `"labels"`) {
			t.Errorf("labels %q: %s", l, got)
		}
		var back domain.Request
		if err := json.Unmarshal(got, &back); err != nil || back.Labels != l {
			t.Errorf("labels %q: read back %q %v", l, back.Labels, err)
		}
	}
}
