package gateway

import (
	"cmp"
	"slices"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// implemented lists the Gateway API features (GEP-2162, the names of
// sigs.k8s.io/gateway-api/pkg/features) that svcnet serves completely,
// each as the conformance suite tests it. A feature goes in only with
// the code that serves it and the suite's tests of it passing: the
// suite reads this list from the GatewayClass's status to choose what
// to run, and a claimed feature that is not served is a failed test.
//
// Each passed the suite's tests of it in `make gateway-conformance`
// (docs/gateway-conformance.md).
var implemented = []features.FeatureName{
	// Core of the GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS profiles.
	features.SupportGateway,
	features.SupportHTTPRoute,
	features.SupportReferenceGrant,
	features.SupportGRPCRoute,
	features.SupportTLSRoute,
	// Gateways.
	features.SupportGatewayPort8080,
	features.SupportGatewayHTTPListenerIsolation,
	features.SupportGatewayAddressEmpty,
	// HTTPRoutes.
	features.SupportHTTPRouteBackendRequestHeaderModification,
	features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRoutePathRewrite,
	features.SupportHTTPRouteRequestMirror,
	features.SupportHTTPRouteRequestMultipleMirrors,
	features.SupportHTTPRouteRequestPercentageMirror,
	features.SupportHTTPRouteRequestTimeout,
	features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRouteParentRefPort,
	features.SupportHTTPRouteBackendProtocolH2C,
	features.SupportHTTPRouteBackendProtocolWebSocket,
	features.SupportHTTPRouteNamedRouteRule,
	features.SupportHTTPRouteCORS,
	features.SupportHTTPRoute303RedirectStatusCode,
	features.SupportHTTPRoute307RedirectStatusCode,
	features.SupportHTTPRoute308RedirectStatusCode,
	// GRPCRoutes and TLSRoutes.
	features.SupportGRPCRouteNamedRouteRule,
	features.SupportTLSRouteModeTerminate,
	features.SupportTLSRouteModeMixed,
}

// SupportedFeatures is status.supportedFeatures of a served
// GatewayClass: the implemented features, sorted by name as the API
// requires; nil when there are none (the field is then left out).
func SupportedFeatures() []gatewayv1.SupportedFeature { return supportedFeatures(implemented) }

func supportedFeatures(names []features.FeatureName) []gatewayv1.SupportedFeature {
	if len(names) == 0 {
		return nil
	}
	out := make([]gatewayv1.SupportedFeature, 0, len(names))
	for _, f := range names {
		out = append(out, gatewayv1.SupportedFeature{Name: gatewayv1.FeatureName(f)})
	}
	slices.SortFunc(out, func(a, b gatewayv1.SupportedFeature) int { return cmp.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b gatewayv1.SupportedFeature) bool { return a.Name == b.Name })
}
