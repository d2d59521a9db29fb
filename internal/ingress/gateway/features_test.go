package gateway

import (
	"slices"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// TestImplementedKnown: every feature claimed is one the conformance
// suite knows, claimed once.
func TestImplementedKnown(t *testing.T) {
	known := features.SetsToNamesSet(features.AllFeatures)
	for i, f := range implemented {
		if !known.Has(f) {
			t.Errorf("%q is not a feature of sigs.k8s.io/gateway-api/pkg/features", f)
		}
		if slices.Contains(implemented[:i], f) {
			t.Errorf("%q claimed twice", f)
		}
	}
}

func TestSupportedFeatures(t *testing.T) {
	tests := []struct {
		name string
		in   []features.FeatureName
		want []gatewayv1.FeatureName
	}{
		{"none: left out", nil, nil},
		{"sorted by name", []features.FeatureName{features.SupportHTTPRoute, features.SupportGateway, features.SupportHTTPRouteMethodMatching},
			[]gatewayv1.FeatureName{"Gateway", "HTTPRoute", "HTTPRouteMethodMatching"}},
		{"once each", []features.FeatureName{features.SupportGateway, features.SupportGateway}, []gatewayv1.FeatureName{"Gateway"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := supportedFeatures(tt.in)
			var names []gatewayv1.FeatureName
			for _, f := range got {
				names = append(names, f.Name)
			}
			if !slices.Equal(names, tt.want) || (tt.want == nil) != (got == nil) {
				t.Errorf("supportedFeatures(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
