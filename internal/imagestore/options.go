package imagestore

import (
	"net/http"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// PullOptions are a pull's credentials and the node's registry settings.
type PullOptions struct {
	// PullSecrets are the .dockerconfigjson values of the pod's
	// imagePullSecrets, tried in order.
	PullSecrets [][]byte
	// Mirrors lists, per registry host (as in the reference: "docker.io"
	// and "index.docker.io" both name Docker Hub), the mirrors to try in
	// order before the registry itself, as containerd's hosts.toml does.
	// A mirror is "host[:port]", or "http://host[:port]" for one spoken
	// to in plain HTTP, "https://host[:port]"; it serves the same
	// repository names as the registry (path prefixes are not supported).
	Mirrors map[string][]string
	// Insecure are the hosts (registries or mirrors) to speak plain HTTP
	// to. The name package already does for localhost, loopback and
	// private addresses.
	Insecure []string
	// Platform to resolve a multi-arch index to; nil is this node's.
	Platform *v1.Platform
	// Transport is the base of every request; nil is go-containerregistry's
	// default transport.
	Transport http.RoundTripper
	// Progress, if set, is called as a layer's blob arrives. A pull that
	// joins one already running in the process is not told its progress.
	Progress func(Progress)
}

// Progress is the state of one layer's download.
type Progress struct {
	DiffID string // the layer, "sha256:…"
	Done   int64  // bytes of the blob received
	Total  int64  // the blob's size
}
