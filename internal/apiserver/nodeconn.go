package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/pki"
)

// NodeOptions say how the API server reaches node agents for pods/log and
// pods/exec: over TLS on their port, as kube-apiserver reaches kubelets,
// with a client certificate the API server issues itself from the cluster
// CA, which also signs the node agents' serving certificates; and, for a
// local cluster, the network namespace node addresses are reachable in.
type NodeOptions struct {
	Enabled bool
	Port    int
	Netns   string
}

// KubeletClientUser is the identity the API server presents to node
// agents (kube-apiserver's kubelet client certificate).
const KubeletClientUser = "kube-apiserver-kubelet-client"

// nodeConn implements core.NodeConnection.
type nodeConn struct {
	nodes     *genericregistry.Store
	port      int
	transport *http.Transport
}

func newNodeConn(nodes *genericregistry.Store, o NodeOptions, ca *pki.CA) (*nodeConn, error) {
	certPEM, keyPEM, err := ca.Issue(KubeletClientUser, []string{AdminGroup}, nil, true)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	dial := (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	if o.Netns != "" {
		ns := o.Netns
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netns.DialContext(ctx, ns, network, addr)
		}
	}
	return &nodeConn{nodes: nodes, port: o.Port, transport: &http.Transport{DialContext: dial, IdleConnTimeout: 90 * time.Second,
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
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
			return &url.URL{Scheme: "https", Host: net.JoinHostPort(a.Address, strconv.Itoa(port))}, nil
		}
	}
	return nil, fmt.Errorf("node %s has no internal IP", name)
}

// Transport is the mutual-TLS transport to node agents.
func (n *nodeConn) Transport() http.RoundTripper { return n.transport }
