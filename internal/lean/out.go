package lean

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// A request the caller built whole, as it would hand it to http.Transport
// (the cached path's fill and bulk call: their URL, Host, header and
// X-Forwarded-* already set), is sent by Send on the caller's goroutine,
// as the Transport would send it: the same bytes on the wire, the same
// answer back. That is RoundTrip's saving without RoundTrip's rewrite of
// the request, which is ReverseProxy's.
//
// What the Transport does and Send does too:
//   - the request written as Request.write writes it: the request line,
//     Host, User-Agent (Go's when the header has none, none when empty),
//     then the other fields sorted by name, then Accept-Encoding: gzip
//     when the request names no coding and no Range (writeOut);
//   - a field name or value the Transport refuses, refused with its error;
//   - an answer in gzip to that Accept-Encoding decoded, its
//     Content-Encoding and Content-Length removed (gzipBody);
//   - 1xx answers read past (a 101, or a status under 100, is the final
//     answer, on a connection never reused), the header sections bounded
//     together;
//   - the connection reused only once the body was read to its end
//     (outBody.Close), never when the answer asked to close;
//   - Connection-named trailers dropped (DropConnectionTrailers, as
//     HopTrailers does for the Transport), the header's hop-by-hop fields
//     left for the caller, as the Transport leaves them.

// defaultUserAgent is what http.Request.write sends for a request whose
// header has no User-Agent key.
const defaultUserAgent = "Go-http-client/1.1"

// TakesOut reports whether out may go by Send: a GET without a body,
// Upgrade, Expect, Close or client trace, aimed at this client's upstream
// as http.Transport would send it (its URL's scheme and host; no Host of
// its own). Anything else is the Transport's. A nil Client takes nothing.
func (cl *Client) TakesOut(out *http.Request) bool {
	if cl == nil || !cl.plainHost || out.Method != http.MethodGet || out.Close || out.Host != "" ||
		out.ContentLength != 0 || (out.Body != nil && out.Body != http.NoBody) || len(out.TransferEncoding) != 0 {
		return false
	}
	u := out.URL
	if u == nil || u.Scheme != "http" || u.Host != cl.host || u.User != nil || u.Opaque != "" {
		return false
	}
	_, upgrade := out.Header["Upgrade"]
	_, expect := out.Header["Expect"]
	return !upgrade && !expect && httptrace.ContextClientTrace(out.Context()) == nil
}

// Send sends out, which TakesOut took, and reads the answer's header. The
// caller reads the body and closes it, as an http.Transport answer's: the
// connection goes back to the pool when the body was read to its end, and
// is closed otherwise. A reused connection the upstream had closed is
// retried once on a new one, as RoundTrip does. out's context bounds the
// wait and the body's reads; the header's wait is bounded by the client's
// timeout too.
//
// on1xx, when not nil, is handed each 1xx answer but 101, as the
// Transport hands it to a client trace's Got1xxResponse: an error it
// returns ends the call, and the header bound starts again after each
// (the caller bounds what it was handed). Without it the header sections
// are bounded together.
func (cl *Client) Send(out *http.Request, on1xx func(code int, h textproto.MIMEHeader) error) (*http.Response, error) {
	if err := validHeader(out.Header); err != nil {
		return nil, err
	}
	ctx := out.Context()
	gz := out.Header.Get("Accept-Encoding") == "" && out.Header.Get("Range") == ""
	var (
		resp *http.Response
		c    *Conn
		err  error
	)
	for attempt := 0; attempt < 2; attempt++ {
		var reused bool
		now := time.Now()
		if c, reused, err = cl.get(ctx, now); err != nil {
			break
		}
		if !reused {
			now = time.Now()
		}
		if resp, err = cl.sendOn(ctx, c, out, gz, on1xx, now); err == nil {
			break
		}
		c.Close()
		if !reused || !retryable(err) || c.interim || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lean: %w", err)
	}
	if resp.ContentLength == 0 || resp.Body == http.NoBody {
		// Nothing to read: the connection goes back now, as the
		// Transport puts it back before it hands such an answer over.
		cl.done(c, true)
	} else {
		b := &outBody{r: resp.Body, cl: cl, c: c}
		resp.Body = b
		// Every Content-Encoding line: a first line saying identity
		// before a second saying gzip is a gzip body (RFC 9110 §5.3), and
		// a chain is not gzip alone, so not decoded.
		if gz && strings.EqualFold(httpcache.ContentCoding(resp.Header), "gzip") {
			resp.Body = &gzipBody{b: b, cl: cl}
			resp.Header.Del("Content-Encoding")
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
			resp.Uncompressed = true
		}
	}
	DropConnectionTrailers(resp)
	return resp, nil
}

// sendOn is roundTrip for Send: out written as the Transport writes it,
// and a 101, or a status under 100, handed back as the final answer (on a
// connection not kept), as the Transport hands them back.
func (cl *Client) sendOn(ctx context.Context, c *Conn, out *http.Request, gz bool, on1xx func(int, textproto.MIMEHeader) error, now time.Time) (*http.Response, error) {
	c.begin()
	if err := writeOut(c.bw, out, cl.host, gz); err != nil {
		return nil, err
	}
	cl.await(ctx, c, now)
	for {
		resp, err := http.ReadResponse(c.br, out)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if c.lr.n <= 0 {
				return nil, fmt.Errorf("net/http: server response headers exceeded %d bytes; aborted", cl.maxHdr)
			}
			return nil, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			c.interim = true
			if on1xx != nil {
				if err := on1xx(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
					return nil, err
				}
				c.lr.n = cl.maxHdr
			}
			continue
		}
		if err := c.check(out, resp); err != nil {
			return nil, err
		}
		c.lr.n = 1<<63 - 1
		if resp.ContentLength < 0 || resp.ContentLength > int64(c.br.Buffered()) {
			// As roundTrip: the body's wait for each byte is bounded,
			// not the body (out's context may bound the whole).
			c.armBody(time.Now(), cl.timeout)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		c.keep = !resp.Close && resp.StatusCode >= 200
		return resp, nil
	}
}

// done puts c back when its answer was read to its end, and closes it
// otherwise.
func (cl *Client) done(c *Conn, whole bool) {
	if whole {
		cl.Put(c)
	} else {
		c.Close()
	}
}

// validHeader refuses what http.Transport refuses before it sends a
// request, with its words.
func validHeader(h http.Header) error {
	for k, vs := range h {
		if !validFieldName(k) {
			return fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !validFieldValue(v) {
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// validFieldName: a token (RFC 9110 §5.1), as httpguts.ValidHeaderFieldName.
func validFieldName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		b := k[i]
		if b >= 0x80 || !tokenChar[b] {
			return false
		}
	}
	return true
}

// validFieldValue: no control byte but tab, as
// httpguts.ValidHeaderFieldValue.
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// tokenChar is RFC 9110 §5.6.2's tchar.
var tokenChar = func() (t [128]bool) {
	for b := '0'; b <= '9'; b++ {
		t[b] = true
	}
	for b := 'a'; b <= 'z'; b++ {
		t[b], t[b-'a'+'A'] = true, true
	}
	for _, b := range "!#$%&'*+-.^_`|~" {
		t[b] = true
	}
	return t
}()

// excluded are the fields Request.write writes itself, or not at all
// (reqWriteExcludeHeader).
func excluded(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// writeOut writes out as http.Transport writes a GET without a body:
// Request.write's request line, Host, User-Agent, the header sorted by
// name (Header.writeSubset), then the Transport's Accept-Encoding: gzip
// when gz. The values are valid (validHeader): no CR or LF to replace.
func writeOut(bw *bufio.Writer, out *http.Request, host string, gz bool) error {
	ruri := out.URL.RequestURI()
	for i := 0; i < len(ruri); i++ {
		if b := ruri[i]; b < ' ' || b == 0x7f {
			return errors.New("net/http: can't write control character in Request.URL")
		}
	}
	bw.WriteString("GET ")
	bw.WriteString(ruri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	ua := defaultUserAgent
	if vs, ok := out.Header["User-Agent"]; ok {
		ua = ""
		if len(vs) > 0 {
			ua = textproto.TrimString(vs[0])
		}
	}
	if ua != "" {
		bw.WriteString("User-Agent: ")
		bw.WriteString(ua)
		bw.WriteString("\r\n")
	}
	var arr [24]string
	keys := arr[:0]
	for k := range out.Header {
		if !excluded(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range out.Header[k] {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(textproto.TrimString(v))
			bw.WriteString("\r\n")
		}
	}
	if gz {
		bw.WriteString("Accept-Encoding: gzip\r\n")
	}
	bw.WriteString("\r\n")
	return bw.Flush()
}

// outBody is a Send answer's body: Close puts the connection back when a
// read met the body's end, and closes it otherwise (a body not read to its
// end leaves its rest on the connection, to be read as the next answer).
// Never the http body's own Close, which would drain the rest.
type outBody struct {
	r    io.Reader
	cl   *Client
	c    *Conn
	eof  bool
	done bool
}

var errBodyClosed = errors.New("http: read on closed response body")

func (b *outBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errBodyClosed
	}
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *outBody) Close() error {
	if !b.done {
		b.done = true
		b.cl.done(b.c, b.eof)
	}
	return nil
}

// gzipBody decodes a gzip answer to the Accept-Encoding Send added, as the
// Transport's gzipReader: the decoder is made on the first read (an error
// in the gzip header is that read's), from the client's pool.
type gzipBody struct {
	b   *outBody
	cl  *Client
	zr  *gzip.Reader
	err error
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.zr == nil {
		zr, _ := g.cl.gzips.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(g.b)
		} else {
			err = zr.Reset(g.b)
		}
		if err != nil {
			g.err = err
			return 0, err
		}
		g.zr = zr
	}
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		g.err = err
	}
	return n, err
}

func (g *gzipBody) Close() error {
	if g.zr != nil {
		_ = g.zr.Reset(eofReader{}) // the pool keeps no connection
		g.cl.gzips.Put(g.zr)
		g.zr = nil
	}
	if g.err == nil {
		g.err = errBodyClosed
	}
	return g.b.Close()
}

// eofReader is an empty flate.Reader, which gzip.Reader.Reset takes
// without allocating a bufio.Reader.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
func (eofReader) ReadByte() (byte, error)  { return 0, io.EOF }

// plainHost reports whether host (host or host:port) is written by
// http.Request.write as it is: ASCII letters, digits and . - _ : [ ]
// (no IPv6 zone, nothing punycode or the Host check would change).
func plainHost(host string) bool {
	if host == "" {
		return false
	}
	for i := 0; i < len(host); i++ {
		b := host[i]
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		case b == '.' || b == '-' || b == '_' || b == ':' || b == '[' || b == ']':
		default:
			return false
		}
	}
	return true
}
