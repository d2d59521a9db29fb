package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/node"
)

func newNodeCommand() *cobra.Command {
	var (
		cfg              node.Config
		nodeIP, podCIDR  string
		clusterCIDR      string
		labels           []string
		proxyCommandLine string
		cacheCommandLine string
	)
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run the node agent: register the Node and run its pods in network namespaces",
		Long: `The node agent (kubelet's job) runs inside its node's network namespace. It registers
its Node and Lease, runs the pods bound to it as processes in their own network
namespaces behind the node's pod bridge, and starts the node's service proxy.
svcnet up starts one per node; it needs root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.NodeIP, err = netip.ParseAddr(nodeIP); err != nil {
				return fmt.Errorf("--node-ip %q: %w", nodeIP, err)
			}
			if cfg.PodCIDR, err = netip.ParsePrefix(podCIDR); err != nil {
				return fmt.Errorf("--pod-cidr %q: %w", podCIDR, err)
			}
			if clusterCIDR != "" {
				if cfg.ClusterCIDR, err = netip.ParsePrefix(clusterCIDR); err != nil {
					return fmt.Errorf("--cluster-cidr %q: %w", clusterCIDR, err)
				}
			}
			cfg.Labels = map[string]string{}
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				cfg.Labels[k] = v
			}
			if proxyCommandLine != "" {
				cfg.Proxy = strings.Fields(proxyCommandLine)
			}
			if cacheCommandLine != "" {
				cfg.NodeCache = strings.Fields(cacheCommandLine)
			}
			a, err := node.New(cfg)
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig with this node's credentials")
	f.StringVar(&cfg.NodeName, "hostname-override", "", "the Node's name")
	f.StringVar(&nodeIP, "node-ip", "", "the node's address on the underlay")
	f.StringVar(&podCIDR, "pod-cidr", "", "the node's pod CIDR")
	f.StringVar(&cfg.Bridge, "pod-bridge", "cbr0", "the node's pod bridge")
	f.StringVar(&clusterCIDR, "cluster-cidr", "", "every node's pods; traffic from this node's pods to elsewhere is masqueraded (empty: none)")
	f.StringVar(&cfg.NetnsPrefix, "netns-prefix", "", "name prefix of pod network namespaces (svcnet-<cluster>-<node>-)")
	f.StringVar(&cfg.StateDir, "root-dir", "", "directory of the agent's state, pod files and logs")
	f.StringVar(&cfg.ClusterDNS, "cluster-dns", "10.96.0.10", "address of the cluster DNS in pods' resolv.conf")
	f.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
	f.StringSliceVar(&labels, "node-labels", nil, "labels of the Node, key=value")
	f.StringVar(&cfg.IPTablesBinary, "iptables-binary", "iptables", "iptables command of the node's own rules (pod egress); give the proxy the same")
	f.StringVar(&proxyCommandLine, "proxy-command", "", "command line of the node's service proxy, started in the node's namespace")
	f.StringVar(&cacheCommandLine, "node-cache-command", "", "command line of the node-local DNS cache (svcnet node-cache), started in the node's namespace; give its address as --cluster-dns")
	f.StringVar(&cfg.ServerAddress, "address", "", "address of the logs and exec server for the API server (e.g. 172.18.0.11:10250)")
	f.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "serving certificate of the logs and exec server")
	f.StringVar(&cfg.TLSKeyFile, "tls-private-key-file", "", "key of the serving certificate")
	f.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "CA that signs the API server's client certificate")
	f.DurationVar(&cfg.EndpointDrainDelay, "endpoint-drain-delay", node.DefaultEndpointDrainDelay,
		"how long a deleted pod that backs a Service and has no preStop hook keeps running, after its Services' EndpointSlices stop offering it, before SIGTERM, so every proxy stops sending it connections first (at most half the grace period in all; 0: SIGTERM at once, as kubelet)")
	for _, req := range []string{"kubeconfig", "hostname-override", "node-ip", "pod-cidr", "netns-prefix", "root-dir"} {
		_ = cmd.MarkFlagRequired(req)
	}
	return cmd
}
