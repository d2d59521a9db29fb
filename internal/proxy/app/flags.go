package app

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// AddFlags adds `svcnet proxy`'s flags for o to f: kube-proxy's names.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API server")
	f.StringVar(&o.Mode, "proxy-mode", o.Mode, "proxy mode: "+strings.Join(ModeNames(), " or "))
	f.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "name of this node's Node object (default: the hostname)")
	f.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "pod network; traffic from outside it to cluster IPs is masqueraded")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics (0 to disable)")
	f.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "address of /healthz and /livez (0 to disable)")
	f.StringSliceVar(&o.NodePortAddresses, "nodeport-addresses", o.NodePortAddresses,
		"addresses or CIDRs that accept node ports, or \"primary\" for the node's addresses (default: all local addresses in the iptables mode, primary in the nftables and ebpf modes)")
	f.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod, "longest time between two syncs (repairs rules, refreshes /healthz)")
	f.DurationVar(&o.MinSyncPeriod, "min-sync-period", o.MinSyncPeriod, "least time between two syncs; changes within it are applied together")
	f.BoolVar(&o.MasqueradeAll, "masquerade-all", o.MasqueradeAll, "masquerade all traffic to cluster IPs")
	f.IntVar(&o.MasqueradeBit, "iptables-masquerade-bit", o.MasqueradeBit, "bit of the packet mark that asks for masquerading")
	// kube-proxy's per-mode spellings of the same settings.
	for _, mode := range []string{"iptables", "nftables", "ipvs"} {
		f.DurationVar(&o.SyncPeriod, mode+"-sync-period", o.SyncPeriod, "same as --sync-period")
		f.DurationVar(&o.MinSyncPeriod, mode+"-min-sync-period", o.MinSyncPeriod, "same as --min-sync-period")
	}
	f.IntVar(&o.MasqueradeBit, "nftables-masquerade-bit", o.MasqueradeBit, "same as --iptables-masquerade-bit")
	f.StringVar(&o.IPVSScheduler, "ipvs-scheduler", o.IPVSScheduler, "ipvs mode: the virtual servers' scheduler (rr, wrr, lc, wlc, sh, dh, mh … as the kernel has them)")
	f.StringSliceVar(&o.IPVSExcludeCIDRs, "ipvs-exclude-cidrs", o.IPVSExcludeCIDRs, "ipvs mode: CIDRs whose virtual servers, when not ours, are left alone")
	f.BoolVar(&o.IPVSStrictARP, "ipvs-strict-arp", o.IPVSStrictARP, "ipvs mode: arp_ignore=1 and arp_announce=2 so the node does not answer ARP for kube-ipvs0's addresses")
	f.DurationVar(&o.IPVSTCPTimeout, "ipvs-tcp-timeout", o.IPVSTCPTimeout, "ipvs mode: idle timeout of TCP sessions (0: the kernel's)")
	f.DurationVar(&o.IPVSTCPFinTimeout, "ipvs-tcpfin-timeout", o.IPVSTCPFinTimeout, "ipvs mode: timeout of TCP sessions after FIN (0: the kernel's)")
	f.DurationVar(&o.IPVSUDPTimeout, "ipvs-udp-timeout", o.IPVSUDPTimeout, "ipvs mode: timeout of UDP sessions (0: the kernel's)")
	f.StringVar(&o.ServiceCIDRs, "service-cidr", o.ServiceCIDRs,
		"service ranges (comma-separated): the nftables mode drops traffic to their unallocated addresses (default: the ServiceCIDR objects' ranges)")
	f.StringVar(&o.EBPFCgroup, "ebpf-cgroup", o.EBPFCgroup,
		"ebpf mode: the cgroup v2 group (named svcnet…, not a hierarchy's root) whose processes' connects to Services are translated")
	f.StringVar(&o.EBPFLBAlgorithm, "ebpf-lb-algorithm", o.EBPFLBAlgorithm,
		"ebpf mode: how a flow from outside the node picks its backend: random, or maglev (consistent hashing: the same on every node, and a backend leaving moves little more than its own flows)")
	f.StringVar(&o.IPTablesBinary, "iptables-binary", o.IPTablesBinary, "iptables command: iptables, iptables-nft or iptables-legacy")
	f.DurationVar(&o.UDPIdleTimeout, "udp-timeout", o.UDPIdleTimeout, "userspace mode: how long an idle UDP session lives")
	f.BoolVar(&o.EditTopLevelChains, "iptables-edit-top-level", o.EditTopLevelChains,
		"partial syncs edit KUBE-SERVICES rule by rule instead of rewriting it")
	f.BoolVar(&o.Cleanup, "cleanup", o.Cleanup, "remove the rules of every mode from this namespace and exit")
	f.BoolVar(&o.PublishProgrammed, "publish-programmed", o.PublishProgrammed,
		"keep a Lease (kube-system/svcnet-proxy-<node>) saying which EndpointSlice changes the rules reflect; node agents wait for it before stopping a pod")
	f.DurationVar(&o.TestingSyncDelay, "testing-sync-delay", o.TestingSyncDelay, "hold every sync back this long (tests only)")
	_ = f.MarkHidden("testing-sync-delay")
}

// Args is the command line of `svcnet proxy` with o: the flags whose
// values differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }
