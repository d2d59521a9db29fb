package core

import "testing"

func TestProxyPrefix(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/namespaces/ns/pods/p:8080/proxy/rewriteme", "/api/v1/namespaces/ns/pods/p:8080/proxy"},
		{"/api/v1/namespaces/ns/pods/https:p:443/proxy/", "/api/v1/namespaces/ns/pods/https:p:443/proxy"},
		{"/api/v1/namespaces/ns/services/s/proxy", "/api/v1/namespaces/ns/services/s/proxy"},
		// A path below the proxy that looks like one stays the backend's.
		{"/api/v1/namespaces/ns/services/s/proxy/pods/x/proxy", "/api/v1/namespaces/ns/services/s/proxy"},
		{"/api/v1/namespaces/ns/pods/p/log", ""},
	} {
		if got := proxyPrefix(tc.path); got != tc.want {
			t.Errorf("proxyPrefix(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
