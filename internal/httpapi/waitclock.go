package httpapi

import (
	"net"
	"sync"
	"time"
)

// waitClock ends held long polls for the whole server: one goroutine, one
// ticker, instead of a timer and a heartbeat ticker per wait. With 10,000
// waits held, their 20,000 runtime timers made the runtime rescan its timer
// heap on every deadline change of every other request (runtime.timers.adjust
// was the top of the profile, and other clients got half their throughput;
// docs/performance.md, Waiting). A wait ends up to one tick (waitTick) after
// its time.
type waitClock struct {
	heartbeat time.Duration
	mu        sync.Mutex
	due       map[int64][]*heldWait // by deadline, rounded up to a tick
	held      map[*heldWait]struct{}
	running   bool
	lastBeat  time.Time
}

// waitTick is the clock's resolution.
const waitTick = 50 * time.Millisecond

// heldWait is one held long poll. end is closed when its time is up (timeUp)
// or its client left (gone).
type heldWait struct {
	conn   net.Conn
	end    chan struct{}
	ended  bool
	gone   bool
	bucket int64
}

// hold registers a wait of d on conn.
func (wc *waitClock) hold(conn net.Conn, d time.Duration) *heldWait {
	w := &heldWait{conn: conn, end: make(chan struct{})}
	b := time.Now().Add(d+waitTick-1).UnixNano() / int64(waitTick)
	w.bucket = b
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.due == nil {
		wc.due, wc.held = map[int64][]*heldWait{}, map[*heldWait]struct{}{}
	}
	wc.due[b] = append(wc.due[b], w)
	wc.held[w] = struct{}{}
	if !wc.running {
		wc.running = true
		wc.lastBeat = time.Now()
		go wc.run()
	}
	return w
}

// release forgets w (its wait ended for another reason).
func (wc *waitClock) release(w *heldWait) {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	delete(wc.held, w)
	w.ended = true // its bucket entry is dropped when the bucket is due
}

// run ticks while waits are held.
func (wc *waitClock) run() {
	t := time.NewTicker(waitTick)
	defer t.Stop()
	for now := range t.C {
		wc.mu.Lock()
		for b := range wc.due {
			if b*int64(waitTick) > now.UnixNano() {
				continue
			}
			for _, w := range wc.due[b] {
				if !w.ended {
					w.ended = true
					delete(wc.held, w)
					close(w.end)
				}
			}
			delete(wc.due, b)
		}
		var check []*heldWait
		if now.Sub(wc.lastBeat) >= wc.heartbeat {
			wc.lastBeat = now
			check = make([]*heldWait, 0, len(wc.held))
			for w := range wc.held {
				check = append(check, w)
			}
		}
		if len(wc.due) == 0 {
			wc.running = false
			wc.mu.Unlock()
			return
		}
		wc.mu.Unlock()
		for _, w := range check { // syscalls, outside the lock
			if peerClosed(w.conn) {
				wc.mu.Lock()
				if !w.ended {
					w.ended, w.gone = true, true
					delete(wc.held, w)
					close(w.end)
				}
				wc.mu.Unlock()
			}
		}
	}
}

// beats is the keep-alive clock of every open stream: one channel, closed and
// replaced every heartbeat, instead of a ticker per stream (the timer heap
// cost that waitClock avoids for long polls). It runs while streams are open.
type beats struct {
	every time.Duration
	mu    sync.Mutex
	ch    chan struct{}
	users int
}

// join registers a stream and returns the channel of the next beat.
func (b *beats) join() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.users++
	if b.ch == nil {
		b.ch = make(chan struct{})
		go b.run()
	}
	return b.ch
}

// next is the channel of the beat after the one just received.
func (b *beats) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *beats) leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.users--
}

func (b *beats) run() {
	t := time.NewTicker(b.every)
	defer t.Stop()
	for range t.C {
		b.mu.Lock()
		close(b.ch)
		if b.users == 0 {
			b.ch = nil
			b.mu.Unlock()
			return
		}
		b.ch = make(chan struct{})
		b.mu.Unlock()
	}
}
