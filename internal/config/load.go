package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// EnvPrefix starts the name of every environment override.
const EnvPrefix = "ASYNCSTATUS_"

var durationType = reflect.TypeFor[time.Duration]()

// Load builds the effective configuration: Defaults, then the YAML file at
// path (skipped when path is ""), then ASYNCSTATUS_* overrides read through
// getenv (nil means none), and finally Validate. It reports every problem it
// finds in one *Problems, each naming the key it is about, so that an
// operator fixes them all in one go rather than one restart at a time.
//
// getenv cannot tell an unset variable from an empty one, so an empty variable
// is treated as unset: an override cannot blank a key, the file can.
func Load(path string, getenv func(string) string) (Config, error) {
	return load(path, getenv, false)
}

// LoadServe is Load plus the rules only serve needs (ValidateServe): the
// secrets that must be set when Redis is configured. `config check` applies
// them too, so that a configuration it calls valid is one serve starts with.
func LoadServe(path string, getenv func(string) string) (Config, error) {
	return load(path, getenv, true)
}

func load(path string, getenv func(string) string, serve bool) (Config, error) {
	cfg := Defaults()
	var p Problems
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, &Problems{fmt.Errorf("config file: %w", err)}
		}
		if err := decodeYAML(data, &cfg); err != nil {
			for _, e := range flatten(err) {
				p = append(p, fmt.Errorf("config file %s: %w", path, e))
			}
		}
	}
	if getenv != nil {
		p = append(p, flatten(applyEnv(&cfg, getenv))...)
	}
	validate := cfg.Validate
	if serve {
		validate = cfg.ValidateServe
	}
	p = append(p, flatten(validate())...)
	if len(p) > 0 {
		return Config{}, &p
	}
	return cfg, nil
}

// Problems is every problem Load found, in the order found: the file's, the
// environment's, then the values'.
type Problems []error

// Error is the problem itself when there is one, else a count and one
// problem per indented line.
func (p *Problems) Error() string {
	if len(*p) == 1 {
		return "configuration: " + (*p)[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "configuration: %d problems:", len(*p))
	for _, e := range *p {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As see each problem.
func (p *Problems) Unwrap() []error { return *p }

// flatten is the errors an errors.Join holds (err itself otherwise; none for nil).
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// EnvName returns the environment variable that overrides the dotted key
// ("redis.url" -> "ASYNCSTATUS_REDIS_URL").
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// decodeYAML applies a YAML document onto cfg. Keys absent from the document
// keep their current value.
//
// It walks the parsed node tree against Config's yaml tags itself instead of
// handing the document to yaml.v3's Decoder (with KnownFields) for two
// reasons: yaml.v3 refuses a bare 0 for a time.Duration, and its errors
// ("line 7: cannot unmarshal !!str `fast` into time.Duration") do not name the
// key, while docs/reference.md §9 wants every bad value reported with its key. Unknown keys
// are rejected just as KnownFields would, but by dotted path.
func decodeYAML(data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file, or only comments: nothing to apply
		}
		return err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		// A second document would be silently ignored otherwise.
		return errors.New("holds more than one YAML document")
	}
	if len(doc.Content) == 0 {
		return nil
	}
	return decodeNode(doc.Content[0], reflect.ValueOf(cfg).Elem(), "")
}

// keyError is a problem with one key, located in the YAML file when line > 0.
func keyError(n *yaml.Node, key, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if key == "" {
		key = "(top level)"
	}
	if n != nil && n.Line > 0 {
		return fmt.Errorf("line %d: %s: %s", n.Line, key, msg)
	}
	return fmt.Errorf("%s: %s", key, msg)
}

// decodeNode sets v from n. A null value leaves v as it is, so that `key:`
// with nothing after it keeps the default instead of zeroing it.
func decodeNode(n *yaml.Node, v reflect.Value, key string) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	switch {
	case v.Type() == durationType:
		// handled as a scalar below; checked first because its Kind is Int64
	case v.Kind() == reflect.Struct:
		return decodeStruct(n, v, key)
	case v.Kind() == reflect.Map:
		return decodeMap(n, v, key)
	case v.Kind() == reflect.Slice:
		return decodeSlice(n, v, key)
	}
	if n.Kind != yaml.ScalarNode {
		return keyError(n, key, "want a single value, not a %s", kindName(n))
	}
	if err := setScalar(v, n.Value); err != nil {
		return keyError(n, key, "%v", err)
	}
	return nil
}

func decodeStruct(n *yaml.Node, v reflect.Value, key string) error {
	if n.Kind != yaml.MappingNode {
		return keyError(n, key, "want a mapping of keys, not a %s", kindName(n))
	}
	fields := fieldsByName(v.Type())
	seen := make(map[string]bool, len(n.Content)/2)
	var errs []error // every key's problem, not only the first
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		sub := join(key, kn.Value)
		idx, ok := fields[kn.Value]
		switch {
		case !ok:
			msg := "unknown key"
			if best := closest(kn.Value, slices.Sorted(maps.Keys(fields)), 0); best != "" {
				msg += "; did you mean " + join(key, best) + "?"
			}
			errs = append(errs, keyError(kn, sub, "%s", msg))
		case seen[kn.Value]:
			errs = append(errs, keyError(kn, sub, "key given twice"))
		default:
			seen[kn.Value] = true
			if err := decodeNode(vn, v.Field(idx), sub); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// decodeMap replaces the whole map: a by_type map in the file is the complete
// set of overrides, not a patch onto the defaults.
func decodeMap(n *yaml.Node, v reflect.Value, key string) error {
	if n.Kind != yaml.MappingNode {
		return keyError(n, key, "want a mapping, not a %s", kindName(n))
	}
	if v.Type().Key().Kind() != reflect.String {
		return keyError(n, key, "unsupported map key type %s", v.Type().Key())
	}
	if len(n.Content) == 0 {
		// nil, not empty: an empty mapping means "no overrides", like the
		// defaults, and this keeps a printed config round-tripping exactly.
		v.SetZero()
		return nil
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		sub := key + "[" + kn.Value + "]"
		k := reflect.ValueOf(kn.Value).Convert(v.Type().Key())
		if m.MapIndex(k).IsValid() {
			return keyError(kn, sub, "key given twice")
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		if err := decodeNode(vn, elem, sub); err != nil {
			return err
		}
		m.SetMapIndex(k, elem)
	}
	v.Set(m)
	return nil
}

// decodeSlice accepts a YAML sequence or, as in the environment, one
// comma-separated string ("1s,2s,5s" is how the spec writes schedules).
func decodeSlice(n *yaml.Node, v reflect.Value, key string) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if err := setList(v, n.Value); err != nil {
			return keyError(n, key, "%v", err)
		}
		return nil
	case yaml.SequenceNode:
	default:
		return keyError(n, key, "want a list, not a %s", kindName(n))
	}
	if len(n.Content) == 0 {
		v.SetZero() // nil, for the same reason as in decodeMap
		return nil
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, en := range n.Content {
		if err := decodeNode(en, s.Index(i), fmt.Sprintf("%s[%d]", key, i)); err != nil {
			return err
		}
	}
	v.Set(s)
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return "single value"
	}
}

// applyEnv overrides every scalar and list key from its ASYNCSTATUS_* variable.
// Maps (by_type) have no override: there is no unambiguous flat spelling for
// them, and request types may contain characters a variable name cannot.
func applyEnv(cfg *Config, getenv func(string) string) error {
	var errs []error
	walkKeys(reflect.ValueOf(cfg).Elem(), "", func(key string, v reflect.Value) {
		if v.Kind() == reflect.Map {
			return
		}
		name := EnvName(key)
		s := getenv(name)
		if s == "" {
			return
		}
		var err error
		if v.Kind() == reflect.Slice {
			err = setList(v, s)
		} else {
			err = setScalar(v, s)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (from %s): %w", key, name, err))
		}
	})
	return errors.Join(errs...)
}

// walkKeys calls fn for every leaf key (scalar, list or map) under the struct
// v, in declaration order, with its dotted path.
func walkKeys(v reflect.Value, prefix string, fn func(key string, v reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		key := join(prefix, name)
		f := v.Field(i)
		if f.Kind() == reflect.Struct {
			walkKeys(f, key, fn)
			continue
		}
		fn(key, f)
	}
}

// setList parses a comma-separated list into the slice v. Spaces around
// elements are ignored; an empty element is an error rather than being
// dropped, because "1s,,5s" is more likely a typo than intent.
func setList(v reflect.Value, s string) error {
	parts := strings.Split(s, ",")
	out := reflect.MakeSlice(v.Type(), len(parts), len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return fmt.Errorf("element %d of %q is empty", i+1, s)
		}
		if err := setScalar(out.Index(i), p); err != nil {
			return fmt.Errorf("element %d: %w", i+1, err)
		}
	}
	v.Set(out)
	return nil
}

// setScalar parses s into v by v's type. Strings are taken verbatim (a secret
// may legitimately contain spaces); everything else is trimmed first.
func setScalar(v reflect.Value, s string) error {
	if v.Kind() == reflect.String {
		v.SetString(s)
		return nil
	}
	s = strings.TrimSpace(s)
	if v.Type() == durationType {
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q: want true or false", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("invalid non-negative integer %q", s)
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("invalid number %q", s)
		}
		v.SetFloat(f)
	default:
		// Only reachable when a field of a new type is added to Config.
		return fmt.Errorf("config keys of type %s are not supported", v.Type())
	}
	return nil
}

// parseDuration is time.ParseDuration plus a bare "0", which everyone writes
// for "off" and which Go syntax would otherwise reject for lack of a unit.
func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want Go syntax such as 500ms, 10s, 15m, 24h", s)
	}
	return d, nil
}

// fieldsByName maps yaml key -> field index of struct type t.
func fieldsByName(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			m[name] = i
		}
	}
	return m
}

// yamlName is the key of field f, following yaml.v3's rules: the tag's name,
// or the lower-cased field name when untagged; "" when the field is skipped.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return strings.ToLower(f.Name)
	}
	return name
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
