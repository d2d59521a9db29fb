package imagestore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// classes lists the sentinels of errors.go: an error wrapping one is
// classified already.
var classes = []error{ErrInvalidReference, ErrNotFound, ErrUnauthorized, ErrTLS, ErrNetwork, ErrPlatform, ErrVerify, ErrUnsafePath, ErrNotPresent, ErrArchive}

// classify wraps a registry or transport error with its class, unless it
// has one already. An error of no known class is returned as is.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return err
		}
	}
	if c := classOf(err); c != nil {
		return fmt.Errorf("%w: %w", c, err)
	}
	return err
}

func classOf(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		for _, d := range terr.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return ErrNotFound
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return ErrUnauthorized
			}
		}
		switch terr.StatusCode {
		case http.StatusNotFound:
			return ErrNotFound
		case http.StatusUnauthorized, http.StatusForbidden:
			return ErrUnauthorized
		}
		return nil
	}
	var (
		unknownCA   x509.UnknownAuthorityError
		hostname    x509.HostnameError
		invalidCert x509.CertificateInvalidError
		verifyErr   *tls.CertificateVerificationError
		recordErr   tls.RecordHeaderError
	)
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalidCert) ||
		errors.As(err, &verifyErr) || errors.As(err, &recordErr) {
		return ErrTLS
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return ErrNetwork
	}
	return nil
}
