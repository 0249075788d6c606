package store

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Ready checks that Redis answers and has the scripts, loading them where they
// are missing (a restart empties the script cache).
//
// On a cluster it asks the master of every slot range, and no replica: our calls
// go to masters only, and a replica promoted later gets the scripts from each
// call's NOSCRIPT fallback. go-redis's cluster SCRIPT EXISTS asks every node,
// replicas included, so a dead replica made every instance of the service
// unready at once; its ForEachMaster re-reads the slot map first, from a node
// picked at random, which may be the dead one and spend the whole deadline.
func (s *Store) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return s.readyNode(ctx, s.rdb, "")
	}
	masters, err := s.slotMasters(ctx, cc)
	if err == nil {
		for _, m := range masters {
			if err = s.readyNode(ctx, m, m.Options().Addr+": "); err != nil {
				break
			}
		}
	}
	if err != nil {
		// A master that does not answer may have been replaced: let the next
		// probe see the new slot map.
		s.reloadTopology()
		return backend("ready", err)
	}
	return nil
}

// readyNode is Ready for one server; node names it in errors.
func (s *Store) readyNode(ctx context.Context, c redis.Cmdable, node string) error {
	if err := c.Ping(ctx).Err(); err != nil {
		return backend(node+"ping", err)
	}
	all := s.sc.all()
	hashes := make([]string, len(all))
	for i, sc := range all {
		hashes[i] = sc.Hash()
	}
	ok, err := c.ScriptExists(ctx, hashes...).Result()
	if err != nil {
		return backend(node+"script exists", err)
	}
	for i, exists := range ok {
		if !exists {
			if err := all[i].Load(ctx, c).Err(); err != nil {
				return backend(node+"script load", err)
			}
		}
	}
	return nil
}

// slotMasters returns the client go-redis uses for each slot range's master,
// one per master, from one CLUSTER SLOTS (sent, like any call, to a master). It
// fails when some slot has no master: calls for it cannot be served.
func (s *Store) slotMasters(ctx context.Context, cc *redis.ClusterClient) ([]*redis.Client, error) {
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, backend("cluster slots", err)
	}
	covered := 0
	seen := map[string]bool{}
	var masters []*redis.Client
	for _, r := range ranges {
		if len(r.Nodes) == 0 || r.Start < 0 || r.End < r.Start || r.End >= clusterSlots {
			continue
		}
		covered += r.End - r.Start + 1
		// The master of r in go-redis's own slot map, which is what our calls use.
		m, err := cc.MasterForKey(ctx, s.keyInSlot(r.Start))
		if err != nil {
			return nil, backend("master of slot "+strconv.Itoa(r.Start), err)
		}
		if addr := m.Options().Addr; !seen[addr] {
			seen[addr] = true
			masters = append(masters, m)
		}
	}
	if covered < clusterSlots {
		return nil, backend("cluster slots", errors.New(strconv.Itoa(clusterSlots-covered)+" slots have no master"))
	}
	return masters, nil
}

// keyInSlot returns a key that hashes to slot, found once and then remembered
// (a slot map has a handful of ranges and rarely changes).
func (s *Store) keyInSlot(slot int) string {
	s.mu.Lock()
	k, ok := s.slotKeys[slot]
	s.mu.Unlock()
	if ok {
		return k
	}
	// About 16,384 tries on average, each a CRC of a few bytes: well under a
	// millisecond, once per slot, and outside the lock creates also take.
	for i := 0; ; i++ {
		if k = strconv.Itoa(i); keySlot(k) == slot {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slotKeys == nil {
		s.slotKeys = map[int]string{}
	}
	s.slotKeys[slot] = k
	return k
}

// keySlot is Redis Cluster's slot of a key without a hash tag: CRC16
// (XMODEM: polynomial 0x1021, initial value 0) modulo 16384. go-redis has the
// same function, but in an internal package.
func keySlot(key string) int {
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}
