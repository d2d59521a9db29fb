package imagestore

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"404", &transport.Error{StatusCode: http.StatusNotFound}, ErrNotFound},
		{"manifest unknown", &transport.Error{StatusCode: http.StatusBadRequest, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode}}}, ErrNotFound},
		{"401", &transport.Error{StatusCode: http.StatusUnauthorized}, ErrUnauthorized},
		{"denied", &transport.Error{StatusCode: http.StatusForbidden, Errors: []transport.Diagnostic{{Code: transport.DeniedErrorCode}}}, ErrUnauthorized},
		{"unknown CA", &url.Error{Op: "Get", URL: "https://r", Err: x509.UnknownAuthorityError{}}, ErrTLS},
		{"refused", &url.Error{Op: "Get", URL: "https://r", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, ErrNetwork},
		{"wrapped", fmt.Errorf("ctx: %w", &transport.Error{StatusCode: http.StatusNotFound}), ErrNotFound},
		{"already classified", fmt.Errorf("%w: x", ErrPlatform), ErrPlatform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			if !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
				t.Errorf("classify(%v) = %v, want %v wrapping the cause", tc.err, got, tc.want)
			}
			for _, c := range classes {
				if c != tc.want && errors.Is(got, c) {
					t.Errorf("also %v", c)
				}
			}
		})
	}
	if err := classify(context.Canceled); !errors.Is(err, context.Canceled) || Reason(err) != "ErrImagePull" {
		t.Errorf("classify(context.Canceled) = %v", err)
	}
}
