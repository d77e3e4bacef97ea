package l1

import (
	"slices"
	"unsafe"

	"github.com/sidecache/sidecache/internal/cache"
)

// tagNode is an item's link in the list of the items carrying a tag with
// a given hash (Store.hash): item.nodes[i] belongs to the list of the hash
// of e.Tags[i]. The lists are circular and doubly linked, and s.tags maps
// a hash to one node of its list, its head, so that:
//
//   - indexing an entry under a tag that already has entries (the route's
//     tag, which every entry of the route carries) is one lookup and a
//     splice: no insert into a set holding every key of the route, no
//     growth of that set while the cache fills;
//   - unindexing it writes s.tags only when the node is the head, and
//     DeleteTags, which takes the tail first, writes it once per tag;
//   - a tag names its keys without a scan of the cache (KeysWithTag).
//
// Two tags share a list only if their hashes collide, so a walk for a tag
// keeps the items that carry it. An item is in a list once: next is nil
// for a node whose tag's hash repeats an earlier tag's of the same entry
// (and while the item is not indexed), so DeleteTags counts it once.
//
// A DeleteTags in progress links a node of its own into the list, its
// cursor (purge.go): a node with no item, never the head, which every
// other walk steps over. It walks a chunk of the list per hold of mu, and
// between two the list changes around the cursor, which stays linked
// where its walk stands, whatever entry is unlinked.
type tagNode struct {
	next, prev *tagNode
	it         *item
	// th is the hash of its tag (hashTags), taken before Set locks mu and
	// kept for unlinkLocked, which would hash the tag again.
	th   uint64
	tag  int32 // its index in it.e.Tags
	head bool  // s.tags maps the hash to this node
	// done is set on a cursor when the head moves past it: no entry is
	// left between the head and it, which its walk had to visit.
	done bool
}

// newItem allocates the item for e under key with its tag nodes in the
// same allocation for the usual tag counts (the route's, an id's, the URI's
// one or two), where a separate slice would cost a second allocation.
func newItem(key string, e *cache.Entry, h uint64, hs int64) *item {
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
	it.key, it.e, it.cost, it.h = key, e, costWith(key, e, hs), h
	return it
}

// hashTags hashes it's tags into its nodes, before mu is taken. A tag
// that is the very string prev (if not nil) has at the same index, the
// same bytes at the same address, takes prev's hash: a bulk answer's
// elements all carry their route's tag first, one string.
func (s *Store) hashTags(it, prev *item) {
	for i, tag := range it.e.Tags {
		n := &it.nodes[i]
		n.it, n.tag = it, int32(i)
		if prev != nil && i < len(prev.e.Tags) && sameString(tag, prev.e.Tags[i]) {
			n.th = prev.nodes[i].th
			continue
		}
		n.th = s.hash(tag)
	}
}

// sameString reports whether a and b are one string (not only equal
// ones): same length, same bytes' address. It reads no byte.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// linkAhead is how many of an item's tags Set looks up before it writes
// the index (see Set); more are looked up as they are linked.
const linkAhead = 4

// linkLocked adds it's nodes to the lists of its tags' hashes. heads[i],
// where given, is what s.tags held for nodes[i]'s hash when Set looked it
// up, with no write to s.tags since.
func (s *Store) linkLocked(it *item, heads []*tagNode) {
	for i := range it.nodes {
		n := &it.nodes[i]
		repeat := false
		for j := range i {
			if it.nodes[j].th == n.th {
				repeat = true
				break
			}
		}
		if repeat {
			continue
		}
		var h *tagNode
		if i < len(heads) {
			h = heads[i]
		} else {
			h = s.tags[n.th]
		}
		if h == nil {
			n.next, n.prev, n.head = n, n, true
			s.tags[n.th] = n
			continue
		}
		// At the tail, before the head: s.tags is not written.
		n.prev, n.next = h.prev, h
		h.prev.next = n
		h.prev = n
	}
}

// unlinkLocked removes n from its list, dropping the hash from s.tags with
// the list's last entry. The head passes on to the next entry, past the
// cursors (which are never the head), and marks those done.
func (s *Store) unlinkLocked(n *tagNode) {
	if n.head {
		h := n.next
		for h != n && h.it == nil {
			h.done = true
			h = h.next
		}
		if h == n {
			delete(s.tags, n.th) // cursors alone may stay linked to n
		} else {
			h.head = true
			s.tags[n.th] = h
		}
	}
	n.prev.next, n.next.prev = n.next, n.prev
	// Cleared, so that an unindexed item ristretto still holds keeps no
	// neighbour alive.
	n.next, n.prev, n.head = nil, nil, false
}

// keysLocked returns the keys stored under tag.
func (s *Store) keysLocked(tag string) []string {
	h := s.tags[s.hash(tag)]
	if h == nil {
		return nil
	}
	var keys []string
	for n := h; ; {
		if n.it != nil && slices.Contains(n.it.e.Tags, tag) {
			keys = append(keys, n.it.key)
		}
		if n = n.next; n == h {
			return keys
		}
	}
}
