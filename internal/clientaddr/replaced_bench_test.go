package clientaddr

import "testing"

func BenchmarkReplaced(b *testing.B) {
	names := []string{"Accept", "User-Agent", "Accept-Encoding", "Host", "X-Request-Id", "Cookie", "X-Real-Ip", "Content-Type"}
	n := 0
	for b.Loop() {
		for _, k := range names {
			if Replaced(k) {
				n++
			}
		}
	}
	_ = n
}
