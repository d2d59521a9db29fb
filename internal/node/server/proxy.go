package server

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// serveProxy is the node's end of the API server's pods/proxy and
// services/proxy: /proxy/{scheme}/{ip}/{port}/{path} is sent on to a pod
// address as HTTP (or HTTPS, its certificate not checked, as
// kube-apiserver does towards pods). Only pod addresses of the cluster
// and the node's own (its hostNetwork pods') are reached: the node is no
// open relay, even for the API server.
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request) {
	scheme, ipStr, portStr := r.PathValue("scheme"), r.PathValue("ip"), r.PathValue("port")
	if scheme != "http" && scheme != "https" {
		http.Error(w, fmt.Sprintf("scheme %q: only http and https are proxied", scheme), http.StatusBadRequest)
		return
	}
	ip, err := netip.ParseAddr(ipStr)
	if err != nil {
		http.Error(w, fmt.Sprintf("%q is not an IP address", ipStr), http.StatusBadRequest)
		return
	}
	// The node's own address is the address of its hostNetwork pods.
	if cidr := s.cfg.ClusterCIDR; (!cidr.IsValid() || !cidr.Contains(ip)) && ip != s.cfg.NodeIP {
		if !s.cfg.PodCIDR.Contains(ip) {
			http.Error(w, fmt.Sprintf("%s is not a pod address of the cluster", ip), http.StatusForbidden)
			return
		}
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		http.Error(w, fmt.Sprintf("invalid port %q", portStr), http.StatusBadRequest)
		return
	}
	target := &url.URL{Scheme: scheme, Host: net.JoinHostPort(ip.String(), portStr)}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.URL.Path = "/" + strings.TrimPrefix(r.PathValue("path"), "/")
			if strings.HasSuffix(r.URL.Path, "/") && !strings.HasSuffix(pr.Out.URL.Path, "/") {
				pr.Out.URL.Path += "/"
			}
			pr.Out.URL.RawPath = ""
			pr.Out.Host = target.Host
			// The API server's identity stays with the API server.
			pr.Out.Header.Del("Authorization")
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as kube-apiserver towards pods
			Proxy: nil},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fmt.Sprintf("error trying to reach %s: %v", target.Host, err), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}
