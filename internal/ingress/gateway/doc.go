// Package gateway holds the Gateway API (gateway.networking.k8s.io)
// decisions of svcnet's ingress controller as pure functions: objects
// in, statuses out, no client and no clock (callers pass the time). The
// controller package watches the objects, calls these functions and
// writes what they return.
//
// What is decided here so far: which GatewayClasses svcnet serves and
// their status (Accepted, supportedFeatures). Gateways and routes are
// not served yet; see docs/architecture.md, "Gateway API".
package gateway
