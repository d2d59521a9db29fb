// Package pods runs pods as processes (kubelet's container runtime
// manager): a pod's sandbox (its network, its files, its volumes), the
// start of its containers, the adoption of those an earlier agent left
// running, their hooks and probes, and their stop. A Pod is driven by
// one goroutine, its worker, which decides what to start and when to
// stop; this package only carries it out.
package pods

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/node/cgroups"
	"github.com/svcnet/svcnet/internal/node/hostports"
	"github.com/svcnet/svcnet/internal/node/podstate"
	"github.com/svcnet/svcnet/internal/node/prober"
	"github.com/svcnet/svcnet/internal/node/runtime"
	"github.com/svcnet/svcnet/internal/node/users"
	"github.com/svcnet/svcnet/internal/node/volumes"
)

// Runtime is what every pod of the node shares: the node's settings and
// what the pods need of their agent.
type Runtime struct {
	Self          string // the svcnet executable, which runs every container
	NodeIP        netip.Addr
	ClusterDNS    string
	ClusterDomain string
	NodeResolv    string // the node's resolv.conf, for pods with the node's DNS
	Net           Network
	Volumes       volumes.Source
	Node          Node
	// Cgroups is where containers' limits are enforced.
	Cgroups cgroups.Hierarchy
	// Users gives each pod its default user (the machine's claims).
	Users *users.Allocator
	// Images, when set, is the node's image store: a container whose
	// image is not built in runs from there if it was pulled. Built-in
	// images take precedence.
	Images ImageSource
}

// Network gives pods a network namespace and an address of their own.
type Network interface {
	// Setup creates (or finds) the pod's namespace and returns its
	// address and namespace name.
	Setup(uid string) (netip.Addr, string, error)
	// Teardown removes the namespace and frees the address.
	Teardown(uid string)
}

// Node is what pods need of their node agent.
type Node interface {
	EnvSource
	// ServiceEnv is the service environment of a pod starting now.
	ServiceEnv(pod *corev1.Pod) []corev1.EnvVar
	// SetHostPorts records a pod's hostPorts (none: forget the pod).
	SetHostPorts(uid types.UID, ms []hostports.Mapping) error
	// Event records an event on the pod.
	Event(pod *corev1.Pod, typ, reason, format string, args ...any)
}

// Exit is the end of one start of a container.
type Exit struct {
	c    *Container
	gen  int
	code int
	at   time.Time
}

// Pod is one pod's sandbox and containers. It belongs to its worker's
// goroutine: no method may be called from another.
type Pod struct {
	rt  *Runtime
	uid types.UID
	dir string
	pod *corev1.Pod

	ip         netip.Addr
	netns      string
	containers []*Container
	sandboxErr string
	vols       apiVolumes
	adopted    bool // looked for containers of an earlier run
	// init holds the PID namespace the containers share when the pod
	// asks (shareProcessNamespace), as the pause container does.
	init *runtime.Process
	// user is the pod's default user, claimed with its sandbox.
	user int64

	exits  chan Exit
	probes chan prober.Result
	// publish hands the node server a new ExecInfo.
	publish func(*ExecInfo)
}

// New prepares the sandbox of pod, whose containers' states are
// containers, in dir; nothing is set up until EnsureSandbox. publish
// receives the pod's ExecInfo whenever a container starts or stops.
func New(rt *Runtime, pod *corev1.Pod, dir string, containers []*podstate.Container, publish func(*ExecInfo)) *Pod {
	// Absolute: it is the owner of the pod's user (users.Allocator).
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	p := &Pod{rt: rt, uid: pod.UID, dir: dir, pod: pod, publish: publish,
		exits: make(chan Exit, 16), probes: make(chan prober.Result, 16)}
	for _, c := range containers {
		p.containers = append(p.containers, &Container{Container: c})
	}
	return p
}

// Update hands the pod's newest copy from the API.
func (p *Pod) Update(pod *corev1.Pod) { p.pod = pod }

// Exits delivers the end of every container start.
func (p *Pod) Exits() <-chan Exit { return p.exits }

// Probes delivers the verdicts of the containers' probes.
func (p *Pod) Probes() <-chan prober.Result { return p.probes }

// IP is the pod's address (invalid before its sandbox has one).
func (p *Pod) IP() netip.Addr { return p.ip }

// SandboxErr is why the sandbox could not be set up ("" when it is).
func (p *Pod) SandboxErr() string { return p.sandboxErr }

// Container is the container named name, or nil.
func (p *Pod) Container(name string) *Container {
	for _, c := range p.containers {
		if c.Spec.Name == name {
			return c
		}
	}
	return nil
}

// AnyRunning reports whether a container of the pod runs.
func (p *Pod) AnyRunning() bool {
	return slices.ContainsFunc(p.containers, func(c *Container) bool { return c.Running() })
}

func (p *Pod) log() *slog.Logger {
	return slog.With("pod", p.pod.Namespace+"/"+p.pod.Name)
}

func (p *Pod) event(typ, reason, format string, args ...any) {
	p.rt.Node.Event(p.pod, typ, reason, format, args...)
}

// EnsureSandbox sets up (or finds) the pod's network and files, and the
// first time adopts the containers an earlier run of the agent left
// running; it reports whether the sandbox is there.
func (p *Pod) EnsureSandbox(ctx context.Context) bool {
	if !p.ip.IsValid() {
		ip, ns, err := p.setUpNetwork()
		if err != nil {
			p.sandboxErr = err.Error()
			p.log().Warn("pod sandbox failed", "err", err)
			return false
		}
		p.sandboxErr, p.ip, p.netns = "", ip, ns
		if err := p.writeFiles(); err != nil {
			p.sandboxErr = err.Error()
			p.ip = netip.Addr{}
			return false
		}
		if err := p.claimUser(); err != nil {
			p.sandboxErr = err.Error()
			p.ip = netip.Addr{}
			return false
		}
		if err := runtime.NewPodNamespaces(p.nsDir(), Hostname(p.pod), p.pod.Spec.HostIPC); err != nil {
			p.sandboxErr = err.Error()
			p.ip = netip.Addr{}
			return false
		}
		if !p.adopted {
			p.adopted = true
			p.adopt(ctx)
		}
	}
	if err := p.ensureInit(); err != nil {
		p.sandboxErr = err.Error()
		return false
	}
	if err := p.syncVolumes(ctx); err != nil {
		p.sandboxErr = err.Error()
		return false
	}
	p.sandboxErr = ""
	return true
}

// Adopted reports whether the pod looked for the containers of an
// earlier run of the agent.
func (p *Pod) Adopted() bool { return p.adopted }

// setUpNetwork gives the pod its network: the node's own for a
// hostNetwork pod (its address, the agent's namespace), else a namespace
// and an address of its own.
func (p *Pod) setUpNetwork() (netip.Addr, string, error) {
	if p.pod.Spec.HostNetwork {
		return p.rt.NodeIP, fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), nil
	}
	ip, ns, err := p.rt.Net.Setup(string(p.uid))
	if err != nil {
		return ip, ns, err
	}
	// The hostPorts belong to the sandbox, as kubelet's CNI portmap maps
	// them with the pod's network.
	if err := p.rt.Node.SetHostPorts(p.uid, hostports.FromPod(p.pod, ip)); err != nil {
		return netip.Addr{}, "", fmt.Errorf("hostPorts: %w", err)
	}
	return ip, ns, nil
}

func (p *Pod) writeFiles() error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"resolv.conf": ResolvConf(p.pod, p.rt.ClusterDNS, p.rt.ClusterDomain, p.rt.NodeResolv),
		"hosts":       HostsFile(p.pod, p.ip.String(), p.rt.ClusterDomain),
		"hostname":    Hostname(p.pod) + "\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(p.dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// TeardownNetwork removes the pod's hostPorts and its network namespace
// (a hostNetwork pod has none of its own).
func (p *Pod) TeardownNetwork() {
	if err := p.rt.Node.SetHostPorts(p.uid, nil); err != nil {
		p.log().Warn("remove the pod's hostPorts", "err", err)
	}
	if p.ip.IsValid() && !p.pod.Spec.HostNetwork {
		p.rt.Net.Teardown(string(p.uid))
		p.ip = netip.Addr{}
	}
}

// Remove removes what is left of a stopped pod on the node: its network,
// also one this run never set up, and its directory.
func (p *Pod) Remove() {
	p.TeardownNetwork()
	p.rt.Net.Teardown(string(p.uid))
	runtime.Kill(filepath.Join(p.dir, initRun))
	if err := p.rt.Cgroups.RemoveAll(p.cgroupPrefix()); err != nil {
		p.log().Warn("remove the pod's cgroups", "err", err)
	}
	if err := runtime.ReleaseNamespaces(p.dir); err != nil {
		p.log().Warn("release the pod's namespaces", "err", err)
	}
	if p.user != 0 {
		if err := p.rt.Users.Release(p.dir, p.user); err != nil {
			p.log().Warn("release the pod's user", "err", err)
		}
	}
	_ = os.RemoveAll(p.dir)
}
