package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// listRounds bounds the list script calls one page may take: a round comes out
// short when records changed or vanished between the script and the read.
const listRounds = 4

// position is where a listing stands: the last examined entry, in the order
// created_at descending, id descending. Neither ever changes for a record, so a
// position stays meaningful while records are created, transitioned or removed.
type position struct {
	ms int64
	id string
}

// List answers one page of a tenant's requests, newest first (spec §4). See
// scripts/lua/list.lua for the plan and docs/listing.md for the costs.
func (s *Store) List(ctx context.Context, tenant string, f domain.ListFilter) (*domain.ListPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = domain.DefaultListLimit
	}
	limit = min(limit, domain.MaxListLimit)
	digest := filterDigest(tenant, f)
	var pos *position
	if f.Cursor != "" {
		p, ok := decodeCursor(f.Cursor, digest)
		if !ok {
			return nil, domain.ErrInvalidCursor()
		}
		pos = &p
	}

	minScore, maxMs := "-inf", int64(math.MaxInt64)
	if f.CreatedAfter != nil {
		// inclusive, and created_at has millisecond precision: round up
		ms := f.CreatedAfter.UnixMilli()
		if f.CreatedAfter.After(time.UnixMilli(ms)) {
			ms++
		}
		minScore = strconv.FormatInt(ms, 10)
	}
	if f.CreatedBefore != nil {
		maxMs = f.CreatedBefore.UnixMilli() // inclusive: UnixMilli rounds down
	}

	keys := []string{s.k.meta(tenant)}
	statuses := f.Statuses
	if len(statuses) == 0 {
		statuses = domain.Statuses[:]
	}
	letters := ""
	for _, st := range statuses {
		letters += statusCode[st]
	}
	wantStatus := map[domain.Status]bool{}
	for _, st := range f.Statuses {
		wantStatus[st] = true
	}

	page := &domain.ListPage{Items: make([]*domain.Request, 0, limit)}
	more := false
	for round := 0; round < listRounds && len(page.Items) < limit; round++ {
		maxScore, cID := "+inf", ""
		top := maxMs
		if pos != nil {
			top = min(top, pos.ms)
			cID = pos.id
		}
		if top != math.MaxInt64 {
			maxScore = strconv.FormatInt(top, 10)
		}
		r, err := s.run(ctx, s.sc.list, keys, letters, f.Type, maxScore, minScore,
			cID, strconv.Itoa(limit-len(page.Items)), s.k.indexPrefix(tenant))
		if err != nil {
			return nil, backend("list requests", err)
		}
		if r.code != codeOK {
			return nil, s.scriptError("list requests", "", r.code, r.rest)
		}
		if len(r.rest) < 2 {
			return nil, unexpected("list requests", r)
		}
		m, _ := r.rest[0].(int64)
		more = m == 1
		if lastID, _ := r.rest[1].(string); lastID != "" {
			ms, ok := idMillis(lastID)
			if !ok || !validID(lastID) {
				return nil, backend("list requests", fmt.Errorf("index entry %q is not a request id", lastID))
			}
			// An entry's score is its id's millisecond (list.lua relies on it too).
			pos = &position{ms: ms, id: lastID}
		}
		ids := make([]string, 0, len(r.rest)-2)
		for _, v := range r.rest[2:] {
			id, _ := v.(string)
			ids = append(ids, id)
		}
		reqs, err := s.hydrate(ctx, tenant, ids)
		if err != nil {
			return nil, err
		}
		for _, req := range reqs {
			switch {
			case req == nil: // vanished, or past retention (hydrate)
			case len(wantStatus) > 0 && !wantStatus[req.Status]: // moved on since the script
			// (no type check: a request's type never changes, and it came from its type's index)
			default:
				page.Items = append(page.Items, req)
			}
		}
		if !more {
			break
		}
	}
	if more && pos != nil {
		c, err := encodeCursor(digest, *pos)
		if err != nil {
			return nil, backend("list requests", err)
		}
		page.NextCursor = c
	}
	return page, nil
}

// hydrate reads the records of ids with one MGET (they share the tenant's slot,
// so this also works on a cluster). A vanished record, or one past its retention,
// is nil.
func (s *Store) hydrate(ctx context.Context, tenant string, ids []string) ([]*domain.Request, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.k.record(tenant, id)
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	vals, err := s.rdb.MGet(cctx, keys...).Result()
	if err != nil {
		return nil, backend("list requests: read records", err)
	}
	now := s.now().UnixMilli()
	out := make([]*domain.Request, len(ids))
	for i, v := range vals {
		rec, ok := v.(string)
		if !ok {
			continue
		}
		// listings do not carry events
		if req, err := decodeRecord(ids[i], rec, false); err == nil && (req.ExpiresAt == nil || req.ExpiresAt.UnixMilli() > now) {
			out[i] = req
		}
	}
	return out, nil
}

// Cursors are base64url of: version (1 byte), filter digest (8), created_at ms
// (8, big endian), id (16), then the first 8 bytes of an HMAC-SHA256 of all that.
// The MAC key is fixed: it detects garbling and tampering by accident, not by
// intent; a forged cursor could only name a position in the caller's own listing.
const cursorVersion = 1

var cursorKey = []byte("asyncstatus list cursor v1")

const cursorLen = 1 + 8 + 8 + 16 + 8

// filterDigest binds a cursor to the tenant and to the filter set (not to the page
// size, which may change from page to page).
func filterDigest(tenant string, f domain.ListFilter) [8]byte {
	var b strings.Builder
	b.WriteString(tenant)
	b.WriteString("\x00")
	b.WriteString(f.Type)
	b.WriteString("\x00")
	for _, st := range f.Statuses { // sorted and unique (wire.DecodeListQuery)
		b.WriteString(string(st) + ",")
	}
	for _, t := range []*time.Time{f.CreatedAfter, f.CreatedBefore} {
		b.WriteString("\x00")
		if t != nil {
			b.WriteString(strconv.FormatInt(t.UnixNano(), 10))
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	var d [8]byte
	copy(d[:], sum[:8])
	return d
}

func encodeCursor(digest [8]byte, p position) (string, error) {
	u, err := uuid.Parse(p.id)
	if err != nil {
		return "", fmt.Errorf("index entry %q is not a request id", p.id)
	}
	buf := make([]byte, 0, cursorLen)
	buf = append(buf, cursorVersion)
	buf = append(buf, digest[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(p.ms))
	buf = append(buf, u[:]...)
	mac := hmac.New(sha256.New, cursorKey)
	mac.Write(buf)
	buf = append(buf, mac.Sum(nil)[:8]...)
	return base64.RawURLEncoding.EncodeToString(buf), nil
}

func decodeCursor(c string, digest [8]byte) (position, bool) {
	buf, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(buf) != cursorLen || buf[0] != cursorVersion {
		return position{}, false
	}
	mac := hmac.New(sha256.New, cursorKey)
	mac.Write(buf[:cursorLen-8])
	if !hmac.Equal(mac.Sum(nil)[:8], buf[cursorLen-8:]) {
		return position{}, false
	}
	if !hmac.Equal(buf[1:9], digest[:]) {
		return position{}, false
	}
	ms := int64(binary.BigEndian.Uint64(buf[9:17]))
	u, err := uuid.FromBytes(buf[17:33])
	if err != nil || ms < 0 {
		return position{}, false
	}
	return position{ms: ms, id: u.String()}, true
}
