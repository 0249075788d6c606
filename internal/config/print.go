package config

import (
	"bytes"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

const (
	// mask replaces a secret when printed.
	mask = "***"
	// maskPlaceholder stands in for mask inside URLs; it is made only of
	// characters that URL encoding leaves alone.
	maskPlaceholder = "ASYNCSTATUS-MASKED-SECRET"
)

// Masked returns a copy of c fit for printing and logging: every secret that
// is set is replaced by "***" (for redis.url only the password part, so the
// host stays visible). Unset secrets stay empty, which shows they are unset.
// The copy shares slices and maps with c, except the one that holds secrets.
func (c Config) Masked() Config {
	c.Redis.URL = maskURL(c.Redis.URL)
	c.Redis.Password = maskString(c.Redis.Password)
	c.Auth.PollTokenSecret = maskString(c.Auth.PollTokenSecret)
	c.Tracing.OTLPEndpoint = maskURL(c.Tracing.OTLPEndpoint)
	c.Auth.KeyCheckSecret = maskString(c.Auth.KeyCheckSecret)
	c.Webhooks.SecretKey = maskString(c.Webhooks.SecretKey)
	if ks := c.Webhooks.PreviousSecretKeys; len(ks) > 0 {
		c.Webhooks.PreviousSecretKeys = make([]string, len(ks))
		for i, k := range ks {
			c.Webhooks.PreviousSecretKeys[i] = maskString(k)
		}
	}
	return c
}

func maskString(s string) string {
	if s == "" {
		return ""
	}
	return mask
}

// maskURL hides the password of a redis:// URL, both in the user info and in
// a password query parameter. A URL that does not parse is hidden entirely,
// since there is no telling where its password is.
func maskURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return mask
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			// url.UserPassword would escape "***" as %2A%2A%2A; use a
			// placeholder that needs no escaping and substitute afterwards.
			u.User = url.UserPassword(u.User.Username(), maskPlaceholder)
		}
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", maskPlaceholder)
		u.RawQuery = q.Encode()
	}
	return strings.ReplaceAll(u.String(), maskPlaceholder, mask)
}

// YAML prints c as a YAML document in the file's own shape, every key
// included, durations in Go syntax ("15m", "720h"), so that the output is
// itself a valid configuration file that loads back to c. It prints secrets
// as they are: print c.Masked().YAML() for humans.
func (c Config) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(encodeValue(reflect.ValueOf(c))); err != nil {
		return nil, fmt.Errorf("config: print: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: print: %w", err)
	}
	return buf.Bytes(), nil
}

// encodeValue builds the YAML node of v following the same yaml tags as
// decodeNode, so printing and loading stay symmetric for any new field.
func encodeValue(v reflect.Value) *yaml.Node {
	if v.Type() == durationType {
		return scalar(formatDuration(time.Duration(v.Int())), "")
	}
	switch v.Kind() {
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		t := v.Type()
		for i := range t.NumField() {
			name := yamlName(t.Field(i))
			if name == "" {
				continue
			}
			n.Content = append(n.Content, scalar(name, ""), encodeValue(v.Field(i)))
		}
		return n
	case reflect.Map:
		// Flow style keeps an empty map readable as {}; a non-empty one is
		// printed in block style below.
		n := &yaml.Node{Kind: yaml.MappingNode}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			n.Content = append(n.Content, scalar(k.String(), "!!str"), encodeValue(v.MapIndex(k)))
		}
		return n
	case reflect.Slice:
		// Lists of scalars read best on one line: [1s, 2s, 5s].
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range v.Len() {
			n.Content = append(n.Content, encodeValue(v.Index(i)))
		}
		return n
	case reflect.String:
		// The !!str tag makes the encoder quote values that would otherwise
		// read as another type ("true", "", "1").
		return scalar(v.String(), "!!str")
	case reflect.Bool:
		return scalar(strconv.FormatBool(v.Bool()), "")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return scalar(strconv.FormatInt(v.Int(), 10), "")
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return scalar(strconv.FormatUint(v.Uint(), 10), "")
	case reflect.Float32, reflect.Float64:
		return scalar(strconv.FormatFloat(v.Float(), 'g', -1, v.Type().Bits()), "")
	default:
		return scalar(fmt.Sprint(v.Interface()), "!!str")
	}
}

func scalar(value, tag string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}
