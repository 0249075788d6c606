package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Hub is one replica's notification hub for waiting without polling (docs/reference.md §12).
// The scripts that change or remove a record announce "<id>,<version>" on its
// change channel (keys.changes, one per hash tag) in the same atomic step; the
// hub holds one subscription connection per shard that has watched channels
// (one in all on a single Redis, Sentinel or the embedded store; one per
// master on a Cluster, with sharded pub/sub) and wakes the local watches of
// that id.
//
// Pub/sub is at-most-once, so the hub never trusts an announcement: it only
// causes a read of the record, and
//   - a watch is returned only once its channel's subscription is confirmed,
//     so a caller that reads after Watch returns cannot miss a later change;
//   - when a subscription connection fails, or the server drops a subscription
//     (a slot moved), every watched id of the affected channels is read again
//     once the channel is subscribed anew;
//   - concurrent reads of one id collapse into one: one read in flight per id
//     and at most one more queued behind it, whose result every watch of the
//     id receives (1,000 waiters woken by one change cost one read).
//
// Watches of one id on one replica share everything; the hub's cost is per
// watched id, not per waiter. Make it with Store.NewHub; Close stops it.
type Hub struct {
	s    *Store
	opts HubOptions
	// cluster is set on a Redis Cluster: channels are placed on their slot's master.
	cluster *redis.ClusterClient

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the placer

	mu       sync.Mutex
	channels map[string]*hubChannel // by channel name
	shards   map[string]*hubShard   // by node address ("" off a Cluster)
	watches  int
	closed   bool
	feeds    map[string]*tenantFeed // by tenant: the watches of many requests (watch.go)
	// failing is set from a failed subscription until one is confirmed again,
	// so that an outage logs once, not once per attempt.
	failing bool
}

// HubOptions tune a Hub.
type HubOptions struct {
	// Log receives subscription failures. default: slog.Default().
	Log *slog.Logger
	// Observer is told about every wake-up. default: nil, nothing is observed.
	Observer HubObserver
	// Linger is how long a channel without watches stays subscribed, so that a
	// client that waits again at once does not pay a new subscription.
	// default: 30s.
	Linger time.Duration
	// Ping is how long a subscription connection may stay silent before the hub
	// pings it; a second silent Ping means the connection is lost. default: 5s.
	Ping time.Duration
}

// HubObserver learns about wake-ups (metrics). It must be safe for concurrent
// use and quick.
type HubObserver interface {
	// Woke is called once per read caused by announcements: watches is how many
	// watches received its snapshot, d the time from the first announcement the
	// read answers to the snapshot's delivery.
	Woke(watches int, d time.Duration)
}

// hubChannel is one subscribed (or to be subscribed) change channel.
type hubChannel struct {
	name, tenant string
	shard        *hubShard     // nil while not subscribed: the placer subscribes it
	live         bool          // the subscription is confirmed
	ready        chan struct{} // closed while live; replaced when the subscription is lost
	resub        bool          // lost while live: read every id again once live
	failing      bool          // the last attempt to subscribe failed: Watch fails at once
	ids          map[string]*hubID
	idleSince    time.Time // when the last watch left (zero while watched)
	// listeners hear of every announcement on the channel and of every
	// resubscription: the tenant feeds of watches (watch.go).
	listeners map[*feedShard]struct{}
}

// unused reports whether nothing follows the channel any more.
func (ch *hubChannel) unused() bool { return len(ch.ids) == 0 && len(ch.listeners) == 0 }

// hubID is one watched request.
type hubID struct {
	ch        *hubChannel
	id        string
	watches   map[*hubWatch]struct{}
	requested uint64    // reads asked for so far
	reading   bool      // a read is in flight
	wokeAt    time.Time // the first announcement not yet answered by a read
}

// hubShard is one subscription connection.
type hubShard struct {
	addr     string
	ps       *redis.PubSub
	sharded  bool
	channels map[string]*hubChannel
	unsub    map[string]int // unsubscriptions asked for, not yet confirmed
	dead     bool
}

// NewHub starts the store's notification hub.
func (s *Store) NewHub(o HubOptions) *Hub {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Linger <= 0 {
		o.Linger = 30 * time.Second
	}
	if o.Ping <= 0 {
		o.Ping = 5 * time.Second
	}
	h := &Hub{s: s, opts: o, kick: make(chan struct{}, 1),
		channels: map[string]*hubChannel{}, shards: map[string]*hubShard{}}
	h.cluster, _ = s.rdb.(*redis.ClusterClient)
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.wg.Add(1)
	go h.placer()
	return h
}

// Close stops the hub: its subscriptions end, and open watches get no more
// snapshots.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	shards := h.shards
	h.shards = map[string]*hubShard{}
	for _, sh := range shards {
		sh.dead = true
	}
	h.mu.Unlock()
	h.cancel()
	for _, sh := range shards {
		_ = sh.ps.Close()
	}
	h.wg.Wait()
}

// Watching is the number of open watches.
func (h *Hub) Watching() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watches
}

// Subscriptions is the number of subscription connections the hub holds.
func (h *Hub) Subscriptions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.shards)
}

var errHubClosed = errors.New("notification hub closed")

// Watch starts following (tenant, id). It returns once the subscription that
// carries the id's announcements is confirmed, so that a read made after it
// returns misses no later change. It fails with BACKEND_UNAVAILABLE at once
// while the channel cannot be subscribed (Redis away), or after the store's
// op timeout; a malformed id is NOT_FOUND, as for a poll. The caller reads the
// request itself after Watch returns (its first read, e.g. the poll), and
// must Close the watch. The hub keeps tenant and id in its maps: they are
// the caller's own strings (as every argument of the store: domain.Call).
func (h *Hub) Watch(ctx context.Context, tenant, id string) (domain.Watch, error) {
	if !validID(id) {
		return nil, domain.ErrNotFound()
	}
	name := h.s.k.changes(h.s.idTag(tenant, id))
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, backend("watch request "+id, errHubClosed)
	}
	ch := h.channels[name]
	fresh := ch == nil
	if fresh {
		ch = &hubChannel{name: name, tenant: tenant, ready: make(chan struct{}), ids: map[string]*hubID{}}
		h.channels[name] = ch
	}
	if ch.failing && !ch.live {
		h.mu.Unlock()
		return nil, backend("watch request "+id, errors.New("change channel not subscribed"))
	}
	w := ch.ids[id]
	if w == nil {
		w = &hubID{ch: ch, id: id, watches: map[*hubWatch]struct{}{}}
		ch.ids[id] = w
	}
	wa := &hubWatch{h: h, w: w, c: make(chan domain.Snapshot, 1)}
	w.watches[wa] = struct{}{}
	ch.idleSince = time.Time{}
	h.watches++
	live, ready := ch.live, ch.ready
	h.mu.Unlock()
	if fresh {
		h.poke()
	}
	if live {
		return wa, nil
	}
	t := time.NewTimer(h.s.opts.OpTimeout)
	defer t.Stop()
	select {
	case <-ready:
		return wa, nil
	case <-ctx.Done():
		wa.Close()
		return nil, backend("watch request "+id, ctx.Err())
	case <-t.C:
		wa.Close()
		return nil, backend("watch request "+id, errors.New("change channel not subscribed in time"))
	case <-h.ctx.Done():
		wa.Close()
		return nil, backend("watch request "+id, errHubClosed)
	}
}

// WaitForChange waits until the request's version is no longer version (or
// it is terminal, or gone), or ctx ends, and returns the request as it is then
// (with ctx's end, one last read made after it). It is Watch, a first read
// and the loop a long poll makes, for callers that need no more (live pages).
func (h *Hub) WaitForChange(ctx context.Context, tenant, id string, version int64) (*domain.Request, error) {
	wa, err := h.Watch(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer wa.Close()
	res, err := h.s.read(context.WithoutCancel(ctx), domain.PollParams{Call: domain.Call{Tenant: tenant}, ID: id}, false)
	for {
		if err != nil {
			return nil, err
		}
		if r := res.Request; r.Version != version || r.Done {
			return r, nil
		}
		select {
		case snap := <-wa.Changes():
			res.Request, err = snap.Request, snap.Err
		case <-ctx.Done():
			snap := domain.FinalRead(wa, h.s.opts.OpTimeout)
			return snap.Request, snap.Err
		}
	}
}

// hubWatch is one Watch.
type hubWatch struct {
	h      *Hub
	w      *hubID
	c      chan domain.Snapshot
	closed bool
}

func (wa *hubWatch) Changes() <-chan domain.Snapshot { return wa.c }

func (wa *hubWatch) Refresh() uint64 {
	wa.h.mu.Lock()
	defer wa.h.mu.Unlock()
	return wa.h.refreshLocked(wa.w, time.Time{})
}

func (wa *hubWatch) Close() {
	h := wa.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if wa.closed {
		return
	}
	wa.closed = true
	h.watches--
	w := wa.w
	delete(w.watches, wa)
	if len(w.watches) == 0 && !w.reading {
		h.forgetLocked(w)
	}
}

// offer hands snap to the watch, replacing one it has not taken yet. Only the
// hub sends on c, under h.mu, so the second send cannot block.
func (wa *hubWatch) offer(snap domain.Snapshot) {
	select {
	case wa.c <- snap:
	default:
		select {
		case <-wa.c:
		default:
		}
		wa.c <- snap
	}
}

// forgetLocked drops an id nobody watches any more.
func (h *Hub) forgetLocked(w *hubID) {
	ch := w.ch
	if ch.ids[w.id] == w {
		delete(ch.ids, w.id)
	}
	if ch.unused() {
		ch.idleSince = time.Now()
	}
}

// refreshLocked asks for a read of w started after this call; it returns the
// request's number, which the snapshot of that read carries as Seq. at is when
// the announcement that causes it arrived (zero for other causes).
func (h *Hub) refreshLocked(w *hubID, at time.Time) uint64 {
	w.requested++
	if w.wokeAt.IsZero() && !at.IsZero() {
		w.wokeAt = at
	}
	if !w.reading && !h.closed {
		w.reading = true
		h.wg.Add(1)
		go h.read(w)
	}
	return w.requested
}

// read reads w until no read was asked for during the last one, and hands
// each result to every watch of w.
func (h *Hub) read(w *hubID) {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		upto, woke := w.requested, w.wokeAt
		w.wokeAt = time.Time{}
		tenant, id := w.ch.tenant, w.id
		h.mu.Unlock()
		res, err := h.s.read(h.ctx, domain.PollParams{Call: domain.Call{Tenant: tenant}, ID: id}, false)
		snap := domain.Snapshot{Request: res.Request, Err: err, Seq: upto}
		h.mu.Lock()
		n := len(w.watches)
		for wa := range w.watches {
			wa.offer(snap)
		}
		again := w.requested != upto && !h.closed
		if !again {
			w.reading = false
			if len(w.watches) == 0 {
				h.forgetLocked(w)
			}
		}
		h.mu.Unlock()
		if o := h.opts.Observer; o != nil && !woke.IsZero() {
			o.Woke(n, time.Since(woke))
		}
		if !again {
			return
		}
	}
}

// poke wakes the placer.
func (h *Hub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// placer is the one goroutine that subscribes and unsubscribes, so that the
// commands on a subscription connection keep the order the hub decided: an
// UNSUBSCRIBE of a lingering channel never overtakes its new SUBSCRIBE.
func (h *Hub) placer() {
	defer h.wg.Done()
	janitor := time.NewTicker(max(h.opts.Linger/2, 10*time.Millisecond))
	defer janitor.Stop()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.kick:
		case <-janitor.C:
			h.unsubscribeIdle()
		}
		for {
			failed := false
			for _, ch := range h.unplaced() {
				if err := h.place(ch); err != nil {
					failed = true
					h.mu.Lock()
					ch.failing = true
					first := h.startFailingLocked()
					h.mu.Unlock()
					if first {
						h.opts.Log.Warn("notification hub: subscribing failed; retrying, and waits are answered as ordinary polls until it works",
							"channel", ch.name, "err", err)
					}
				}
			}
			if !failed {
				backoff = 50 * time.Millisecond
				break
			}
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

// unplaced lists the channels to subscribe, and drops those nobody needs.
func (h *Hub) unplaced() []*hubChannel {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*hubChannel
	for name, ch := range h.channels {
		if ch.shard != nil {
			continue
		}
		if ch.unused() {
			delete(h.channels, name)
			continue
		}
		out = append(out, ch)
	}
	return out
}

// place subscribes ch on the connection of its shard, opening it if needed.
func (h *Hub) place(ch *hubChannel) error {
	ctx, cancel := context.WithTimeout(h.ctx, h.s.opts.OpTimeout)
	defer cancel()
	node, addr := h.s.rdb, ""
	if h.cluster != nil {
		c, err := h.cluster.MasterForKey(ctx, ch.name)
		if err != nil {
			return fmt.Errorf("find the shard of %s: %w", ch.name, err)
		}
		node, addr = c, c.Options().Addr
	}
	h.mu.Lock()
	sh := h.shards[addr]
	h.mu.Unlock()
	opened := sh == nil
	if opened {
		sh = &hubShard{addr: addr, sharded: h.cluster != nil, channels: map[string]*hubChannel{}, unsub: map[string]int{}}
		if sh.sharded {
			sh.ps = node.SSubscribe(h.ctx)
		} else {
			sh.ps = node.Subscribe(h.ctx)
		}
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = sh.ps.Close()
		return errHubClosed
	}
	if opened {
		h.shards[addr] = sh
	}
	ch.shard = sh
	sh.channels[ch.name] = ch
	h.mu.Unlock()
	var err error
	if sh.sharded {
		err = sh.ps.SSubscribe(ctx, ch.name)
	} else {
		err = sh.ps.Subscribe(ctx, ch.name)
	}
	if err != nil {
		h.lost(sh, err)
		return fmt.Errorf("subscribe %s: %w", ch.name, err)
	}
	if opened {
		h.wg.Add(1)
		go h.receive(sh)
	}
	return nil
}

// unsubscribeIdle ends the subscriptions of channels unwatched for Linger, and
// closes connections left without channels.
func (h *Hub) unsubscribeIdle() {
	type unsub struct {
		sh   *hubShard
		name string
	}
	var todo []unsub
	var closing []*hubShard
	h.mu.Lock()
	for name, ch := range h.channels {
		if !ch.unused() || ch.idleSince.IsZero() || time.Since(ch.idleSince) < h.opts.Linger {
			continue
		}
		delete(h.channels, name)
		if sh := ch.shard; sh != nil {
			delete(sh.channels, name)
			if len(sh.channels) == 0 {
				sh.dead = true
				delete(h.shards, sh.addr)
				closing = append(closing, sh)
			} else {
				sh.unsub[name]++
				todo = append(todo, unsub{sh, name})
			}
		}
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(h.ctx, h.s.opts.OpTimeout)
	defer cancel()
	for _, u := range todo {
		var err error
		if u.sh.sharded {
			err = u.sh.ps.SUnsubscribe(ctx, u.name)
		} else {
			err = u.sh.ps.Unsubscribe(ctx, u.name)
		}
		if err != nil {
			h.lost(u.sh, err)
		}
	}
	for _, sh := range closing {
		_ = sh.ps.Close()
	}
}

// receive reads one subscription connection until it fails or is closed.
func (h *Hub) receive(sh *hubShard) {
	defer h.wg.Done()
	pinged := false
	for {
		msg, err := sh.ps.ReceiveTimeout(h.ctx, h.opts.Ping)
		if err != nil {
			if h.gone(sh) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				// Quiet for a while: a PING, whose pong the next receive
				// reads, tells a live connection from a dead one.
				pinged = true
				if err := sh.ps.Ping(h.ctx); err != nil {
					h.lost(sh, err)
					return
				}
				continue
			}
			h.lost(sh, err)
			return
		}
		pinged = false
		now := time.Now()
		switch m := msg.(type) {
		case *redis.Message:
			h.announced(m.Channel, m.Payload, now)
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				h.confirmed(sh, m.Channel, now)
			case "unsubscribe", "sunsubscribe":
				h.unsubscribed(sh, m.Channel)
			}
		}
	}
}

// gone reports whether sh was closed on purpose (hub closed, no channels left).
func (h *Hub) gone(sh *hubShard) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sh.dead || h.closed
}

// lost handles a failed subscription connection: its channels are subscribed
// again (on a Cluster, on whichever master owns their slot now), and once they
// are, every watched id of theirs is read again, because announcements made
// meanwhile are lost.
func (h *Hub) lost(sh *hubShard, err error) {
	h.mu.Lock()
	if sh.dead || h.closed {
		h.mu.Unlock()
		return
	}
	sh.dead = true
	if h.shards[sh.addr] == sh {
		delete(h.shards, sh.addr)
	}
	for _, ch := range sh.channels {
		h.unplaceLocked(ch)
	}
	first := h.startFailingLocked()
	h.mu.Unlock()
	if first {
		h.opts.Log.Warn("notification hub: subscription connection lost; resubscribing, and every waiter of its channels reads again",
			"node", sh.addr, "err", err)
	}
	_ = sh.ps.Close()
	if h.cluster != nil {
		h.cluster.ReloadState(h.ctx) // follow a failover or a slot move
	}
	h.poke()
}

// startFailingLocked notes a failure; true for the first of an outage, the
// one to log.
func (h *Hub) startFailingLocked() bool {
	first := !h.failing
	h.failing = true
	return first
}

// unplaceLocked marks ch as not subscribed, for the placer.
func (h *Hub) unplaceLocked(ch *hubChannel) {
	ch.shard = nil
	if ch.live {
		ch.live = false
		ch.ready = make(chan struct{})
		ch.resub = true
	}
}

// confirmed marks a channel live; after a loss, its ids are read again.
func (h *Hub) confirmed(sh *hubShard, name string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := sh.channels[name]
	if ch == nil || ch.shard != sh || ch.live {
		return
	}
	ch.live, ch.failing = true, false
	close(ch.ready)
	if h.failing {
		h.failing = false
		h.opts.Log.Info("notification hub: subscribed again", "node", sh.addr)
	}
	if ch.resub {
		ch.resub = false
		for _, w := range ch.ids {
			h.refreshLocked(w, at)
		}
		for l := range ch.listeners {
			l.refresh()
		}
	}
}

// unsubscribed handles an unsubscription: one the hub asked for is done; one
// the server made (a Cluster slot that moved drops its sharded subscribers) is
// a loss of that channel.
func (h *Hub) unsubscribed(sh *hubShard, name string) {
	h.mu.Lock()
	if sh.unsub[name] > 0 {
		sh.unsub[name]--
		if sh.unsub[name] == 0 {
			delete(sh.unsub, name)
		}
		h.mu.Unlock()
		return
	}
	ch := sh.channels[name]
	if ch == nil || ch.shard != sh {
		h.mu.Unlock()
		return
	}
	delete(sh.channels, name)
	h.unplaceLocked(ch)
	h.mu.Unlock()
	h.poke()
}

// announced wakes the watches of the id an announcement names; one that
// cannot be read wakes every watch of its channel.
func (h *Hub) announced(name, payload string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	if ch == nil {
		return
	}
	for l := range ch.listeners {
		l.refresh()
	}
	if id, _, ok := strings.Cut(payload, ","); ok && validID(id) {
		if w := ch.ids[id]; w != nil {
			h.refreshLocked(w, at)
		}
		return
	}
	for _, w := range ch.ids {
		h.refreshLocked(w, at)
	}
}
