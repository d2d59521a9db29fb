package imagestore

// Image is a pulled image as the node agent needs it to run containers.
// It is stored as JSON so that a later process finds it without the
// network (Store.Get).
type Image struct {
	// Ref is the reference pulled, fully qualified as the name package
	// spells it (index.docker.io/library/nginx:1.27).
	Ref string `json:"ref"`
	// ID is what the kubelet reports as a container's imageID: the
	// repository at the digest the reference resolved to, the index's
	// for a multi-arch image (index.docker.io/library/nginx@sha256:…).
	ID string `json:"id"`
	// Digest is the digest in ID; ManifestDigest that of the platform's
	// image manifest (the same unless the reference named an index);
	// ConfigDigest that of the image's config, the image's identity.
	Digest         string `json:"digest"`
	ManifestDigest string `json:"manifestDigest"`
	ConfigDigest   string `json:"configDigest"`
	// Platform is the platform of the manifest pulled (os/arch[/variant]).
	Platform string `json:"platform"`
	Config   Config `json:"config"`
	// Layers are bottom to top, the order overlayfs stacks lower
	// directories in reverse.
	Layers []Layer `json:"layers"`
	// Size is the size of the image in the registry: the config and the
	// compressed layers, as the kubelet reports an image's size.
	Size int64 `json:"size"`
}

// Config is the part of the image's config that runs a container.
type Config struct {
	Entrypoint   []string `json:"entrypoint,omitempty"`
	Cmd          []string `json:"cmd,omitempty"`
	Env          []string `json:"env,omitempty"`
	WorkingDir   string   `json:"workingDir,omitempty"`
	User         string   `json:"user,omitempty"`
	ExposedPorts []string `json:"exposedPorts,omitempty"` // "80/tcp"
}

// Layer is one unpacked layer.
type Layer struct {
	// DiffID is the digest of the uncompressed layer, which keys its
	// directory; Digest and Size are those of the blob fetched.
	DiffID string `json:"diffID"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	// Dir is the overlayfs lower directory. It is not stored: the store's
	// root may be reached by another path in a later process.
	Dir string `json:"-"`
}
