package svcstate

import (
	"cmp"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName identifies one port of one Service. Protocol is part of
// the key because an EndpointSlice port is matched to a service port by name
// and protocol together, and because kube-proxy's chain names hash both.
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol v1.Protocol
}

// String is "namespace/name:port", or "namespace/name" for an unnamed port,
// without the protocol: the exact string kube-proxy hashes into chain names
// and prints in rule comments.
func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.NamespacedName.String()
	}
	return n.NamespacedName.String() + ":" + n.Port
}

// Compare orders names by namespace, name, port name and protocol, the
// order in which rule sets list services.
func (n ServicePortName) Compare(o ServicePortName) int {
	return cmp.Or(
		cmp.Compare(n.Namespace, o.Namespace),
		cmp.Compare(n.Name, o.Name),
		cmp.Compare(n.Port, o.Port),
		cmp.Compare(n.Protocol, o.Protocol),
	)
}
