// Package nftables is the service proxy's nftables mode, with
// kube-proxy's nftables layout (table ip kube-proxy, verdict maps, one
// chain per service port and per endpoint): Layout.Fixed is the table's
// fixed part, Build the pure function from a snapshot to a full or
// partial plan, Proxier the sync loop that sends plans to the kernel as
// single transactions (internal/nftables), and Trace the walk of a packet
// through a built or a live table.
package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"net"
	"strings"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// Chain name prefixes, as kube-proxy's nftables mode names its chains.
const (
	PrefixService  = "service-"  // a service port's Cluster-policy endpoints
	PrefixLocal    = "local-"    // its Local-policy endpoints
	PrefixExternal = "external-" // its external (NodePort, LB, ExternalIP) traffic
	PrefixEndpoint = "endpoint-" // one endpoint
	PrefixAffinity = "affinity-" // an endpoint's ClientIP affinity set
	PrefixFirewall = "firewall-" // loadBalancerSourceRanges
)

// maxBase is the longest name part after a prefix: nftables allows 256
// bytes per chain name and the longest prefix takes 16.
const maxBase = 256 - 16

// base is name behind an 8-character hash of itself, shortened to
// maxBase: the hash keeps a shortened name unique, and makes chains
// that differ in one digit easy to tell apart — kube-proxy's scheme, so
// that the same Service gets the same chain names under both.
func base(name string) string {
	sum := sha256.Sum256([]byte(name))
	name = base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + name
	if len(name) > maxBase {
		name = name[:maxBase-3] + "..."
	}
	return name
}

// ServicePortBase is the name part of a service port's chains:
// "HASH-namespace/name/protocol/port". Names and ports are DNS labels and
// the protocol is tcp, udp or sctp, all legal in a chain name; "/" (legal
// in chain names, not in those) separates them.
func ServicePortBase(n svcstate.ServicePortName) string {
	return base(n.Namespace + "/" + n.Name + "/" + strings.ToLower(string(n.Protocol)) + "/" + n.Port)
}

// EndpointBase is the name part of an endpoint's chain:
// "HASH-namespace/name/protocol/port__ip/port". An IPv6 address's colons,
// not allowed in chain names, become dots.
func EndpointBase(n svcstate.ServicePortName, endpoint string) string {
	ip, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		ip, port = endpoint, ""
	}
	ip = strings.ReplaceAll(ip, ":", ".")
	return base(n.Namespace + "/" + n.Name + "/" + strings.ToLower(string(n.Protocol)) + "/" + n.Port + "__" + ip + "/" + port)
}

// IsServiceChain tells the per-service and per-endpoint chains (whose
// names always hold a "/") from the fixed ones.
func IsServiceChain(chain string) bool { return strings.Contains(chain, "/") }
