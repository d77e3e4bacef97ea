package proxy

// BatchQueued is the ids route name's batcher holds unsent (batch.Loader's
// Queued), for tests that must see a request enlisted; -1 when the route
// does not batch.
func (h *Handler) BatchQueued(name string) int {
	for rt, rs := range h.state.Load().routes {
		if rt.Name == name && rs.batcher != nil {
			return rs.batcher.Queued()
		}
	}
	return -1
}

// BatchInLine is the groups and own calls route name's batcher holds in
// line for a slot (batch.Loader's InLine); -1 when the route does not
// batch.
func (h *Handler) BatchInLine(name string) int {
	for rt, rs := range h.state.Load().routes {
		if rt.Name == name && rs.batcher != nil {
			return rs.batcher.InLine()
		}
	}
	return -1
}
