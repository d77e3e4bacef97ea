package proxy

// HeldPeak is the most bytes of bulk answers (a batch route) or of a split
// list's answer (a split route) route name held at once (bulkmem.go), for
// tests of the bound; -1 for no such route.
func (h *Handler) HeldPeak(name string) int64 {
	for rt, rs := range h.state.Load().routes {
		if rt.Name == name {
			return rs.held.peak.Load()
		}
	}
	return -1
}
