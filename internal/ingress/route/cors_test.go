package route

import (
	"net/http"
	"testing"
)

func TestCORSAllows(t *testing.T) {
	c := &CORS{AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com", "http://local:8080"}}
	tests := map[string]bool{
		"https://www.foo.com":      true,
		"https://www.foo.com:443":  true,
		"https://WWW.foo.com":      true,
		"http://www.foo.com":       false,
		"https://www.foo.com:8443": false,
		"https://www.bar.com":      true,
		"https://a.b.bar.com":      true,
		"https://bar.com":          false,
		"https://foobar.com":       false,
		"http://local:8080":        true,
		"http://local":             false,
		"null":                     false,
	}
	for o, want := range tests {
		if got := c.Allows(o); got != want {
			t.Errorf("%s: %v, want %v", o, got, want)
		}
	}
	if !(&CORS{AllowOrigins: []string{"*"}}).Allows("https://foobar.com:12345") {
		t.Error("* does not allow every origin")
	}
}

func TestCORSPreflight(t *testing.T) {
	tests := []struct {
		name string
		c    CORS
		ask  map[string]string
		want map[string]string // "" for absent
	}{
		{"lists", CORS{AllowMethods: []string{"GET", "OPTIONS"}, AllowHeaders: []string{"x-a", "x-b"}, ExposeHeaders: []string{"x-c"}, Credentials: true, MaxAge: 3600},
			map[string]string{"Access-Control-Request-Method": "GET"},
			map[string]string{"Access-Control-Allow-Methods": "GET, OPTIONS", "Access-Control-Allow-Headers": "x-a, x-b", "Access-Control-Expose-Headers": "x-c",
				"Access-Control-Max-Age": "3600", "Access-Control-Allow-Credentials": "true", "Access-Control-Allow-Origin": "https://o.example"}},
		{"wildcard without credentials", CORS{AllowMethods: []string{"*"}},
			map[string]string{"Access-Control-Request-Method": "POST"},
			map[string]string{"Access-Control-Allow-Methods": "*", "Access-Control-Allow-Credentials": ""}},
		{"wildcard with credentials: what was asked", CORS{AllowMethods: []string{"*"}, AllowHeaders: []string{"*"}, Credentials: true},
			map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-y"},
			map[string]string{"Access-Control-Allow-Methods": "POST", "Access-Control-Allow-Headers": "x-y"}},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(http.MethodOptions, "http://x/", nil)
		r.Header.Set("Origin", "https://o.example")
		for k, v := range tt.ask {
			r.Header.Set(k, v)
		}
		if !Preflight(r) {
			t.Fatalf("%s: not a preflight", tt.name)
		}
		h := http.Header{}
		tt.c.PreflightHeaders(h, r)
		for k, v := range tt.want {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s %q, want %q", tt.name, k, got, v)
			}
		}
	}
}
