// Package app assembles `svcnet proxy`: the client and informers, the
// change tracker, the sync runner, the mode's proxier, the health-check
// and metrics servers, and conntrack cleanup. It programs the network
// namespace the process runs in; svcnet's node agent starts one inside
// each node's namespace.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/iptables"
	ipvsproxy "github.com/svcnet/svcnet/internal/proxy/ipvs"
	"github.com/svcnet/svcnet/internal/proxy/userspace"
)

// Options are `svcnet proxy`'s settings, named after kube-proxy's flags.
type Options struct {
	Kubeconfig string
	// Mode is the proxy mode; see ModeNames. Default iptables.
	Mode string
	// HostnameOverride is the Node this proxy serves: its endpoints are
	// local, its addresses are the node's. Default: the hostname.
	HostnameOverride string
	// ClusterCIDR is the pod network (comma-separated for dual-stack);
	// traffic from it is not masqueraded. Empty: masquerade off-node
	// clients only by the mark rules.
	ClusterCIDR string
	// MetricsBindAddress serves /metrics (and /healthz, /proxyMode);
	// HealthzBindAddress serves /healthz and /livez. "" or "0" disables.
	MetricsBindAddress string
	HealthzBindAddress string
	// NodePortAddresses limits node ports (and health-check node ports) to
	// these addresses or CIDRs of the node; empty means all.
	NodePortAddresses []string
	// SyncPeriod is the longest time between syncs (a no-op when nothing
	// changed, but it repairs flushed rules and keeps /healthz fresh);
	// MinSyncPeriod is the least time between two, so bursts coalesce.
	SyncPeriod    time.Duration
	MinSyncPeriod time.Duration
	MasqueradeAll bool
	MasqueradeBit int
	// IPTablesBinary is the iptables command (iptables, iptables-legacy,
	// iptables-nft); -save and -restore are derived from it.
	IPTablesBinary string
	// UDPIdleTimeout ends userspace UDP sessions.
	UDPIdleTimeout time.Duration
	// EditTopLevelChains makes partial iptables syncs edit KUBE-SERVICES
	// rule by rule instead of rewriting it (see iptables.Input).
	EditTopLevelChains bool
	// Cleanup removes the rules of every mode and exits.
	Cleanup bool
	// ServiceCIDRs are the service ranges (comma-separated); the nftables
	// mode drops traffic to their addresses that no Service has. Empty:
	// the ranges of the cluster's ServiceCIDR objects, as kube-proxy
	// takes them, where the API server serves them.
	ServiceCIDRs string
	// The ipvs mode's settings, as kube-proxy's --ipvs-* flags.
	IPVSScheduler                                     string
	IPVSExcludeCIDRs                                  []string
	IPVSStrictARP                                     bool
	IPVSTCPTimeout, IPVSTCPFinTimeout, IPVSUDPTimeout time.Duration
	// EBPFCgroup is the cgroup v2 group the ebpf mode attaches its
	// programs to: the connects of its processes (the node's pods) are
	// translated. Never a hierarchy's root.
	EBPFCgroup string
	// EBPFLBAlgorithm is how the ebpf mode picks a backend for a flow
	// from outside the node: random, or maglev (consistent hashing).
	EBPFLBAlgorithm string
	// PublishProgrammed keeps the proxy's Lease of what its rules
	// reflect (see internal/programmed), which node agents wait for
	// before they stop a pod.
	PublishProgrammed bool
	// TestingSyncDelay holds every sync back this long: a proxy behind
	// its informers, for tests. Hidden from --help.
	TestingSyncDelay time.Duration
}

// Defaults are kube-proxy's defaults, except the minimum sync period: a
// one-change sync costs milliseconds here, so it is not held back a
// second as kube-proxy holds it.
func Defaults() Options {
	return Options{
		Mode:               "iptables",
		MetricsBindAddress: "127.0.0.1:10249",
		HealthzBindAddress: "0.0.0.0:10256",
		SyncPeriod:         30 * time.Second,
		MinSyncPeriod:      100 * time.Millisecond,
		MasqueradeBit:      14,
		IPTablesBinary:     "iptables",
		UDPIdleTimeout:     250 * time.Millisecond,
		EditTopLevelChains: true,
		IPVSScheduler:      "rr",
		EBPFLBAlgorithm:    "random",
		PublishProgrammed:  true,
	}
}

// modeInfo is one proxy mode svcnet knows of.
type modeInfo struct {
	name string
	// start is nil for modes that are not built yet.
	start func(*deps) (syncer, error)
	// cleanup removes the mode's rules but those keep owns too (nil:
	// all of them): at --cleanup, and when another mode has synced in
	// the same namespace.
	cleanup func(ctx context.Context, o OS, keep *utiliptables.Owned) error
	// iptables is what the mode writes in iptables, nil if nothing.
	iptables func() *utiliptables.Owned
	// dualStack: the mode proxies IPv6 Services too, with a second
	// proxier of its own (kube-proxy's dual-stack proxier).
	dualStack bool
	// deadAlone: the mode's rules send traffic to its process's sockets,
	// so that they carry nothing once it has exited; another mode removes
	// them before it starts rather than after its first sync.
	deadAlone bool
	// conntrack: the mode's kernel NAT picks endpoints, so conntrack
	// entries of UDP flows can outlive the endpoint they point at, and
	// are deleted after the syncs that remove it.
	conntrack bool
	// kernel, when set, says whether this kernel can run the mode.
	kernel func() error
	why    string // why a mode is not built
}

// modes is the registry of proxy modes: adding one means a folder under
// internal/proxy and a line here.
var modes = []modeInfo{
	{name: "iptables", start: startIPTables, iptables: iptables.Owned, dualStack: true, conntrack: true, cleanup: func(ctx context.Context, o OS, keep *utiliptables.Owned) error {
		var errs []error
		for _, ex := range o.executors() {
			errs = append(errs, utiliptables.Remove(ctx, ex, iptables.Owned(), keep))
		}
		return errors.Join(errs...)
	}},
	{name: "userspace", start: startUserspace, iptables: userspace.Owned, deadAlone: true, cleanup: func(ctx context.Context, o OS, keep *utiliptables.Owned) error {
		return utiliptables.Remove(ctx, o.IPTables, userspace.Owned(), keep)
	}},
	{name: "nftables", start: startNFTables, dualStack: true, conntrack: true, cleanup: func(_ context.Context, o OS, _ *utiliptables.Owned) error {
		if o.NFTablesCleanup == nil {
			return nil
		}
		return o.NFTablesCleanup()
	}},
	{name: "ipvs", start: startIPVS, iptables: ipvsproxy.Owned, conntrack: true, cleanup: cleanupIPVS, kernel: kipvs.Supported},
	// The ebpf mode's programs are attached with links that end with the
	// process: only its fixed masquerade rule outlives the proxy.
	{name: "ebpf", start: startEBPF, dualStack: true, kernel: ebpfSupported, cleanup: func(_ context.Context, o OS, _ *utiliptables.Owned) error {
		if o.EBPFCleanup == nil {
			return nil
		}
		return o.EBPFCleanup()
	}},
}

// ModeNames lists the modes that can run.
func ModeNames() []string {
	var out []string
	for _, m := range modes {
		if m.start != nil {
			out = append(out, m.name)
		}
	}
	return out
}

// workingModes are the built modes this kernel can run.
func workingModes() []string {
	var out []string
	for _, m := range modes {
		if m.start != nil && (m.kernel == nil || m.kernel() == nil) {
			out = append(out, m.name)
		}
	}
	return out
}

// CheckMode reports whether mode can run, and if not, which ones can.
func CheckMode(mode string) error {
	_, err := lookupMode(mode)
	return err
}

func lookupMode(name string) (modeInfo, error) {
	if name == "" {
		name = "iptables"
	}
	var unbuilt []string
	for _, m := range modes {
		if m.start == nil {
			unbuilt = append(unbuilt, m.name)
		}
		if m.name != strings.ToLower(name) {
			continue
		}
		if m.start == nil {
			return modeInfo{}, fmt.Errorf("--proxy-mode %s: %s; available modes: %s", name, m.why, strings.Join(ModeNames(), ", "))
		}
		if m.kernel != nil {
			if err := m.kernel(); err != nil {
				return modeInfo{}, fmt.Errorf("--proxy-mode %s: %v; modes that work on this kernel: %s", name, err, strings.Join(workingModes(), ", "))
			}
		}
		return m, nil
	}
	msg := fmt.Sprintf("--proxy-mode %s: unknown proxy mode; available modes: %s", name, strings.Join(ModeNames(), ", "))
	if len(unbuilt) > 0 {
		msg += " (not built yet: " + strings.Join(unbuilt, ", ") + ")"
	}
	return modeInfo{}, errors.New(msg)
}

// Validate checks everything that can be checked before connecting.
func (o *Options) Validate() error {
	if a := o.EBPFLBAlgorithm; a != "" && a != "random" && a != "maglev" {
		return fmt.Errorf("--ebpf-lb-algorithm %q: random or maglev", a)
	}
	if strings.EqualFold(o.Mode, "ebpf") && o.EBPFCgroup == "" && !o.Cleanup {
		return errors.New("--proxy-mode ebpf: --ebpf-cgroup is required: the cgroup v2 group whose processes (the node's pods) connect through the programs")
	}
	if _, err := lookupMode(o.Mode); err != nil {
		return err
	}
	if _, err := o.clusterCIDR(v1.IPv4Protocol); err != nil {
		return err
	}
	if _, err := o.serviceCIDRs(v1.IPv4Protocol); err != nil {
		return err
	}
	if _, _, err := o.nodePortFilter(); err != nil {
		return err
	}
	if _, err := o.ipvsExcludeCIDRs(); err != nil {
		return err
	}
	if o.IPVSTCPTimeout < 0 || o.IPVSTCPFinTimeout < 0 || o.IPVSUDPTimeout < 0 {
		return fmt.Errorf("--ipvs-tcp-timeout, --ipvs-tcpfin-timeout, --ipvs-udp-timeout: must not be negative")
	}
	if o.MasqueradeBit < 0 || o.MasqueradeBit > 31 {
		return fmt.Errorf("--iptables-masquerade-bit %d: must be within 0..31", o.MasqueradeBit)
	}
	if o.SyncPeriod <= 0 {
		return fmt.Errorf("--sync-period %s: must be positive", o.SyncPeriod)
	}
	for _, a := range []struct{ flag, value string }{{"--metrics-bind-address", o.MetricsBindAddress}, {"--healthz-bind-address", o.HealthzBindAddress}} {
		if _, err := bindAddress(a.value, 0); err != nil {
			return fmt.Errorf("%s: %w", a.flag, err)
		}
	}
	return nil
}

// ipvsExcludeCIDRs parses --ipvs-exclude-cidrs.
func (o *Options) ipvsExcludeCIDRs() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range o.IPVSExcludeCIDRs {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--ipvs-exclude-cidrs %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// clusterCIDR returns the pod network of family, if any.
func (o *Options) clusterCIDR(family v1.IPFamily) (netip.Prefix, error) {
	cidrs, err := cidrsOf("--cluster-cidr", o.ClusterCIDR, family)
	if err != nil || len(cidrs) == 0 {
		return netip.Prefix{}, err
	}
	return cidrs[0], nil
}

// serviceCIDRs returns the service ranges of family.
func (o *Options) serviceCIDRs(family v1.IPFamily) ([]netip.Prefix, error) {
	return cidrsOf("--service-cidr", o.ServiceCIDRs, family)
}

// cidrsOf parses flag's value, CIDRs separated by commas, and returns
// those of family, masked, in order.
func cidrsOf(flag, value string, family v1.IPFamily) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", flag, s, err)
		}
		if p.Addr().Is4() == (family == v1.IPv4Protocol) {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// primaryNodePorts says whether node ports go to the node's primary
// addresses: "primary" in --nodeport-addresses, or nothing there in the
// nftables mode, whose default it is (kube-proxy's too).
func (o *Options) primaryNodePorts() bool {
	if len(o.NodePortAddresses) == 0 {
		return strings.EqualFold(o.Mode, "nftables") || strings.EqualFold(o.Mode, "ebpf")
	}
	return slices.ContainsFunc(o.NodePortAddresses, func(s string) bool { return strings.TrimSpace(s) == "primary" })
}

// nodePortFilter splits --nodeport-addresses into addresses and CIDRs.
func (o *Options) nodePortFilter() ([]netip.Addr, []netip.Prefix, error) {
	var addrs []netip.Addr
	var cidrs []netip.Prefix
	for _, s := range o.NodePortAddresses {
		s = strings.TrimSpace(s)
		switch {
		case s == "" || s == "primary":
			continue
		case strings.Contains(s, "/"):
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, nil, fmt.Errorf("--nodeport-addresses %q: %w", s, err)
			}
			cidrs = append(cidrs, p.Masked())
		default:
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, nil, fmt.Errorf("--nodeport-addresses %q: %w", s, err)
			}
			addrs = append(addrs, a)
		}
	}
	return addrs, cidrs, nil
}

// nodeConfig is the node configuration of one family, the same for every
// mode.
func (o *Options) nodeConfig(node proxy.Node, nodeIPs []netip.Addr, family v1.IPFamily) proxy.NodeConfig {
	cidr, _ := o.clusterCIDR(family)
	return proxy.NodeConfig{
		Family:            family,
		Node:              node,
		NodeIPs:           nodeIPs,
		ClusterCIDR:       cidr,
		MasqueradeBit:     o.MasqueradeBit,
		MasqueradeAll:     o.MasqueradeAll,
		NodePortAddresses: o.nodePortAddresses(nodeIPs, family),
	}
}

// nodePortAddresses resolves --nodeport-addresses against the node's
// addresses: the listed ones, and those inside the listed CIDRs.
func (o *Options) nodePortAddresses(local []netip.Addr, family v1.IPFamily) []netip.Addr {
	addrs, cidrs, _ := o.nodePortFilter()
	var out []netip.Addr
	if o.primaryNodePorts() {
		addrs = append(local[:len(local):len(local)], addrs...)
	}
	for _, a := range addrs {
		if (family == v1.IPv4Protocol) == a.Is4() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, a := range local {
		if slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) }) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// bindAddress accepts "ip:port", a bare "ip" (with defaultPort), and ""
// or "0" for off.
func bindAddress(s string, defaultPort int) (string, error) {
	if s == "" || s == "0" {
		return "", nil
	}
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s, nil
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return net.JoinHostPort(s, fmt.Sprint(defaultPort)), nil
	}
	return "", fmt.Errorf("%q is neither ip:port nor an ip", s)
}
