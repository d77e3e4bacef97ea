package check

import "strings"

// ReadBudget is the most upstream calls one client read may cost (the
// README's budget): its fetch and one more — a re-ask after learning a
// Vary'd header, or a fetch after a 304 that confirms another response
// than the one held.
const ReadBudget = 2

// RequestCalls checks the upstream calls one client request cost, as the
// origin attributed them to it (calls, one line each), against budget.
// The runner checks each round's calls against the sum of its requests'
// budgets, which one request's extra call hides when the others spent
// less; a row whose origin can tell one client request's calls from the
// others' checks them here, one request at a time (budget-request).
func (ch *Checker) RequestCalls(what string, calls []string, budget int) {
	ch.Count("budget-request-checked", 1)
	if len(calls) > budget {
		ch.Violate("budget-request", "%s: one client request cost %d upstream calls, budget %d: %s", what, len(calls), budget, strings.Join(calls, " | "))
	}
}
