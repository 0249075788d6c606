package store

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestKeySlot pins keySlot to Redis's slot function: the CRC16/XMODEM check
// value, the slots the Redis documentation gives, and CLUSTER KEYSLOT of the
// shared cluster for a thousand keys. It also shows that the decimal keys
// keyInSlot tries reach every one of the 16384 slots, so its search ends.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{"123456789": 0x31C3 % clusterSlots, "foo": 12182, "somekey": 11058, "": 0} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}

	seen, found := make([]bool, clusterSlots), 0
	for i := 0; found < clusterSlots; i++ {
		if i == 10_000_000 {
			t.Fatalf("10M decimal keys reach only %d slots", found)
		}
		if slot := keySlot(strconv.Itoa(i)); !seen[slot] {
			seen[slot], found = true, found+1
		}
	}
	s := &Store{}
	for _, slot := range []int{0, 1, 5460, 5461, 10922, 10923, 16383} {
		if k := s.keyInSlot(slot); keySlot(k) != slot || s.keyInSlot(slot) != k {
			t.Errorf("keyInSlot(%d) = %q (slot %d), then %q", slot, k, keySlot(k), s.keyInSlot(slot))
		}
	}

	for _, b := range testenv.Backends() {
		if b.Name != "cluster" {
			continue
		}
		cc := b.Client(t).(*redis.ClusterClient)
		for i := range 1000 {
			key := "k" + strconv.Itoa(i*7919)
			want, err := cc.ClusterKeySlot(context.Background(), key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := keySlot(key); got != int(want) {
				t.Fatalf("keySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
			}
		}
	}
}
