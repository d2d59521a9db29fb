package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options are what `svcnet up` was asked for.
type Options struct {
	Name          string
	Nodes         int
	ProxyMode     string
	NodePortRange string
	ServiceCIDR   string
	ClusterCIDR   string
	// APIPort is the API server's port on the host's loopback (0: 6443 if
	// free, else any).
	APIPort int
	// APIServerArgs pass through to `svcnet apiserver`.
	APIServerArgs []string
	// ControllerManagerArgs pass through to `svcnet controller-manager`.
	ControllerManagerArgs []string
	// DNSUpstream is where the cluster DNS forwards outside names (none by
	// default: the cluster has no route out).
	DNSUpstream string
	// IPTablesBinary is every node's and the edge's iptables, chosen once
	// for the cluster: mixing backends in one namespace breaks rules.
	IPTablesBinary string
	// NoIngress leaves out the ingress controller add-on (tests that do
	// not use it save two pods' CPU; `make run` shows it).
	NoIngress bool
	// ControlPlanes is the number of control-plane hosts: 1 (or 0) is one
	// API server with embedded etcd on the host; 3, 5 or 7 are as many
	// etcd members, API servers and controller managers, each host in a
	// namespace of its own, behind the edge's API load balancer.
	ControlPlanes int
	// NodeLocalDNS runs a node-local DNS cache (svcnet node-cache) in
	// every node's namespace and points pods' resolv.conf at it.
	NodeLocalDNS bool
	// Wait bounds each step of the start (API server ready, nodes
	// ready, each add-on ready); 90 s when zero. Slow machines (the test
	// VM's emulated CPU) need more.
	Wait time.Duration
	// RegistryMirrors (host=endpoint) and InsecureRegistries (host) pass
	// through to every node agent's --registry-mirror and
	// --insecure-registry, in order.
	RegistryMirrors    []string
	InsecureRegistries []string
}

// stepWait is o.Wait or its default.
func (o Options) stepWait() time.Duration {
	if o.Wait > 0 {
		return o.Wait
	}
	return 90 * time.Second
}

// Home is where clusters keep their state: $SVCNET_HOME or ~/.svcnet.
func Home() string {
	if h := os.Getenv("SVCNET_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".svcnet")
}

// ImageStoreDir is the machine's image store: every node agent of every
// cluster pulls into it, so an image is fetched and unpacked once per
// machine (its layers are shared; imagestore serialises the writers).
func ImageStoreDir() string { return filepath.Join(Home(), "images") }

// PodUsersDir holds the claims on pods' default users of every node of
// every cluster, so that no two pods of the machine share one.
func PodUsersDir() string { return filepath.Join(Home(), "users") }

// State is the directory of one cluster.
type State struct{ Dir string }

// StateOf returns the state directory of cluster name.
func StateOf(name string) State { return State{Dir: filepath.Join(Home(), name)} }

func (s State) path(parts ...string) string {
	return filepath.Join(append([]string{s.Dir}, parts...)...)
}

// Files of a cluster's state.
func (s State) Kubeconfig() string              { return s.path("kubeconfig") }
func (s State) APIServerDir() string            { return s.path("apiserver") }
func (s State) ControlPlaneDir(n string) string { return s.path("control-planes", n) }
func (s State) InCluster(id string) string      { return s.path("in-cluster", id+".kubeconfig") }
func (s State) NodeDir(node string) string      { return s.path("nodes", node) }
func (s State) Log(component string) string     { return s.path("logs", component+".log") }
func (s State) progress() string                { return s.path("progress") }
func (s State) pidFile() string                 { return s.path("supervisor.pid") }
func (s State) pidsFile() string                { return s.path("pids") }
func (s State) optionsFile() string             { return s.path("options.json") }

func (s State) writeOptions(o Options) error {
	data, _ := json.MarshalIndent(o, "", "  ")
	return os.WriteFile(s.optionsFile(), data, 0o600)
}

// ReadOptions returns what the cluster was started with.
func (s State) ReadOptions() (Options, error) {
	var o Options
	data, err := os.ReadFile(s.optionsFile())
	if err != nil {
		return o, err
	}
	return o, json.Unmarshal(data, &o)
}

// Exists reports whether the cluster has state.
func (s State) Exists() bool {
	_, err := os.Stat(s.optionsFile())
	return err == nil
}

// supervisorPid returns the running supervisor's pid, or 0.
func (s State) supervisorPid() int {
	data, err := os.ReadFile(s.pidFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !alive(pid) {
		return 0
	}
	return pid
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// recordPid appends a child's pid, so that `svcnet down` finds it even if
// the supervisor died.
func (s State) recordPid(pid int) {
	f, err := os.OpenFile(s.pidsFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, pid)
}

func (s State) pids() []int {
	data, _ := os.ReadFile(s.pidsFile())
	var out []int
	for _, l := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(l); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// step writes one line of progress for `svcnet up` to show.
func (s State) step(format string, args ...any) {
	f, err := os.OpenFile(s.progress(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}
