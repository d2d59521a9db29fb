package main

import (
	"strings"

	"github.com/spf13/cobra"

	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/proxy/app"
)

func newProxyCommand() *cobra.Command {
	o := app.Defaults()
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Program this node's service rules, as kube-proxy does",
		Long: `Watch Services and EndpointSlices and program the network namespace this
process runs in so that cluster IPs, node ports, external and load-balancer
IPs reach ready endpoints, as kube-proxy does. Modes: ` + strings.Join(app.ModeNames(), ", ") + `.
It also serves /healthz (--healthz-bind-address), /metrics
(--metrics-bind-address), and a health-check node port per Service with
externalTrafficPolicy Local. Flags have kube-proxy's names.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return app.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API server")
	f.StringVar(&o.Mode, "proxy-mode", o.Mode, "proxy mode: "+strings.Join(app.ModeNames(), " or "))
	f.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "name of this node's Node object (default: the hostname)")
	f.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "pod network; traffic from outside it to cluster IPs is masqueraded")
	f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of /metrics (0 to disable)")
	f.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "address of /healthz and /livez (0 to disable)")
	f.StringSliceVar(&o.NodePortAddresses, "nodeport-addresses", o.NodePortAddresses,
		"addresses or CIDRs that accept node ports, or \"primary\" for the node's addresses (default: all local addresses in the iptables mode, primary in the nftables mode)")
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
		"service ranges (comma-separated): the nftables mode drops traffic to their unallocated addresses")
	f.StringVar(&o.IPTablesBinary, "iptables-binary", o.IPTablesBinary, "iptables command: iptables, iptables-nft or iptables-legacy")
	f.DurationVar(&o.UDPIdleTimeout, "udp-timeout", o.UDPIdleTimeout, "userspace mode: how long an idle UDP session lives")
	f.BoolVar(&o.EditTopLevelChains, "iptables-edit-top-level", o.EditTopLevelChains,
		"partial syncs edit KUBE-SERVICES rule by rule instead of rewriting it")
	f.BoolVar(&o.Cleanup, "cleanup", o.Cleanup, "remove the rules of every mode from this namespace and exit")
	cmd.AddCommand(newProxyTraceCommand())
	return cmd
}

func newProxyTraceCommand() *cobra.Command {
	var t app.TraceOptions
	cmd := &cobra.Command{
		Use:   "trace --src IP --dst IP:PORT/PROTO",
		Short: "Show the path a packet takes through this node's service rules",
		Long: `Read the service rules of the network namespace this process runs in (the
nftables mode's table ip kube-proxy if it is there, else the iptables
filter and nat tables; or an iptables-save dump, --file) and walk a new
connection's first packet through them as the kernel would: each chain
and rule it matches (for nftables, the verdict-map element), the endpoints
it may reach with their probabilities, and whether it is masqueraded.
--local traces a packet the node itself sends.`,
		Example: `  # In svcnet up's reference cluster (kubectl apply -f examples/hostnames.yaml):
  # a pod of node-1 calls the hostnames Service's ClusterIP …
  ip netns exec svcnet-svcnet-node-1 svcnet proxy trace --src 10.244.1.5 \
      --dst "$(kubectl get svc hostnames -o jsonpath='{.spec.clusterIP}'):80/tcp"
  # … and the outside client calls its NodePort on node-1
  ip netns exec svcnet-svcnet-node-1 svcnet proxy trace --src 172.18.0.2 --dst 172.18.0.11:8477/tcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return app.Trace(cmd.Context(), t, &utiliptables.Exec{Binary: t.IPTablesBinary}, app.Netlink{}, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&t.Src, "src", "", "source IP of the packet")
	f.StringVar(&t.Dst, "dst", "", "destination, IP:PORT/PROTO (PROTO tcp, udp or sctp; default tcp)")
	f.BoolVar(&t.Local, "local", false, "the packet is sent by the node itself, not by a pod or another host")
	f.StringVar(&t.File, "file", "", "trace through an iptables-save dump (- for stdin) instead of this namespace's tables")
	f.StringVar(&t.IPTablesBinary, "iptables-binary", "iptables", "iptables command whose -save to read")
	f.StringVar(&t.Mode, "proxy-mode", "", "rules to read: iptables, nftables or ipvs (default: ipvs if kube-ipvs0 is there, else nftables if its table is there)")
	f.StringSliceVar(&t.NodeIPs, "node-ip", nil, "more addresses that count as the node's own (addrtype LOCAL)")
	_ = cmd.MarkFlagRequired("src")
	_ = cmd.MarkFlagRequired("dst")
	return cmd
}
