// Package confine turns a pod's securityContext and volumes into what the
// container runtime applies to its processes. It decides only; it is pure
// and tested without root.
//
// Where the pod asks for nothing, a container runs as an unprivileged user
// of its pod's own (the default user the node allocates it, package
// users) with no capabilities (but NET_BIND_SERVICE in hostNetwork pods),
// no privilege escalation and the machine's filesystem read-only —
// stricter than a container runtime's default (the image's user, often
// root, with 14 capabilities), because a built-in image's container
// sees the machine's filesystem rather than an image's, and hostPath
// volumes show it to any container: root (user or group 0) is refused
// unless the container is privileged, since root owns the machine's
// files, the cluster's credentials among them. A user per pod keeps
// what one pod writes from another's. A privileged container is the
// documented way to get more: root, every capability, the machine
// writable.
//
// Containers of pulled images keep these defaults (their root is the
// image's); ForImage takes the image's user within them. Processes are
// isolated by namespaces (package runtime): a container sees its own
// PID namespace, or its pod's, and its pod's IPC namespace.
package confine

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/runtime"
	"github.com/svcnet/svcnet/internal/node/volumes"
)

// ImageUser is the user an image's config names, resolved against the
// image's own /etc/passwd and /etc/group (the caller's work: confine is
// pure).
type ImageUser struct {
	// Spec is the config's User as written: "uid", "uid:gid", "name" or
	// "name:group".
	Spec     string
	UID, GID int64
	// Groups are the groups the image's /etc/group lists the user in,
	// which containerd gives the process as supplementary groups.
	Groups []int64
}

// numeric reports whether the image names its user by number, which is
// all the kubelet can check runAsNonRoot against.
func (u *ImageUser) numeric() bool {
	name, _, _ := strings.Cut(u.Spec, ":")
	_, err := strconv.ParseUint(name, 10, 32)
	return err == nil
}

// RunAsUser reports whether the pod or the container names a user, which
// then wins over the image's: the image's is not even resolved.
func RunAsUser(pod *corev1.Pod, c *corev1.Container) bool {
	return (c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil) ||
		(pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsUser != nil)
}

// For is the confinement of container c of pod; podDir holds the pod's
// emptyDir volumes (podDir/volumes/NAME); defaultUser is the user of the
// pod's own the node gave it (package users), for containers that name
// none. An error is a configuration the node cannot honour
// (CreateContainerConfigError).
func For(pod *corev1.Pod, c *corev1.Container, podDir string, defaultUser int64) (runtime.Security, error) {
	return ForImage(pod, c, podDir, defaultUser, nil)
}

// ForImage is For for a container of an image whose config names a user
// (nil: none, or a built-in image). Kubernetes' rules: runAsUser and
// runAsGroup win; else the image's user, and its group unless runAsGroup
// names one. Where svcnet's defaults differ, they stay svcnet's:
//   - An image's root (user 0, or none named) runs as the pod's
//     default user, as a built-in image's container does, where Kubernetes
//     runs it as root; root still takes privileged: true.
//   - An image's group 0 with another user (a user by number that its
//     passwd lacks, "1001:0") becomes the user's number, as a runAsUser
//     alone does here: group 0 takes privileged: true too.
//
// runAsNonRoot is checked as the kubelet checks it: against runAsUser if
// set, else against the image's user, refused when it is 0 or a name
// (the kubelet cannot tell a name's uid). An image naming no user passes,
// unlike in Kubernetes (which takes it for root): it runs as the
// default user here.
func ForImage(pod *corev1.Pod, c *corev1.Container, podDir string, defaultUser int64, img *ImageUser) (runtime.Security, error) {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		// Said, never ignored: the pod asked for root mapped to an
		// unprivileged user, which svcnet cannot give yet.
		return runtime.Security{}, fmt.Errorf("container %s: hostUsers: false (a user namespace) is not supported by svcnet yet; "+
			"without runAsUser a pod runs as a user of its own, never root", c.Name)
	}
	privileged := csc.Privileged != nil && *csc.Privileged
	def := defaultUser
	if privileged {
		def = 0
	}
	runAsUser := csc.RunAsUser != nil || psc.RunAsUser != nil
	runAsGroup := csc.RunAsGroup != nil || psc.RunAsGroup != nil
	nonRoot := firstBool(csc.RunAsNonRoot, psc.RunAsNonRoot)
	if nonRoot && !runAsUser && img != nil {
		if !img.numeric() {
			return runtime.Security{}, fmt.Errorf("container %s has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root", c.Name, img.Spec)
		}
		if img.UID == 0 {
			return runtime.Security{}, fmt.Errorf("container %s has runAsNonRoot and image will run as root", c.Name)
		}
	}
	imageUser := img != nil && !runAsUser && img.UID != 0
	uid := pick(csc.RunAsUser, psc.RunAsUser, def)
	gid := pick(csc.RunAsGroup, psc.RunAsGroup, uid)
	switch {
	case imageUser:
		uid = img.UID
		gid = pick(csc.RunAsGroup, psc.RunAsGroup, img.GID)
		if !runAsGroup && gid == 0 {
			gid = uid
		}
	case !runAsUser && !runAsGroup:
		gid = def
	}
	for _, id := range []int64{uid, gid} {
		if id < 0 || id > 1<<32-2 {
			return runtime.Security{}, fmt.Errorf("user or group %d is out of range", id)
		}
	}
	if nonRoot && uid == 0 {
		return runtime.Security{}, fmt.Errorf("container %s has runAsNonRoot and would run as root (uid 0)", c.Name)
	}
	if !privileged && (uid == 0 || gid == 0 || slices.Contains(psc.SupplementalGroups, 0) || (psc.FSGroup != nil && *psc.FSGroup == 0)) {
		return runtime.Security{}, fmt.Errorf("container %s: user or group 0 (root) needs privileged: true on svcnet, "+
			"whose containers share the machine's filesystem, which root owns", c.Name)
	}
	// Every container has a root of its own over the machine's, its
	// layer mounted (in its namespace only) on the pod's directory.
	// svcnet's own user stands for an image's default user, often root:
	// it owns its root directory (in its layer), so that a container
	// writing files in / as its working directory, as images' root does,
	// works.
	sec := runtime.Security{ReadOnlyHost: !privileged, UID: uint32(uid), GID: uint32(gid), RootLayer: podDir,
		OwnsRoot: !privileged && uid == def && !runAsUser && !imageUser}

	// Supplementary groups: the pod's, and fsGroup, as kubelet gives them.
	groups := slices.Clone(psc.SupplementalGroups)
	if imageUser {
		// The image's own memberships, but never root's group, which
		// takes privileged here.
		groups = append(groups, slices.DeleteFunc(slices.Clone(img.Groups), func(g int64) bool { return g == 0 })...)
	}
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	for _, g := range groups {
		if g < 0 || g > 1<<32-2 {
			return runtime.Security{}, fmt.Errorf("supplemental group %d is out of range", g)
		}
		if !slices.Contains(sec.Groups, uint32(g)) && uint32(g) != sec.GID {
			sec.Groups = append(sec.Groups, uint32(g))
		}
	}
	slices.Sort(sec.Groups)

	caps, err := capabilities(csc.Capabilities, privileged, pod.Spec.HostNetwork)
	if err != nil {
		return runtime.Security{}, fmt.Errorf("container %s: %w", c.Name, err)
	}
	sec.Caps = caps
	// allowPrivilegeEscalation defaults to false here (true in Kubernetes
	// unless a policy says otherwise): setuid programs gain nothing.
	sec.NoNewPrivs = !privileged && !(csc.AllowPrivilegeEscalation != nil && *csc.AllowPrivilegeEscalation)
	if privileged && csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation {
		return runtime.Security{}, fmt.Errorf("container %s: privileged and allowPrivilegeEscalation: false contradict each other", c.Name)
	}

	sec.Mounts, err = mounts(pod, c, podDir, privileged)
	if err != nil {
		return runtime.Security{}, fmt.Errorf("container %s: %w", c.Name, err)
	}
	return sec, nil
}

func pick(container, pod *int64, def int64) int64 {
	if container != nil {
		return *container
	}
	if pod != nil {
		return *pod
	}
	return def
}

func firstBool(container, pod *bool) bool {
	if container != nil {
		return *container
	}
	return pod != nil && *pod
}

// capabilities is the set a container keeps: every one when privileged;
// else the defaults and what it adds, less what it drops unless it drops
// ALL, which — as in container runtimes — removes the defaults, not adds.
// There are no defaults but NET_BIND_SERVICE for hostNetwork pods: a pod
// with a network of its own binds low ports as any user (the sysctl
// ip_unprivileged_port_start, as containerd sets it), and a server of a
// hostNetwork pod, root in Kubernetes, must listen on 80 on the node too.
func capabilities(c *corev1.Capabilities, privileged, hostNetwork bool) ([]string, error) {
	if privileged {
		return runtime.AllCaps(), nil
	}
	bind, _ := runtime.CapNumber("NET_BIND_SERVICE")
	if c == nil {
		if hostNetwork {
			return []string{runtime.AllCaps()[bind]}, nil
		}
		return nil, nil
	}
	dropAll := false
	drop := map[int]bool{}
	for _, d := range c.Drop {
		if strings.EqualFold(string(d), "ALL") {
			dropAll = true
			continue
		}
		n, ok := runtime.CapNumber(string(d))
		if !ok {
			return nil, fmt.Errorf("unknown capability %q in drop", d)
		}
		drop[n] = true
	}
	var keep []int
	if hostNetwork && !dropAll && !drop[bind] {
		keep = append(keep, bind)
	}
	for _, a := range c.Add {
		if strings.EqualFold(string(a), "ALL") {
			for i := range runtime.AllCaps() {
				keep = append(keep, i)
			}
			continue
		}
		n, ok := runtime.CapNumber(string(a))
		if !ok {
			return nil, fmt.Errorf("unknown capability %q in add", a)
		}
		keep = append(keep, n)
	}
	slices.Sort(keep)
	keep = slices.Compact(keep)
	all := runtime.AllCaps()
	var out []string
	for _, n := range keep {
		if !drop[n] || dropAll {
			out = append(out, all[n])
		}
	}
	return out, nil
}

// mounts are the container's volumeMounts: hostPath and emptyDir volumes,
// and those the node fills from the API (package volumes).
// A confined container's mount targets must be in its private places or
// exist on the machine (its filesystem is read-only: nothing is created
// there); that is checked when the container starts.
func mounts(pod *corev1.Pod, c *corev1.Container, podDir string, privileged bool) ([]runtime.Mount, error) {
	var out []runtime.Mount
	for _, vm := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 {
			return nil, fmt.Errorf("volumeMount %q names no volume of the pod", vm.Name)
		}
		v := pod.Spec.Volumes[i]
		if !path.IsAbs(vm.MountPath) {
			return nil, fmt.Errorf("volumeMount %q: mountPath %q is not absolute", vm.Name, vm.MountPath)
		}
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			return nil, fmt.Errorf("volumeMount %q: subPath is not supported by svcnet's node agent", vm.Name)
		}
		m := runtime.Mount{Target: path.Clean(vm.MountPath), ReadOnly: vm.ReadOnly}
		switch {
		case v.HostPath != nil:
			if !path.IsAbs(v.HostPath.Path) {
				return nil, fmt.Errorf("volume %q: hostPath %q is not absolute", v.Name, v.HostPath.Path)
			}
			m.Source = path.Clean(v.HostPath.Path)
			// The machine stays read-only for a confined container,
			// through a hostPath too.
			if !privileged {
				m.ReadOnly = true
			}
		case v.EmptyDir != nil:
			m.Source = filepath.Join(podDir, "volumes", v.Name)
		case volumes.Managed(&v):
			// Written by the node from the API; never by the container.
			m.Source, m.ReadOnly = filepath.Join(podDir, "volumes", v.Name), true
		default:
			return nil, fmt.Errorf("volume %q: only hostPath, emptyDir, projected, configMap, secret and downwardAPI volumes are supported by svcnet's node agent", v.Name)
		}
		out = append(out, m)
	}
	return out, nil
}

// EmptyDirs are the directories of the pod's emptyDir volumes, which the
// node makes (mode 0777, as kubelet) before its containers start.
func EmptyDirs(pod *corev1.Pod, podDir string) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			out = append(out, filepath.Join(podDir, "volumes", v.Name))
		}
	}
	return out
}
