package l1

import "github.com/sidecache/sidecache/internal/cache"

// tagNode is an item's link in the list of the items stored under one of
// its tags: item.nodes[i] belongs to the list of e.Tags[i]. The lists are
// circular and doubly linked, and s.tags maps a tag to one node of its
// list, its head, so that:
//
//   - indexing an entry under a tag that already has entries (the route's
//     tag, which every entry of the route carries) is one lookup and a
//     splice: no insert into a set holding every key of the route, no
//     growth of that set while the cache fills;
//   - unindexing it writes s.tags only when the node is the head, and
//     DeleteTags, which takes the tail first, writes it once per tag;
//   - a tag names its keys without a scan of the cache (KeysWithTag).
//
// next is nil while the node is in no list: its item is not indexed, or
// the tag repeats an earlier one of the same entry (an item is listed once
// per tag, so DeleteTags counts it once).
type tagNode struct {
	next, prev *tagNode
	it         *item
	head       bool // s.tags maps the tag to this node
}

// newItem allocates the item for e under key with its tag nodes in the
// same allocation for the usual tag counts (the route's, an id's, the URI's
// one or two), where a separate slice would cost a second allocation.
func newItem(key string, e *cache.Entry) *item {
	var it *item
	switch len(e.Tags) {
	case 0:
		it = new(item)
	case 1:
		p := new(struct {
			item
			n [1]tagNode
		})
		it, p.nodes = &p.item, p.n[:]
	case 2:
		p := new(struct {
			item
			n [2]tagNode
		})
		it, p.nodes = &p.item, p.n[:]
	case 3:
		p := new(struct {
			item
			n [3]tagNode
		})
		it, p.nodes = &p.item, p.n[:]
	case 4:
		p := new(struct {
			item
			n [4]tagNode
		})
		it, p.nodes = &p.item, p.n[:]
	default:
		it = &item{nodes: make([]tagNode, len(e.Tags))}
	}
	it.key, it.e, it.cost = key, e, cost(key, e)
	return it
}

// linkLocked adds it's nodes to the lists of its tags.
func (s *Store) linkLocked(it *item) {
	tags := it.e.Tags
	for i, tag := range tags {
		n := &it.nodes[i]
		n.it = it
		if i > 0 && repeats(tags[:i], tag) {
			continue
		}
		h := s.tags[tag]
		if h == nil {
			n.next, n.prev, n.head = n, n, true
			s.tags[tag] = n
			continue
		}
		// At the tail, before the head: s.tags is not written.
		n.prev, n.next = h.prev, h
		h.prev.next = n
		h.prev = n
	}
}

func repeats(earlier []string, tag string) bool {
	for _, t := range earlier {
		if t == tag {
			return true
		}
	}
	return false
}

// unlinkLocked removes n, listed under tag, from its list, dropping the
// tag from s.tags with its last node.
func (s *Store) unlinkLocked(n *tagNode, tag string) {
	if n.next == n {
		delete(s.tags, tag)
	} else {
		n.prev.next, n.next.prev = n.next, n.prev
		if n.head {
			n.next.head = true
			s.tags[tag] = n.next
		}
	}
	// Cleared, so that an unindexed item ristretto still holds keeps no
	// neighbour alive.
	n.next, n.prev, n.head = nil, nil, false
}

// keysLocked returns the keys listed under tag, a copy.
func (s *Store) keysLocked(tag string) []string {
	h := s.tags[tag]
	if h == nil {
		return nil
	}
	var keys []string
	for n := h; ; {
		keys = append(keys, n.it.key)
		if n = n.next; n == h {
			return keys
		}
	}
}
