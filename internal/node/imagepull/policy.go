// Package imagepull is the node agent's image pull logic as kubelet's
// image manager has it, apart from the worker that drives it: the pull
// policy of a container, whether to pull, the back-off after failed
// pulls, the pull secrets of a pod, and the messages of the events.
// Everything here is pure; the caller supplies the clock.
package imagepull

import (
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// Policy is the container's imagePullPolicy, defaulted as the API server
// defaults it when it is empty: Always for an image of tag latest or of
// no tag and no digest, IfNotPresent otherwise. svcnet's API server
// defaults it too; an object that skipped defaulting (a test's, an
// agent's fake) gets the same answer here.
func Policy(c *corev1.Container) corev1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	if latest(c.Image) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// latest reports whether ref names no digest and tag latest or none, as
// the API server's defaulting reads it. An unparsable name counts as
// latest (pulling it fails as InvalidImageName either way).
func latest(ref string) bool {
	r, err := name.ParseReference(ref, name.WithDefaultTag(""))
	if err != nil {
		return true
	}
	switch r := r.(type) {
	case name.Digest:
		return false
	case name.Tag:
		return r.TagStr() == "" || r.TagStr() == "latest"
	}
	return true
}

// Action is what to do about a container's image before it starts.
type Action int

const (
	// Use the image in the store.
	Use Action = iota
	// Pull it first.
	Pull
	// NeverPull: it is absent and the policy forbids pulling
	// (ErrImageNeverPull).
	NeverPull
)

// Decide applies policy to an image present in the store or not.
func Decide(policy corev1.PullPolicy, present bool) Action {
	switch {
	case policy == corev1.PullAlways:
		return Pull
	case present:
		return Use
	case policy == corev1.PullNever:
		return NeverPull
	default:
		return Pull
	}
}
