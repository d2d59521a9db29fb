//go:build tools

// Package gatewayconformance builds the Gateway API's conformance suite
// (sigs.k8s.io/gateway-api/conformance, the version go.mod requires) as
// implementations run it, outside svcnet's module: `go test -c
// sigs.k8s.io/gateway-api/conformance` here makes the test binary that
// hack/gateway-conformance.sh runs against a fresh `svcnet up`.
package gatewayconformance

import _ "sigs.k8s.io/gateway-api/conformance"
