// Package iptables is svcnet's iptables proxy mode. The rule set is a pure
// function of a snapshot, laid out exactly as kube-proxy lays it out (chain
// names, hashes, rule order), so that what people know about kube-proxy's
// rules and the tools they use still apply. An Executor applies it with
// iptables-restore.
package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// Top-level chains, in kube-proxy's names.
const (
	ChainServices         = "KUBE-SERVICES"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
	ChainForward          = "KUBE-FORWARD"
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	ChainKubeletFirewall  = "KUBE-FIREWALL"
)

// Prefixes of the per-service chains.
const (
	prefixClusterPolicy = "KUBE-SVC-"
	prefixLocalPolicy   = "KUBE-SVL-"
	prefixFirewall      = "KUBE-FW-"
	prefixExternal      = "KUBE-EXT-"
	prefixEndpoint      = "KUBE-SEP-"
)

// IsServiceChain reports whether chain is a per-service chain this mode
// owns, and may delete when no rule set needs it any more.
func IsServiceChain(chain string) bool {
	for _, p := range []string{prefixClusterPolicy, prefixLocalPolicy, prefixFirewall, prefixExternal, prefixEndpoint} {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// hash16 is kube-proxy's chain suffix: base32 of sha256, first 16
// characters, which keeps names within iptables' 28-character limit.
func hash16(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// ServiceChains are the names of the chains of one service port.
type ServiceChains struct {
	Cluster  string // KUBE-SVC-: endpoints for Cluster traffic policy
	Local    string // KUBE-SVL-: this node's endpoints, for Local policy
	External string // KUBE-EXT-: entry for node ports, external and load-balancer IPs
	Firewall string // KUBE-FW-: loadBalancerSourceRanges
}

// ChainsFor returns the chain names kube-proxy gives service port n: the
// hash covers "namespace/name:port" and the lower-case protocol.
func ChainsFor(n svcstate.ServicePortName) ServiceChains {
	h := hash16(n.String() + strings.ToLower(string(n.Protocol)))
	return ServiceChains{
		Cluster:  prefixClusterPolicy + h,
		Local:    prefixLocalPolicy + h,
		External: prefixExternal + h,
		Firewall: prefixFirewall + h,
	}
}

// EndpointChain returns the KUBE-SEP- chain of endpoint ep ("ip:port") of
// service port n.
func EndpointChain(n svcstate.ServicePortName, ep string) string {
	return prefixEndpoint + hash16(n.String()+strings.ToLower(string(n.Protocol))+ep)
}
