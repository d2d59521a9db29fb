package annotations

import (
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        func(c *Config)
		problems    []string // "annotation: message prefix (fatal)"
	}{
		{"nothing: defaults", nil, func(*Config) {}, nil},
		{"every setting", map[string]string{
			"svcnet.dev/ssl-redirect":           "false",
			"svcnet.dev/rewrite-target":         "/v2",
			"svcnet.dev/backend-protocol":       "grpc",
			"svcnet.dev/proxy-body-size":        "8m",
			"svcnet.dev/proxy-connect-timeout":  "3",
			"svcnet.dev/proxy-read-timeout":     "90s",
			"svcnet.dev/proxy-send-timeout":     "1m",
			"svcnet.dev/allowlist-source-range": "10.0.0.0/8, 192.0.2.7 ,2001:db8::/32",
		}, func(c *Config) {
			c.SSLRedirect, c.RewriteTarget, c.BackendProtocol, c.BodySize = false, "/v2", GRPC, 8<<20
			c.ConnectTimeout, c.ReadTimeout, c.SendTimeout = 3*time.Second, 90*time.Second, time.Minute
			c.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/32")}
		}, nil},
		{"ingress-nginx's names", map[string]string{
			"nginx.ingress.kubernetes.io/ssl-redirect":           "false",
			"nginx.ingress.kubernetes.io/proxy-body-size":        "0",
			"nginx.ingress.kubernetes.io/whitelist-source-range": "10.1.2.3/8",
		}, func(c *Config) {
			c.SSLRedirect, c.BodySize = false, -1
			c.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		}, nil},
		{"ours wins over ingress-nginx's", map[string]string{
			"svcnet.dev/proxy-read-timeout":                  "5",
			"nginx.ingress.kubernetes.io/proxy-read-timeout": "50",
			"nginx.ingress.kubernetes.io/ssl-redirect":       "true",
			"svcnet.dev/ssl-redirect":                        "true",
		}, func(c *Config) { c.ReadTimeout = 5 * time.Second },
			[]string{"nginx.ingress.kubernetes.io/proxy-read-timeout: ignored: svcnet.dev/proxy-read-timeout is set too"}},
		{"bad values are fatal", map[string]string{
			"svcnet.dev/ssl-redirect":                            "yes please",
			"svcnet.dev/rewrite-target":                          "/$1",
			"svcnet.dev/backend-protocol":                        "FTP",
			"svcnet.dev/proxy-body-size":                         "1x",
			"svcnet.dev/proxy-connect-timeout":                   "-1",
			"svcnet.dev/proxy-read-timeout":                      "2h",
			"nginx.ingress.kubernetes.io/allowlist-source-range": "10.0.0.0/33",
		}, func(*Config) {}, []string{
			"svcnet.dev/ssl-redirect: \"yes please\" is not true or false (fatal)",
			"svcnet.dev/rewrite-target: \"/$1\" is not a path (fatal)",
			"svcnet.dev/backend-protocol: \"FTP\" is not one of (fatal)",
			"svcnet.dev/proxy-body-size: \"1x\" is not a size (fatal)",
			"svcnet.dev/proxy-connect-timeout: \"-1\" is out of range (fatal)",
			"svcnet.dev/proxy-read-timeout: \"2h\" is out of range (fatal)",
			"nginx.ingress.kubernetes.io/allowlist-source-range: \"10.0.0.0/33\" is not a CIDR (fatal)",
		}},
		{"unknown names are reported, not fatal", map[string]string{
			"nginx.ingress.kubernetes.io/configuration-snippet": "evil;",
			"svcnet.dev/limit-rps":                              "10",
			"example.com/other":                                 "x",
		}, func(*Config) {}, []string{
			"nginx.ingress.kubernetes.io/configuration-snippet: not supported",
			"svcnet.dev/limit-rps: not supported",
		}},
		{"cookie affinity with defaults", map[string]string{"nginx.ingress.kubernetes.io/affinity": "cookie"},
			func(c *Config) { c.Affinity = &Affinity{Cookie: "INGRESSCOOKIE", Path: "/"} }, nil},
		{"cookie affinity in full", map[string]string{
			"svcnet.dev/affinity":                "cookie",
			"svcnet.dev/session-cookie-name":     "route",
			"svcnet.dev/session-cookie-path":     "/app",
			"svcnet.dev/session-cookie-max-age":  "3600",
			"svcnet.dev/session-cookie-secure":   "true",
			"svcnet.dev/session-cookie-samesite": "Strict",
		}, func(c *Config) {
			c.Affinity = &Affinity{Cookie: "route", Path: "/app", MaxAge: time.Hour, Secure: true, SameSite: http.SameSiteStrictMode}
		}, nil},
		{"a canary by weight", map[string]string{"nginx.ingress.kubernetes.io/canary": "true", "nginx.ingress.kubernetes.io/canary-weight": "20"},
			func(c *Config) { c.Canary = &Canary{Weight: 20, WeightTotal: 100} }, nil},
		{"a canary by header, cookie and weight", map[string]string{
			"svcnet.dev/canary": "true", "svcnet.dev/canary-by-header": "x-canary", "svcnet.dev/canary-by-header-value": "yes",
			"svcnet.dev/canary-by-cookie": "beta", "svcnet.dev/canary-weight": "5", "svcnet.dev/canary-weight-total": "1000",
		}, func(c *Config) {
			c.Canary = &Canary{Header: "X-Canary", HeaderValue: "yes", Cookie: "beta", Weight: 5, WeightTotal: 1000}
		}, nil},
		{"canary settings without canary: true ask for nothing", map[string]string{"svcnet.dev/canary-weight": "50", "svcnet.dev/canary": "false"},
			func(*Config) {}, nil},
		{"bad canary values", map[string]string{"svcnet.dev/canary": "true", "svcnet.dev/canary-weight": "101", "svcnet.dev/canary-by-header": "bad header"},
			func(c *Config) { c.Canary = &Canary{Weight: 101, WeightTotal: 100} }, []string{
				"canary-weight: 101 is more than the total weight 100 (fatal)",
				"svcnet.dev/canary-by-header: \"bad header\" is not a header name (fatal)",
			}},
		{"cookie settings without affinity ask for nothing", map[string]string{"svcnet.dev/session-cookie-name": "route"},
			func(*Config) {}, nil},
		{"bad affinity values", map[string]string{
			"svcnet.dev/affinity":                "ip-hash",
			"svcnet.dev/session-cookie-name":     "bad name;",
			"svcnet.dev/session-cookie-max-age":  "forever",
			"svcnet.dev/session-cookie-samesite": "sometimes",
		}, func(c *Config) {}, []string{
			"svcnet.dev/affinity: \"ip-hash\": only cookie (fatal)",
			"svcnet.dev/session-cookie-name: \"bad name;\" is not a cookie name (fatal)",
			"svcnet.dev/session-cookie-max-age: \"forever\" (fatal)",
			"svcnet.dev/session-cookie-samesite: \"sometimes\" (fatal)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := Parse(tt.annotations)
			want := Config{SSLRedirect: true}
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config\n%+v %+v, want\n%+v %+v", got, got.Affinity, want, want.Affinity)
			}
			var ps []string
			for _, p := range problems {
				s := p.Annotation + ": " + p.Message
				if p.Fatal {
					s += " (fatal)"
				}
				ps = append(ps, s)
			}
			if len(ps) != len(tt.problems) {
				t.Fatalf("problems:\n%s\nwant %d", strings.Join(ps, "\n"), len(tt.problems))
			}
			for _, w := range tt.problems {
				found := false
				for _, p := range ps {
					pre, fatal := strings.CutSuffix(w, " (fatal)")
					if strings.HasPrefix(p, pre) && strings.HasSuffix(p, " (fatal)") == fatal {
						found = true
					}
				}
				if !found {
					t.Errorf("no problem like %q in\n%s", w, strings.Join(ps, "\n"))
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("svcnet.dev/rewrite-target", "/a")
	f.Add("nginx.ingress.kubernetes.io/whitelist-source-range", "1.2.3.4/8,::1")
	f.Add("svcnet.dev/proxy-body-size", "9999999999g")
	f.Fuzz(func(t *testing.T, k, v string) {
		c, _ := Parse(map[string]string{k: v})
		if c.RewriteTarget != "" && !strings.HasPrefix(c.RewriteTarget, "/") {
			t.Fatalf("rewrite target %q", c.RewriteTarget)
		}
		if c.BodySize < -1 {
			t.Fatalf("body size %d", c.BodySize)
		}
	})
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1m", 1 << 20, true}, {"512k", 512 << 10, true}, {"2G", 2 << 30, true}, {"100", 100, true},
		{"0", -1, true}, {"", 0, false}, {"m", 0, false}, {"-1k", 0, false}, {"1.5m", 0, false}, {"9999999999999g", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
