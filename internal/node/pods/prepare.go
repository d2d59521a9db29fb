package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/images"
	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

// launch is how a container starts, as its pod, its spec and its image
// make it.
type launch struct {
	argv []string
	env  []string
	dir  string
	sec  *runtime.Security
	// imageID is the store's image's ID ("" for a built-in image).
	imageID string
}

// prepare works out how c starts. On failure, reason is the kubelet's
// waiting reason: ErrImagePull for an image neither built in nor in the
// node's store, CreateContainerConfigError for the rest.
func (p *Pod) prepare(ctx context.Context, c *Container) (launch, string, error) {
	const configError = "CreateContainerConfigError"
	builtin, stored, err := p.image(c.Spec.Image)
	if err != nil {
		return launch{}, "ErrImagePull", err
	}
	sec, home, err := p.confinement(c, stored)
	if err != nil {
		return launch{}, configError, err
	}
	// The pod's own status (its IP) is visible to the downward API.
	pod := p.pod.DeepCopy()
	pod.Status.PodIP, pod.Status.PodIPs = p.ip.String(), []corev1.PodIP{{IP: p.ip.String()}}
	pod.Status.HostIP = p.rt.NodeIP.String()
	base := baseEnv
	if stored != nil {
		base = imageBaseEnv(stored.Config, home)
	}
	env, err := containerEnv(ctx, pod, &c.Spec, base, p.rt.Node.ServiceEnv(pod), p.rt.Node)
	if err != nil {
		return launch{}, configError, err
	}
	vars := envMap(env)
	l := launch{env: env, sec: sec}
	if stored != nil {
		// Only the container's own command and args are expanded, as
		// the kubelet does before the runtime adds the image's.
		l.argv, err = imageArgv(stored.Config, expandAll(c.Spec.Command, vars), expandAll(c.Spec.Args, vars))
		l.dir = imageWorkingDir(stored.Config, &c.Spec)
		l.imageID = stored.ID
	} else {
		l.argv, err = p.argv(builtin, c)
		l.argv = expandAll(l.argv, vars)
		l.dir = c.Spec.WorkingDir
	}
	if err != nil {
		return launch{}, configError, err
	}
	return l, "", nil
}

func expandAll(args []string, vars map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = Expand(a, vars)
	}
	return out
}

// image finds the image of a container: built in first, as ever, else
// in the node's image store (a built-in image's stored is nil).
func (p *Pod) image(ref string) (builtin images.Image, stored *imagestore.Image, err error) {
	if img, ok := images.Lookup(ref); ok {
		return img, nil, nil
	}
	if p.rt.Images == nil {
		return images.Image{}, nil, images.ErrNotBuiltin(ref)
	}
	img, err := p.rt.Images.Get(ref)
	if err != nil {
		return images.Image{}, nil, fmt.Errorf("%w, nor in the node's image store: %w", images.ErrNotBuiltin(ref), err)
	}
	return images.Image{}, img, nil
}
