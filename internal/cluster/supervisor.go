package cluster

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcnet/svcnet/internal/apiserver"
	"github.com/svcnet/svcnet/internal/controllermanager"
	"github.com/svcnet/svcnet/internal/dns/nodecache"
	"github.com/svcnet/svcnet/internal/node"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/supervise"
)

// APIPortInCluster is the API server's port on the underlay.
const APIPortInCluster = 6443

// supervisor runs a cluster's processes and restarts them when they die.
type supervisor struct {
	opts  Options
	plan  *Plan
	state State
	self  string

	// apiListener is the API server's port, held for the cluster's life
	// and handed to every run of the API server: no other process can take
	// the port between a pick and a bind, or during a restart.
	apiListener *os.File

	mu       sync.Mutex
	procs    []*supervise.Process // in the order they started
	stopping bool                 // shutdown has begun: nothing starts
}

// Supervise builds the cluster and keeps it running until ctx ends; then
// it stops every process and removes the cluster's namespaces. It is what
// `svcnet up` leaves running in the background.
func Supervise(ctx context.Context, name string) error {
	st := StateOf(name)
	opts, err := st.ReadOptions()
	if err != nil {
		return fmt.Errorf("cluster %s: %w", name, err)
	}
	plan, err := opts.plan()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	s := &supervisor{opts: opts, plan: plan, state: st, self: self}
	if err := os.WriteFile(st.pidFile(), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	defer s.shutdown()
	if err := s.start(ctx); err != nil {
		st.step("error: %v", err)
		return err
	}
	st.step("ready")
	<-ctx.Done()
	return nil
}

func (s *supervisor) start(ctx context.Context) error {
	t0 := time.Now()
	for _, d := range []string{"logs", "in-cluster", "nodes"} {
		if err := os.MkdirAll(s.state.path(d), 0o700); err != nil {
			return err
		}
	}
	if err := s.plan.Build(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	s.state.step("network: %d nodes on underlay %s, pods in %s, services in %s (%.1fs)",
		len(s.plan.Nodes), s.plan.Underlay, s.plan.ClusterCIDR, s.plan.ServiceCIDR, time.Since(t0).Seconds())

	port, err := s.listenAPI()
	if err != nil {
		return err
	}
	inCluster := s.plan.APIAddress()
	// Credentials first, before any process that uses them starts.
	ca, encryption, err := s.credentials(inCluster)
	if err != nil {
		return err
	}
	if s.plan.HA() {
		if err := s.startControlPlanes(ctx, ca, encryption, port, t0); err != nil {
			return err
		}
	} else if err := s.startAPIServer(ctx, ca, encryption, port, inCluster, t0); err != nil {
		return err
	}

	for _, n := range s.plan.Nodes {
		dir := s.state.NodeDir(n.Name)
		o := node.Defaults()
		o.Kubeconfig, o.HostnameOverride = s.state.InCluster(n.Name), n.Name
		o.NodeIP, o.PodCIDR, o.PodBridge = n.IP.String(), n.PodCIDR.String(), PodBridge
		o.ClusterCIDR, o.NetnsPrefix, o.RootDir = s.plan.ClusterCIDR.String(), n.Netns+"-", dir
		o.ClusterDNS, o.IPTablesBinary = s.dnsIP().String(), s.iptables()
		o.Address = netip.AddrPortFrom(n.IP, 10250).String()
		o.TLSCertFile, o.TLSPrivateKeyFile = filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
		o.ClientCAFile = filepath.Join(s.state.APIServerDir(), "pki", pki.CACertFile)
		o.ImageStoreDir, o.PodUsersDir = ImageStoreDir(), PodUsersDir()
		o.RegistryMirrors, o.InsecureRegistries = s.opts.RegistryMirrors, s.opts.InsecureRegistries
		o.CgroupRoot = NodeCgroup(s.opts.Name, n.Name)
		if s.opts.NodeLocalDNS {
			// The cache reads one Service and its slices: the proxy's
			// identity is enough.
			nc := nodecache.Defaults()
			nc.Kubeconfig, nc.ClusterDNS, nc.IPTablesBinary = s.state.InCluster("proxy"), o.ClusterDNS, s.iptables()
			o.NodeCacheCommand = strings.Join(append([]string{s.self, "node-cache"}, nc.Args()...), " ")
			o.ClusterDNS = nodecache.DefaultAddress
		}
		s.run(n.Name, s.inNetns(n.Netns, append([]string{"node"}, o.Args()...)...))
	}
	if !s.plan.HA() {
		s.runEdge(nil)
	}

	client, err := s.client()
	if err != nil {
		return err
	}
	if err := waitNodes(ctx, client, len(s.plan.Nodes), s.opts.stepWait()); err != nil {
		return err
	}
	s.state.step("nodes: %d ready (%.1fs)", len(s.plan.Nodes), time.Since(t0).Seconds())
	if err := s.installProxy(ctx, client, inCluster); err != nil {
		return err
	}
	if s.opts.ProxyMode == ProxyModeNone {
		s.state.step("service proxy: none (--proxy-mode none): Services carry no traffic until one is installed, e.g. svcnet manifests proxy | kubectl apply -f -")
	} else {
		s.state.step("service proxy: DaemonSet kube-system/kube-proxy, mode %s, ready on every node (%.1fs)", s.opts.ProxyMode, time.Since(t0).Seconds())
	}
	if err := installAddons(ctx, client, s); err != nil {
		return err
	}
	ingress := fmt.Sprintf(", ingress controller (%s/%s, IngressClass %s, GatewayClass %s)", IngressNamespace, IngressName, IngressClassName, GatewayClassName)
	if s.opts.NoIngress {
		ingress = ""
	}
	if s.opts.NodeLocalDNS {
		ingress += fmt.Sprintf(", node-local DNS cache at %s on every node", nodecache.DefaultAddress)
	}
	if s.opts.ProxyMode == ProxyModeNone {
		s.state.step("add-ons: cluster DNS at %s (kube-system/kube-dns)%s installed, not ready until a proxy runs (%.1fs)", s.dnsIP(), ingress, time.Since(t0).Seconds())
		return nil
	}
	s.state.step("add-ons: cluster DNS at %s (kube-system/kube-dns)%s ready (%.1fs)", s.dnsIP(), ingress, time.Since(t0).Seconds())
	return nil
}

// credentials makes, once and before anything starts, every key and
// certificate of the cluster: its CA, etcd's CA and certificates, the
// key that signs ServiceAccount tokens, the key that encrypts Secrets at rest, the kubeconfigs of the components in
// the cluster and the node agents' serving certificates. It returns the
// CA and the encryption configuration's path.
func (s *supervisor) credentials(inCluster netip.AddrPort) (*pki.CA, string, error) {
	pkiDir := filepath.Join(s.state.APIServerDir(), "pki")
	ca, err := pki.EnsureCA(pkiDir)
	if err != nil {
		return nil, "", fmt.Errorf("cluster CA: %w", err)
	}
	if _, err := pki.EnsureEtcd(pkiDir); err != nil {
		return nil, "", err
	}
	if _, err := pki.EnsureServiceAccountKey(pkiDir); err != nil {
		return nil, "", fmt.Errorf("service account key: %w", err)
	}
	encryption := filepath.Join(pkiDir, pki.EncryptionConfigFile)
	if err := pki.EnsureEncryptionConfig(encryption); err != nil {
		return nil, "", fmt.Errorf("encryption at rest: %w", err)
	}
	server := "https://" + inCluster.String()
	write := func(id, user string, groups ...string) error {
		cred, err := ca.ClientCredentials(user, groups...)
		if err != nil {
			return err
		}
		return pki.WriteKubeconfig(s.state.InCluster(id), pki.Kubeconfig("svcnet", server, ca.CertPEM, cred))
	}
	// The edge and the node-local DNS caches read Services as the proxy.
	if err := write("proxy", apiserver.ProxyUser, apiserver.ProxyGroup); err != nil {
		return nil, "", err
	}
	for _, n := range s.plan.Nodes {
		if err := write(n.Name, apiserver.NodeUserPrefix+n.Name, apiserver.NodeGroup); err != nil {
			return nil, "", err
		}
		dir := s.state.NodeDir(n.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", err
		}
		// The node agent's serving certificate, for the API server's
		// logs and exec requests.
		certPEM, keyPEM, err := ca.Issue("system:node:"+n.Name, []string{"system:nodes"}, []string{n.IP.String(), n.Name}, false)
		if err != nil {
			return nil, "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "node.crt"), certPEM, 0o600); err != nil {
			return nil, "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "node.key"), keyPEM, 0o600); err != nil {
			return nil, "", err
		}
	}
	return ca, encryption, nil
}

// iptables is the cluster's one iptables binary.
func (s *supervisor) iptables() string { return cmp.Or(s.opts.IPTablesBinary, "iptables") }

// dnsIP is the tenth address of the service range, like kube-dns's.
func (s *supervisor) dnsIP() netip.Addr {
	a := s.plan.ServiceCIDR.Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// listenAPI binds the API server's port on loopback: --api-port, or
// 6443 if free, or any free port.
func (s *supervisor) listenAPI() (int, error) {
	candidates := []int{6443, 0}
	if s.opts.APIPort != 0 {
		candidates = []int{s.opts.APIPort}
	}
	var err error
	for _, p := range candidates {
		var l net.Listener
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
			continue
		}
		f, ferr := l.(*net.TCPListener).File()
		l.Close() // f is a duplicate that keeps the socket open
		if ferr != nil {
			return 0, fmt.Errorf("API server port: %w", ferr)
		}
		s.apiListener = f
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	return 0, fmt.Errorf("no port for the API server: %w", err)
}

// run keeps `svcnet args…` running as the component name, its output in
// the component's log, its pids recorded for svcnet down.
func (s *supervisor) run(name string, args []string, files ...*os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return
	}
	s.procs = append(s.procs, supervise.Start(supervise.Spec{
		Name:    name,
		Argv:    append([]string{s.self}, args...),
		Log:     s.state.Log(name),
		Files:   files,
		OnStart: s.state.recordPid,
	}))
}

// shutdown stops the processes in the reverse order of their start (node
// agents first, so that pods end before the API server) and removes the
// cluster's network.
func (s *supervisor) shutdown() {
	s.mu.Lock()
	s.stopping = true
	procs := s.procs
	s.mu.Unlock()
	for _, p := range slices.Backward(procs) {
		p.Stop()
	}
	// Containers outlive their agents (shims of their own session): end
	// everything still running in the cluster's namespaces first.
	killInNamespaces(NetnsPrefix(s.opts.Name))
	if err := Destroy(s.opts.Name); err != nil {
		slog.Error("remove network", "err", err)
	}
	if s.apiListener != nil {
		s.apiListener.Close()
	}
	_ = os.Remove(s.state.pidFile())
}

// startAPIServer runs the one API server (embedded etcd) on the host's
// loopback port, also listening on the underlay, and the controller
// manager.
func (s *supervisor) startAPIServer(ctx context.Context, ca *pki.CA, encryption string, port int, inCluster netip.AddrPort, t0 time.Time) error {
	o := s.apiServer(s.state.APIServerDir(), encryption)
	o.BindAddress, o.SecurePort, o.ListenFD, o.WriteKubeconfig = "127.0.0.1", port, 3, s.state.Kubeconfig()
	o.AlsoListenAt = []string{s.plan.UnderlayNetns() + "/" + inCluster.String()}
	o.AdvertiseAddress = s.plan.Gateway.String()
	o.Nodes.Netns = s.plan.UnderlayNetns()
	s.run("apiserver", slices.Concat([]string{"apiserver"}, o.Args(), s.opts.APIServerArgs), s.apiListener)
	if err := s.waitAPI(ctx, ca, port); err != nil {
		return err
	}
	s.state.step("control plane: API server with embedded etcd at https://127.0.0.1:%d (in the cluster: https://%s) (%.1fs)",
		port, inCluster, time.Since(t0).Seconds())

	s.run("controller-manager", s.controllerManager(filepath.Join(s.state.APIServerDir(), apiserver.KubeconfigDir, "controller-manager.kubeconfig"), false))

	return nil
}

// apiServer is what every API server of the cluster is given: its data
// directory, the cluster's service ranges, the node agents' connection,
// encryption at rest.
func (s *supervisor) apiServer(dataDir, encryption string) apiserver.Options {
	o := apiserver.Defaults()
	o.DataDir, o.EncryptionProviderConfig = dataDir, encryption
	o.ServiceCIDR, o.NodePortRange = s.opts.ServiceCIDR, s.opts.NodePortRange
	o.Nodes.Enabled = true
	return o
}

// controllerManager is the command line of a controller manager: the
// cluster's load-balancer pool, no health or metrics server, and --leader-elect
// when there are several; then `up`'s --controller-manager-args.
func (s *supervisor) controllerManager(kubeconfig string, leaderElect bool) []string {
	o := controllermanager.Defaults()
	o.Kubeconfig, o.BindAddress, o.LeaderElect, o.LoadBalancerPool = kubeconfig, "0", leaderElect, s.plan.LBPool
	return slices.Concat([]string{"controller-manager"}, o.Args(), s.opts.ControllerManagerArgs)
}

// runEdge runs the edge load balancer; with backends, it also balances
// the API over them at the cluster's API address.
func (s *supervisor) runEdge(backends []string) {
	args := []string{"edge", "--kubeconfig", s.state.InCluster("proxy"), "--interface", "eth0", "--iptables-binary", s.iptables()}
	if len(backends) > 0 {
		args = append(args, "--api-address", s.plan.APIAddress().String(), "--api-backends", strings.Join(backends, ","),
			"--api-ca", filepath.Join(s.state.APIServerDir(), "pki", pki.CACertFile))
	}
	s.run("edge", s.inNetns(s.plan.EdgeNetns(), args...))
}
