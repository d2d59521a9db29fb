package imagestore

import "errors"

// The classes of failure the kubelet tells apart. Errors returned by Pull
// and Get wrap one of these (errors.Is) together with their cause
// (errors.As reaches e.g. a *transport.Error).
var (
	// ErrInvalidReference: the reference does not parse (InvalidImageName).
	ErrInvalidReference = errors.New("invalid image reference")
	// ErrNotFound: the registry has no such repository, tag or digest.
	ErrNotFound = errors.New("image not found")
	// ErrUnauthorized: the registry refused the credentials, or their
	// absence.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNetwork: the registry could not be reached or the connection broke.
	ErrNetwork = errors.New("network error")
	// ErrTLS: the TLS handshake with the registry failed.
	ErrTLS = errors.New("TLS error")
	// ErrPlatform: the image is an index offering no manifest for this
	// node's platform.
	ErrPlatform = errors.New("platform not offered")
	// ErrVerify: content did not match its digest.
	ErrVerify = errors.New("content verification failed")
	// ErrUnsafePath: a layer entry would be written outside the layer.
	ErrUnsafePath = errors.New("unsafe path in layer")
	// ErrNotPresent: Get found no pulled image for the reference.
	ErrNotPresent = errors.New("image not present")
	// ErrArchive: Load was given what is not a whole `docker save` or OCI
	// image layout archive (not a tar, truncated, a file it names missing,
	// a manifest that does not parse) or an image it cannot name.
	ErrArchive = errors.New("invalid image archive")
)

// Reason is the kubelet's waiting reason for a failed pull: InvalidImageName
// for a reference that does not parse, ErrImageNeverPull for an image
// missing under imagePullPolicy Never (Get's ErrNotPresent), ErrImagePull
// for the rest.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrInvalidReference):
		return "InvalidImageName"
	case errors.Is(err, ErrNotPresent):
		return "ErrImageNeverPull"
	default:
		return "ErrImagePull"
	}
}
