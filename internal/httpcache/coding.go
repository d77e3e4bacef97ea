package httpcache

import (
	"net/http"
	"strings"
)

// ContentCoding is the content coding of an answer with header h, read
// from all its Content-Encoding field lines as the one list they are
// (RFC 9110 §5.3: lines of a list-valued field combine, in order; §8.4):
// the codings in the order applied, joined by ", ", without empty elements
// (§5.6.1) or "identity" (no coding at all, §12.5.3; it names nothing that
// was applied): "" for an unencoded body. One coding is one name ("gzip");
// a chain holds a comma, which no reader may take for its first coding.
// Every reader of an answer's coding reads it here: Header.Get's first
// line alone took `Content-Encoding: identity` then `: gzip` for identity.
func ContentCoding(h http.Header) string {
	lines := h["Content-Encoding"]
	if len(lines) == 1 && !strings.ContainsRune(lines[0], ',') {
		c := strings.Trim(lines[0], " \t")
		if strings.EqualFold(c, "identity") {
			return ""
		}
		return c
	}
	var b strings.Builder
	for _, line := range lines {
		for line != "" {
			var c string
			c, line, _ = strings.Cut(line, ",")
			if c = strings.Trim(c, " \t"); c == "" || strings.EqualFold(c, "identity") {
				continue
			}
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c)
		}
	}
	return b.String()
}

// foldCoding makes h's Content-Encoding one field line, ContentCoding's,
// or none for an unencoded body, when the answer had several: whoever
// reads the stored header later, the sidecar's tiers or a client that
// reads the first line, reads the coding the body is in.
func foldCoding(h http.Header) {
	if len(h["Content-Encoding"]) < 2 {
		return
	}
	if c := ContentCoding(h); c != "" {
		h["Content-Encoding"] = []string{c}
	} else {
		delete(h, "Content-Encoding")
	}
}
