package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"

	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// mirrorBodyLimit is the longest request body a mirror gets a copy of:
// the body is held in memory until every copy is sent. A request with a
// longer body, or one of unknown length, is not mirrored (counted in
// svcnet_ingress_mirror_skipped_total).
const mirrorBodyLimit = 64 << 10

// mirror sends copies of a request, as its backend will get it (path,
// host), to the rule's mirrors, each for its fraction of requests, to one
// of the mirror backend's endpoints. The copies' answers are read and
// dropped; a failed copy is counted, never the client's concern.
func (p *Proxy) mirror(r *http.Request, path, host string, ms []route.Mirror, ups []*upstream.Upstream) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if r.ContentLength < 0 || r.ContentLength > mirrorBodyLimit {
			p.metrics.mirrorSkipped.Inc()
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength))
		// The backend gets the body as read, then whatever is left.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		if err != nil {
			p.metrics.mirrorSkipped.Inc()
			return
		}
		body = b
	}
	if host == "" {
		host = r.Host
	}
	for _, m := range ms {
		if m.Fraction < 1 && rand.Float64() >= m.Fraction {
			continue
		}
		eps := ups[m.Backend].Load().Addrs
		if len(eps) == 0 {
			p.metrics.mirrorFailed.Inc()
			continue
		}
		target := "http://" + eps[rand.IntN(len(eps))] + path
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		out, err := http.NewRequest(r.Method, target, bytes.NewReader(body))
		if err != nil {
			p.metrics.mirrorFailed.Inc()
			continue
		}
		out.Header, out.Host = r.Header.Clone(), host
		go func() {
			resp, err := p.mirrors.Do(out)
			if err != nil {
				p.metrics.mirrorFailed.Inc()
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
}
