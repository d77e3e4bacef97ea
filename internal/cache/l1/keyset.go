package l1

// keySet is the keys stored under one tag. Most tags name one entry
// (user:{id}, client:{id}), so a set's first key is held inline and a map
// is made only when a second key joins: indexing an entry under its
// per-id tag then allocates nothing, where a map per tag cost an
// allocation and most of an L1 write's index time on batched misses.
type keySet struct {
	one  string // the only key, while more is nil and has is set
	has  bool
	more map[string]struct{} // every key, once there were two
}

func (k *keySet) add(key string) {
	switch {
	case k.more != nil:
		k.more[key] = struct{}{}
	case !k.has:
		k.one, k.has = key, true
	case k.one != key:
		k.more = map[string]struct{}{k.one: {}, key: {}}
		k.one, k.has = "", false
	}
}

func (k *keySet) remove(key string) {
	if k.more != nil {
		delete(k.more, key)
	} else if k.has && k.one == key {
		k.one, k.has = "", false
	}
}

func (k *keySet) empty() bool { return !k.has && len(k.more) == 0 }

// list is a copy of the keys, to range over while they are removed.
func (k *keySet) list() []string {
	if k.more == nil {
		if k.has {
			return []string{k.one}
		}
		return nil
	}
	out := make([]string, 0, len(k.more))
	for key := range k.more {
		out = append(out, key)
	}
	return out
}
