package pki

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
)

// EncryptionConfigFile is where svcnet up keeps the API server's
// EncryptionConfiguration, in the pki directory.
const EncryptionConfigFile = "encryption-config.yaml"

// EnsureEncryptionConfig writes, on first use, an EncryptionConfiguration
// that encrypts Secrets with a new 32-byte secretbox key (XSalsa20 and
// Poly1305: Kubernetes' recommended local provider, no rotation limit as
// aesgcm has). identity comes second so that Secrets written before
// still read. An existing file is kept as it is: keys are rotated by
// editing it (a new key first, then rewrite every Secret).
func EnsureEncryptionConfig(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - secretbox:
          keys:
            - name: key1
              secret: %s
      - identity: {}
`, base64.StdEncoding.EncodeToString(key))
	return writeFile(path, []byte(cfg))
}
