package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
)

// Watches of many requests (docs/reference.md §16; docs/waiting.md, Watching
// many requests).
//
// Each tenant shard has a change log (keys.changeLog), a stream the create
// and transition scripts append the changed record to in the step that makes
// the change, while the shard is watched: the meta field cw, which those
// scripts already read (create with its one HMGET), says until when. Writes
// never trim; the sweeper does (changelog_trim.lua), by time (the replay
// window) and by length, and moves the meta field cm, the newest id the log
// may have lost, along. A watch's position is the id of the last entry it
// has of each shard; it resumes when no shard lost an entry after its part
// of the position, and otherwise starts with a reset.
//
// On one replica the watches of one tenant share a feed: per shard, the
// hub's subscription to the shard's change channel (the same one long polls
// use: one connection per Redis shard), one read of the log in flight and at
// most one more queued behind it, and the last feedKeep entries, which every
// watch takes from. A watch that is further behind (it resumed from an older
// position, or its client was slow) reads the log itself until it catches up.
// After a resubscription the feed reads the log from where it was: nothing
// announced meanwhile is lost, because the log, not the announcement, holds
// the change.

const (
	// feedKeep is how many entries a feed keeps per shard for its watches.
	feedKeep = 64
	// feedReadCount and watchReadCount bound one read of a log by a feed and
	// by a watch catching up.
	feedReadCount  = 128
	watchReadCount = 256
)

// streamID is a Redis stream entry id.
type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) (streamID, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok || a == "" || b == "" || len(a) > 20 || len(b) > 20 {
		return streamID{}, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return streamID{}, false
	}
	id := streamID{ms, seq}
	if id.String() != s { // one spelling per position: "007-1" is not one
		return streamID{}, false
	}
	return id, true
}

func (a streamID) less(b streamID) bool { return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq }

func (a streamID) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

// next is the smallest id after a (XRANGE's start for "after a").
func (a streamID) next() streamID {
	if a.seq == ^uint64(0) {
		return streamID{a.ms + 1, 0}
	}
	return streamID{a.ms, a.seq + 1}
}

// logPosition is a watch's place in each of its tenant's shard logs; its text,
// the events' opaque id, is the ids joined by ".".
type logPosition []streamID

func (p logPosition) String() string {
	b := make([]byte, 0, len(p)*16)
	for i, x := range p {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, x.ms, 10)
		b = append(b, '-')
		b = strconv.AppendUint(b, x.seq, 10)
	}
	return string(b)
}

// parseLogPosition reads a position of n shards; false when s is not one.
func parseLogPosition(s string, n int) (logPosition, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != n {
		return nil, false
	}
	p := make(logPosition, n)
	for i, x := range parts {
		id, ok := parseStreamID(x)
		if !ok {
			return nil, false
		}
		p[i] = id
	}
	return p, true
}

// change is one entry of a log: the request as the change left it (shared by
// every watch: read only), nil for a gap entry.
type change struct {
	at  streamID
	req *domain.Request
}

// tenantFeed is what the watches of one tenant on one replica share.
type tenantFeed struct {
	h      *Hub
	tenant string
	tags   []string
	refs   int           // watches holding it; guarded by h.mu
	stop   chan struct{} // closed when the last watch leaves
	shards []*feedShard  // fixed once made

	mu   sync.Mutex
	wake chan struct{} // closed when any shard took new entries
}

// feedShard is one shard of a feed: its channel's listener and the entries
// read so far. Fields after ch are guarded by f.mu.
type feedShard struct {
	f   *tenantFeed
	tag string
	ch  *hubChannel // guarded by h.mu

	ready     bool     // base and top are set: reads may start
	base, top streamID // buf holds every entry after base, up to top
	buf       []change
	requested uint64 // reads asked for
	reading   bool
}

// refresh asks for a read of the shard's log started after this call (an
// announcement, or a resubscription). It runs under h.mu: it takes f.mu only.
func (sh *feedShard) refresh() {
	f := sh.f
	f.mu.Lock()
	defer f.mu.Unlock()
	sh.requested++
	sh.startLocked()
}

func (sh *feedShard) startLocked() {
	if sh.ready && !sh.reading {
		sh.reading = true
		go sh.read()
	}
}

// read reads the log until no read was asked for during the last one. A
// failed read is tried again (backing off) while the feed is held: the
// announcement that asked for it will not come again.
func (sh *feedShard) read() {
	f := sh.f
	s := f.h.s
	backoff := 20 * time.Millisecond
	for {
		f.mu.Lock()
		upto, from := sh.requested, sh.top
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(f.h.ctx, s.opts.OpTimeout)
		entries, reset, err := s.readChangeLog(ctx, sh.tag, from, feedReadCount)
		cancel()
		f.mu.Lock()
		again := true
		switch {
		case err != nil:
			if f.closed() {
				again = false
			}
		case reset:
			// The feed itself fell behind what the log keeps (a long
			// outage): it goes on from the log's mark, after which every
			// entry is there; its watches behind that read the log
			// themselves and learn the same.
			if len(entries) == 1 {
				sh.base, sh.top, sh.buf = entries[0].at, entries[0].at, nil
				f.wakeLocked()
			} else {
				err = errors.New("change log not armed")
			}
		default:
			if len(entries) > 0 {
				sh.buf = append(sh.buf, entries...)
				if k := len(sh.buf) - feedKeep; k > 0 {
					sh.base = sh.buf[k-1].at
					sh.buf = append(sh.buf[:0:0], sh.buf[k:]...)
				}
				sh.top = entries[len(entries)-1].at
				f.wakeLocked()
			}
			again = sh.requested != upto || len(entries) == feedReadCount
		}
		if !again || f.h.ctx.Err() != nil {
			sh.reading = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		if err != nil {
			select {
			case <-f.h.ctx.Done():
			case <-f.stop:
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		} else {
			backoff = 20 * time.Millisecond
		}
	}
}

func (f *tenantFeed) closed() bool {
	select {
	case <-f.stop:
		return true
	default:
		return false
	}
}

func (f *tenantFeed) wakeLocked() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// WatchTenant starts a watch of p.Tenant's requests (docs/reference.md §16): it
// returns once every shard's change channel is subscribed and every shard's
// log is on, so that no change acknowledged after it returns is missed. It is
// counted once against the read rate limits (p.Credential; p.Rate gets the
// counted limit). A position (p.LastEventID) that the logs no longer hold
// whole, or that is not one, makes the first event a reset.
func (h *Hub) WatchTenant(ctx context.Context, p domain.WatchParams) (domain.TenantWatch, error) {
	f, err := h.feed(ctx, p.Tenant)
	if err != nil {
		return nil, err
	}
	pos, ok := parseLogPosition(p.LastEventID, len(f.tags))
	// The position is checked against each log in the step that reads its
	// newest entry: a reset starts right there, and misses nothing after.
	tops, lost, err := h.s.armChangeLogs(ctx, f.tags, pos, h.s.counters(f.tags[0], ratelimit.ScopeRead, p.Credential), p.Rate)
	if err != nil {
		h.release(f)
		return nil, err
	}
	f.init(tops)
	w := &tenantWatch{f: f, filter: p.Filter}
	if p.LastEventID == "" {
		w.pos = tops
		return w, nil
	}
	for i := range pos {
		if tops[i].less(pos[i]) { // a position from a future this log never had
			ok = false
		}
	}
	if ok && !lost {
		w.pos = pos
	} else {
		w.pos, w.reset = tops, true
	}
	return w, nil
}

// init sets where each shard's feed starts, on the feed's first watch.
func (f *tenantFeed) init(tops []streamID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, sh := range f.shards {
		if !sh.ready {
			sh.ready, sh.base, sh.top = true, tops[i], tops[i]
			sh.requested++ // what was announced before it was ready
			sh.startLocked()
		}
	}
}

// feed returns the tenant's feed, made and subscribed on first use.
func (h *Hub) feed(ctx context.Context, tenant string) (*tenantFeed, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, backend("watch requests", errHubClosed)
	}
	if h.feeds == nil {
		h.feeds = map[string]*tenantFeed{}
	}
	f := h.feeds[tenant]
	fresh := f == nil
	if fresh {
		tags := h.s.tenantTags(tenant)
		f = &tenantFeed{h: h, tenant: tenant, tags: tags, stop: make(chan struct{}), wake: make(chan struct{})}
		for _, tag := range tags {
			f.shards = append(f.shards, &feedShard{f: f, tag: tag})
		}
		h.feeds[tenant] = f
		for _, sh := range f.shards {
			name := h.s.k.changes(sh.tag)
			ch := h.channels[name]
			if ch == nil {
				ch = &hubChannel{name: name, tenant: tenant, ready: make(chan struct{}), ids: map[string]*hubID{}}
				h.channels[name] = ch
			}
			if ch.listeners == nil {
				ch.listeners = map[*feedShard]struct{}{}
			}
			ch.listeners[sh] = struct{}{}
			ch.idleSince = time.Time{}
			sh.ch = ch
		}
	}
	f.refs++
	var waiting []chan struct{}
	for _, sh := range f.shards {
		if sh.ch.failing && !sh.ch.live {
			h.releaseLocked(f)
			h.mu.Unlock()
			return nil, backend("watch requests", errors.New("change channel not subscribed"))
		}
		if !sh.ch.live {
			waiting = append(waiting, sh.ch.ready)
		}
	}
	h.mu.Unlock()
	if fresh {
		h.poke()
		go f.keepArmed()
	}
	t := time.NewTimer(h.s.opts.OpTimeout)
	defer t.Stop()
	for _, ready := range waiting {
		select {
		case <-ready:
		case <-ctx.Done():
			h.release(f)
			return nil, backend("watch requests", ctx.Err())
		case <-t.C:
			h.release(f)
			return nil, backend("watch requests", errors.New("change channels not subscribed in time"))
		case <-h.ctx.Done():
			h.release(f)
			return nil, backend("watch requests", errHubClosed)
		}
	}
	return f, nil
}

// release drops one watch's hold of f; the last one stops it.
func (h *Hub) release(f *tenantFeed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseLocked(f)
}

func (h *Hub) releaseLocked(f *tenantFeed) {
	f.refs--
	if f.refs > 0 {
		return
	}
	delete(h.feeds, f.tenant)
	close(f.stop)
	for _, sh := range f.shards {
		delete(sh.ch.listeners, sh)
		if sh.ch.unused() {
			sh.ch.idleSince = time.Now()
		}
	}
}

// keepArmed arms the feed's logs again every quarter of the replay window
// while the feed is held, so that the scripts keep logging (cw) until a
// client that leaves now may still resume.
func (f *tenantFeed) keepArmed() {
	s := f.h.s
	t := time.NewTicker(max(s.opts.ReplayWindow/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.h.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(f.h.ctx, s.opts.OpTimeout)
			if _, _, err := s.armChangeLogs(ctx, f.tags, nil, counters{}, nil); err != nil {
				f.h.opts.Log.Warn("watch: keeping the change logs on failed; retrying", "err", err)
			}
			cancel()
		}
	}
}

// tenantWatch is one held watch.
type tenantWatch struct {
	f      *tenantFeed
	filter domain.WatchFilter
	pos    logPosition
	reset  bool // the next events start with a reset
	closed bool
}

// closedChan is always ready: a watch with more to read at once.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (w *tenantWatch) Position() string { return w.pos.String() }

func (w *tenantWatch) Next(ctx context.Context) ([]domain.WatchEvent, <-chan struct{}, error) {
	var out []domain.WatchEvent
	if w.reset {
		w.reset = false
		out = append(out, domain.WatchEvent{ID: w.pos.String(), Reset: true})
	}
	f := w.f
	// Shards the feed has no longer kept since the watch's position are read
	// first, so that a reset they find comes before any change.
	f.mu.Lock()
	var behind []int
	for i, sh := range f.shards {
		if w.pos[i].less(sh.base) {
			behind = append(behind, i)
		}
	}
	f.mu.Unlock()
	more := false
	var read [][]change
	for _, i := range behind {
		entries, reset, err := f.h.s.readChangeLog(ctx, f.tags[i], w.pos[i], watchReadCount)
		if err != nil {
			return out, nil, err
		}
		if reset {
			// The logs no longer hold every change since the position: the
			// client lists again, after this reset, so the watch goes on
			// from the logs' newest entries now.
			tops, _, err := f.h.s.armChangeLogs(ctx, f.tags, nil, counters{}, nil)
			if err != nil {
				return out, nil, err
			}
			w.pos = tops
			return append(out, domain.WatchEvent{ID: w.pos.String(), Reset: true}), closedChan, nil
		}
		read = append(read, entries)
		more = more || len(entries) == watchReadCount
	}
	for k, i := range behind {
		for _, c := range read[k] {
			w.pos[i] = c.at
			out = w.emit(out, c)
		}
	}
	f.mu.Lock()
	wake := f.wake
	for i, sh := range f.shards {
		if w.pos[i].less(sh.base) {
			more = true // still behind: read on at once
			continue
		}
		for _, c := range sh.buf {
			if w.pos[i].less(c.at) {
				w.pos[i] = c.at
				out = w.emit(out, c)
			}
		}
	}
	f.mu.Unlock()
	if more {
		return out, closedChan, nil
	}
	return out, wake, nil
}

// emit appends c as an event when it is a change the filter keeps.
func (w *tenantWatch) emit(out []domain.WatchEvent, c change) []domain.WatchEvent {
	if c.req == nil || !w.filter.Match(c.req) {
		return out
	}
	return append(out, domain.WatchEvent{ID: w.pos.String(), Request: c.req})
}

func (w *tenantWatch) Close() {
	if w.closed {
		return
	}
	w.closed = true
	w.f.h.release(w.f)
}

// armChangeLogs arms the logs of tags (changelog_arm.lua), in one round trip
// per Redis shard, and returns each one's newest id, and whether any log may
// have lost entries after pos (nil: no position). The first is counted
// against rc (rate counters; zero: not counted), its limit put in rate.
func (s *Store) armChangeLogs(ctx context.Context, tags []string, pos logPosition, rc counters, rate *domain.RateInfo) ([]streamID, bool, error) {
	now := s.now()
	until := ms(now.Add(s.opts.ReplayWindow + s.opts.ReplayWindow/2))
	calls := make([]scriptCall, len(tags))
	for i, tag := range tags {
		keys := []string{s.k.meta(tag), s.k.changeLog(tag)}
		if i == 0 {
			keys = rc.appendTo(keys)
		}
		part := ""
		if pos != nil {
			part = pos[i].String()
		}
		calls[i] = scriptCall{keys: keys, args: []any{ms(now), until, part}}
	}
	rs, err := s.runEach(ctx, s.sc.changelogArm, calls)
	if err != nil {
		return nil, false, backend("watch requests", err)
	}
	setRate(rate, rs[0])
	if err := s.outcome("watch requests", "", rs[0], codeOK); err != nil {
		return nil, false, err
	}
	tops := make([]streamID, len(rs))
	lost := false
	for i, r := range rs {
		if len(r.rest) < 2 {
			return nil, false, backend("watch requests", fmt.Errorf("unexpected arm reply %v", r.rest))
		}
		top, _ := r.rest[0].(string)
		id, ok := parseStreamID(top)
		if !ok {
			return nil, false, backend("watch requests", fmt.Errorf("unexpected log id %q", top))
		}
		tops[i] = id
		lost = lost || r.rest[1] == "1"
	}
	return tops, lost, nil
}

// readChangeLog reads up to count entries of tag's log after after; reset
// when the log may have lost some of them.
func (s *Store) readChangeLog(ctx context.Context, tag string, after streamID, count int) ([]change, bool, error) {
	r, err := s.run(ctx, s.sc.changelogRead, scriptCall{keys: []string{s.k.meta(tag), s.k.changeLog(tag)},
		args: []any{after.String(), after.next().String(), count}})
	if err != nil {
		return nil, false, backend("read the change log", err)
	}
	if r.code == 1 {
		// the mark, after which every entry is there, as the one entry
		if len(r.rest) == 1 {
			mark, _ := r.rest[0].(string)
			if at, ok := parseStreamID(mark); ok {
				return []change{{at: at}}, true, nil
			}
		}
		return nil, true, nil
	}
	out := make([]change, 0, len(r.rest))
	for _, e := range r.rest {
		c, err := decodeChange(e)
		if err != nil {
			return nil, false, backend("read the change log", err)
		}
		out = append(out, c)
	}
	return out, false, nil
}

// decodeChange reads one XRANGE entry of a log.
func decodeChange(e any) (change, error) {
	pair, ok := e.([]any)
	if !ok || len(pair) != 2 {
		return change{}, fmt.Errorf("unexpected log entry %v", e)
	}
	raw, _ := pair[0].(string)
	at, ok := parseStreamID(raw)
	if !ok {
		return change{}, fmt.Errorf("unexpected log id %q", raw)
	}
	fields, _ := pair[1].([]any)
	var id, rec string
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		switch k {
		case "i":
			id = v
		case "r":
			rec = v
		}
	}
	if id == "" {
		return change{at: at}, nil // a gap entry
	}
	req, err := decodeRecord(id, rec, false)
	if err != nil {
		return change{}, err
	}
	return change{at: at, req: req}, nil
}

// trimChangeLogs bounds the change logs of units' shards (changelog_trim.lua),
// a pipeline per pipelineBatch shards: the sweeper's part of the watches.
func (s *Store) trimChangeLogs(ctx context.Context, tags []string, now time.Time) error {
	cut := now.Add(-s.opts.ReplayWindow).UnixMilli()
	older := strconv.FormatInt(cut-1, 10) + "-18446744073709551615"
	kept := strconv.FormatInt(cut, 10) + "-0"
	for len(tags) > 0 {
		chunk := tags[:min(len(tags), pipelineBatch)]
		tags = tags[len(chunk):]
		calls := make([]scriptCall, len(chunk))
		for i, tag := range chunk {
			calls[i] = scriptCall{keys: []string{s.k.meta(tag), s.k.changeLog(tag)}, args: []any{older, kept, s.opts.ChangeLogEntries}}
		}
		if _, err := s.runEach(ctx, s.sc.changelogTrim, calls); err != nil {
			return backend("sweep: trim the change logs", err)
		}
	}
	return nil
}
