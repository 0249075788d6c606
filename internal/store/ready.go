package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

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

// ServerConfig reads Redis configuration parameters (CONFIG GET), for the
// start-up checks of the settings docs/operations.md requires. The embedded
// store has no CONFIG: it answers an error.
func (s *Store) ServerConfig(ctx context.Context, params ...string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	args := []any{"config", "get"}
	for _, p := range params {
		args = append(args, p)
	}
	cmd := redis.NewMapStringStringCmd(ctx, args...)
	_ = s.rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("config get %s: %w", strings.Join(params, " "), err)
	}
	return v, nil
}
