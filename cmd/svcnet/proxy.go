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
	o.AddFlags(cmd.Flags())
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
--local traces a packet the node itself sends. In the ebpf mode
(--ebpf-cgroup), it reads the maps of the programs attached to that
group: a source in --cluster-cidr (or --local) is a pod's connect,
translated at the socket; any other a packet from outside, translated by
the tc program of the node's link.`,
		Example: `  # In svcnet up's reference cluster (kubectl apply -f examples/hostnames.yaml):
  # a pod of node-1 calls the hostnames Service's ClusterIP …
  ip netns exec svcnet-svcnet-node-1 svcnet proxy trace --src 10.244.1.5 \
      --dst "$(kubectl get svc hostnames -o jsonpath='{.spec.clusterIP}'):80/tcp"
  # … and the outside client calls its NodePort on node-1
  ip netns exec svcnet-svcnet-node-1 svcnet proxy trace --src 172.18.0.2 --dst 172.18.0.11:8477/tcp
  # In a cluster of svcnet up --proxy-mode ebpf (svcnet exec, as ip netns
  # exec hides /sys/fs/cgroup):
  svcnet exec node/node-1 -- svcnet proxy trace --src 10.244.1.5 --dst 10.96.0.10:53/udp \
      --ebpf-cgroup /sys/fs/cgroup/unified/svcnet-svcnet-node-1 --cluster-cidr 10.244.0.0/16`,
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
	f.StringVar(&t.Mode, "proxy-mode", "", "rules to read: iptables, nftables, ipvs or ebpf (default: ebpf with --ebpf-cgroup, else ipvs if kube-ipvs0 is there, else nftables if its table is there)")
	f.StringVar(&t.EBPFCgroup, "ebpf-cgroup", "", "ebpf mode: the cgroup v2 group its programs are attached to (their maps are read through them)")
	f.StringVar(&t.ClusterCIDR, "cluster-cidr", "", "ebpf mode: the pod network, whose sources connect through the socket programs")
	f.StringSliceVar(&t.NodeIPs, "node-ip", nil, "more addresses that count as the node's own (addrtype LOCAL)")
	_ = cmd.MarkFlagRequired("src")
	_ = cmd.MarkFlagRequired("dst")
	return cmd
}
