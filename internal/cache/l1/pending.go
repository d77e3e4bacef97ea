package l1

// Store.pending answers most of the Get misses that ristretto has no entry
// for without mu and without a probe of keys. A Get reads keys only for a
// value ristretto may not have stored yet: Set counts each item it hands
// ristretto in the slot of its key's hash, and the item is uncounted
// (settled) once ristretto has stored it or will never store it.

// pendingSlots is the size of Store.pending: 16 KiB, small enough to stay
// in cache, and wide enough that the few dozen writes in flight rarely
// share a slot with the key looked up.
const pendingSlots = 4096

// costed is ristretto's Cost: its goroutine calls it as it takes it from
// the buffer to apply, and applies items one at a time, in order. So when
// it is called, the item it priced before has been stored (or refused):
// that one has settled. The last one waits for the next write, which only
// costs a Get of a key in its slot a probe of keys.
func (s *Store) costed(it *item) int64 {
	if prev := s.lastCosted; prev != nil {
		s.settle(prev)
	}
	s.lastCosted = it
	return it.cost
}

// settle uncounts it from pending, once: ristretto has stored it, or never
// will.
func (s *Store) settle(it *item) {
	if e := it.pending.Swap(0); e != 0 && e == s.epoch.Load() {
		s.pending[it.h%pendingSlots].Add(-1)
	}
}
