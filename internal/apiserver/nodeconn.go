package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/svcnet/svcnet/internal/netns"
)

// NodeOptions say how the API server reaches node agents for pods/log and
// pods/exec: their port, the bearer token they expect, and, for a local
// cluster, the network namespace their addresses are reachable in.
type NodeOptions struct {
	Port      int
	TokenFile string
	Netns     string
}

// nodeConn implements core.NodeConnection.
type nodeConn struct {
	nodes     *genericregistry.Store
	port      int
	token     string
	transport *http.Transport
}

func newNodeConn(nodes *genericregistry.Store, o NodeOptions) (*nodeConn, error) {
	token, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("node token file: %w", err)
	}
	dial := (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	if o.Netns != "" {
		ns := o.Netns
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netns.DialContext(ctx, ns, network, addr)
		}
	}
	return &nodeConn{nodes: nodes, port: o.Port, token: strings.TrimSpace(string(token)),
		transport: &http.Transport{DialContext: dial, IdleConnTimeout: 90 * time.Second}}, nil
}

func (n *nodeConn) Location(ctx context.Context, name string) (*url.URL, error) {
	obj, err := n.nodes.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	node := obj.(*corev1.Node)
	port := n.port
	if p := node.Status.DaemonEndpoints.KubeletEndpoint.Port; p != 0 {
		port = int(p)
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return &url.URL{Scheme: "http", Host: net.JoinHostPort(a.Address, strconv.Itoa(port))}, nil
		}
	}
	return nil, fmt.Errorf("node %s has no internal IP", name)
}

// Transport adds the node token to every request; the wrapped
// *http.Transport stays reachable for connection upgrades.
func (n *nodeConn) Transport() http.RoundTripper {
	return &bearer{token: n.token, rt: n.transport}
}

func (n *nodeConn) Token() string { return n.token }

type bearer struct {
	token string
	rt    *http.Transport
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(req)
}

// WrappedRoundTripper lets the proxy code find the dialer.
func (b *bearer) WrappedRoundTripper() http.RoundTripper { return b.rt }
