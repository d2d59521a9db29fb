package svcstate

import (
	"k8s.io/apimachinery/pkg/types"
)

// Reason says why a piece of an object was dropped.
type Reason string

// The reasons input is dropped. They are stable: metrics are labelled
// with them.
const (
	ReasonMalformedIP        Reason = "malformed-ip"
	ReasonWrongFamily        Reason = "wrong-ip-family"
	ReasonSpecialIP          Reason = "special-ip"
	ReasonMalformedCIDR      Reason = "malformed-cidr"
	ReasonPortOutOfRange     Reason = "port-out-of-range"
	ReasonUnknownProtocol    Reason = "unknown-protocol"
	ReasonUnknownAddressType Reason = "unknown-address-type"
	ReasonDuplicate          Reason = "duplicate"
	ReasonMissingServiceName Reason = "missing-service-name"
	ReasonMissingAddress     Reason = "missing-address"
	ReasonBadAffinityTimeout Reason = "bad-affinity-timeout"
	ReasonMissingHealthCheck Reason = "missing-health-check-node-port"
)

// Kinds of objects the tracker reads.
const (
	KindService       = "Service"
	KindEndpointSlice = "EndpointSlice"
)

// BadInput is one piece of an object that the tracker could not use and
// dropped. The rest of the object, and every other object, is still used.
type BadInput struct {
	Kind   string
	Object types.NamespacedName
	Field  string // JSON path of what was dropped, e.g. "endpoints[3].addresses[0]"
	Value  string
	Reason Reason
}
