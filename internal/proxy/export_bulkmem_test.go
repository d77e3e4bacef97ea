package proxy

// HeldPeak is the most bytes of bulk answers (a batch route) or of split
// lists' answers (a split route) route name held at once, and the most
// one bulk call or list held (internal/bulkmem), for tests of the bounds; -1s
// for no such route.
func (h *Handler) HeldPeak(name string) (all, one int64) {
	for rt, rs := range h.state.Load().routes {
		if rt.Name == name {
			return rs.mem.Peak()
		}
	}
	return -1, -1
}
