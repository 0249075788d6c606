package store

import (
	"strings"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// statusLetters spells each status of domain.Statuses, in that order, as the
// one letter the records, index keys, events, retention buckets, audit
// entries and webhook filters store. This is the one table of the letters:
// statusCode and codeStatus are derived from it, and the scripts get them as
// the constants statusConstants writes (S_QUEUED for 'q', ..., S_ALL and
// S_LIVE as Lua lists), so no script spells a letter itself
// (TestStatusLetters).
const statusLetters = "qpsfce"

// statusCode maps a status to its letter; codeStatus the other way.
var statusCode, codeStatus = statusMaps()

// statusArg is statusCode boxed once, for a script's ARGV: boxing a string
// allocates, and a transition passes a status letter on every call. The
// zero status (no guard) is "", as statusCode's missing entry reads.
var statusArg = func() map[domain.Status]any {
	m := map[domain.Status]any{"": ""}
	for s, c := range statusCode {
		m[s] = c
	}
	return m
}()

func statusMaps() (map[domain.Status]string, map[string]domain.Status) {
	if len(statusLetters) != len(domain.Statuses) {
		panic("store: statusLetters does not spell every status of domain.Statuses")
	}
	code := make(map[domain.Status]string, len(statusLetters))
	status := make(map[string]domain.Status, len(statusLetters))
	for i, s := range domain.Statuses {
		code[s], status[statusLetters[i:i+1]] = statusLetters[i:i+1], s
	}
	return code, status
}

// statusConstants hands the letters to the scripts, written into the code in
// place of their names (inline, like the record's field positions): S_<STATUS>
// as a string literal, S_ALL every letter and S_LIVE the non-terminal ones as
// Lua lists, in lifecycle order.
func statusConstants() []luaConst {
	out := make([]luaConst, 0, len(domain.Statuses)+2)
	var all, live []string
	for i, s := range domain.Statuses {
		lit := luaString(statusLetters[i : i+1])
		out = append(out, luaConst{"S_" + strings.ToUpper(string(s)), inlineLua(lit)})
		all = append(all, lit)
		if !s.Terminal() {
			live = append(live, lit)
		}
	}
	return append(out,
		luaConst{"S_ALL", inlineLua("{" + strings.Join(all, ", ") + "}")},
		luaConst{"S_LIVE", inlineLua("{" + strings.Join(live, ", ") + "}")})
}
