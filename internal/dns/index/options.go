package index

import (
	"fmt"
	"net/netip"
)

// PodsMode says which `a-b-c-d.<ns>.pod.<zone>` names exist, as CoreDNS's
// `pods` option does.
type PodsMode int

const (
	// PodsDisabled answers no pod names: the specification marks them as
	// deprecated, and answering them costs nothing only when they are off.
	PodsDisabled PodsMode = iota
	// PodsInsecure answers any well-formed dashed address in any namespace
	// without looking at pods, which is what kube-dns always did.
	PodsInsecure
	// PodsVerified answers only when a pod in that namespace has that IP,
	// so a name cannot be forged to point anywhere (e.g. for TLS SANs).
	PodsVerified
)

// ParsePodsMode reads the --pods flag.
func ParsePodsMode(s string) (PodsMode, error) {
	switch s {
	case "disabled", "":
		return PodsDisabled, nil
	case "insecure":
		return PodsInsecure, nil
	case "verified":
		return PodsVerified, nil
	}
	return PodsDisabled, fmt.Errorf("pods mode %q: want disabled, insecure or verified", s)
}

func (m PodsMode) String() string {
	switch m {
	case PodsInsecure:
		return "insecure"
	case PodsVerified:
		return "verified"
	}
	return "disabled"
}

// DefaultZone is the cluster domain kubelet writes into pods' resolv.conf
// unless told otherwise.
const DefaultZone = "cluster.local"

// DefaultTTL matches CoreDNS's kubernetes plugin: short, because there is
// no way to take an answer back once a client has cached it.
const DefaultTTL = 5

// Options are the settings an Index is built with. The zero value serves
// cluster.local with pod names disabled.
type Options struct {
	// Zone is the cluster domain, with or without the trailing dot.
	Zone string
	// TTL of every record, and the negative TTL in the SOA (seconds).
	TTL uint32
	// Pods selects the pod-record mode.
	Pods PodsMode
	// ReverseCIDRs are the service and pod ranges: a PTR question for an
	// address inside them is answered here (NXDOMAIN when unknown) instead
	// of being forwarded, so an upstream never answers for cluster IPs.
	ReverseCIDRs []netip.Prefix
	// Nameservers are the addresses of ns.dns.<zone>, the target of the
	// zone's NS record (usually the kube-dns Service IP).
	Nameservers []netip.Addr
	// Serial is the SOA serial (the syncer uses the second of the last
	// change, as CoreDNS does).
	Serial uint32
	// NotSynced marks an index built before the informers synced: every
	// question it is authoritative for gets SERVFAIL, never a premature
	// NXDOMAIN that clients would cache.
	NotSynced bool
}
