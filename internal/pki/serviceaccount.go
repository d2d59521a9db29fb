package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ServiceAccountKeyFile is the key that signs ServiceAccount tokens, in
// the pki directory (kube-apiserver's --service-account-signing-key-file).
const ServiceAccountKeyFile = "sa.key"

// EnsureServiceAccountKey loads the ServiceAccount signing key of dir,
// creating it on first use. It is kept across restarts: tokens already
// handed to pods stay valid.
func EnsureServiceAccountKey(dir string) (*ecdsa.PrivateKey, error) {
	path := filepath.Join(dir, ServiceAccountKeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		pemBytes, err := encodeKey(key)
		if err != nil {
			return nil, err
		}
		if err := writeFile(path, pemBytes); err != nil {
			return nil, err
		}
		return key, nil
	}
	if err != nil {
		return nil, err
	}
	signer, err := parseKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := signer.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return key, nil
}
