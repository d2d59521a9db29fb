package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/apilb"
	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/dns/nodecache"
	"github.com/svcnet/svcnet/internal/edge"
)

func newUpCommand() *cobra.Command {
	o := cluster.Options{Name: "svcnet", Nodes: 3, ProxyMode: "iptables", NodePortRange: "30000-32767",
		ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16"}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create a local cluster: nodes and pods in network namespaces (needs root)",
		Long: `Create a Kubernetes cluster on this machine: an API server with embedded etcd, the
controllers, N nodes whose pods are processes in network namespaces, each node's
service proxy, the cluster DNS, an outside client and an edge load balancer. It
returns once the cluster is ready and leaves it running in the background, with
its state and logs in ~/.svcnet/NAME (like kind create cluster). The host's own
network is not touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.Up(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", o.Name, "cluster name")
	f.IntVar(&o.Nodes, "nodes", o.Nodes, "number of nodes")
	f.IntVar(&o.ControlPlanes, "control-planes", 1, "control-plane hosts: 1 is one API server with embedded etcd; 3 (5, 7) are as many etcd members, API servers and controller managers (leader election), each host a namespace of its own, the API balanced by the edge over their /readyz")
	f.StringVar(&o.ProxyMode, "proxy-mode", o.ProxyMode, "service proxy mode of the nodes (none: no proxy, install one yourself, e.g. svcnet manifests proxy)")
	f.StringVar(&o.NodePortRange, "service-node-port-range", o.NodePortRange, "NodePort range (the reference scenario's 8477 needs e.g. 8000-32767)")
	f.StringVar(&o.ServiceCIDR, "service-cluster-ip-range", o.ServiceCIDR, "service CIDR")
	f.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "pod CIDR (one /24 per node)")
	f.IntVar(&o.APIPort, "api-port", 0, "API server port on the host's loopback (default 6443 if free)")
	f.StringSliceVar(&o.APIServerArgs, "apiserver-arg", nil, "extra flag for the API server, e.g. --apiserver-arg=--etcd-compaction-interval=1m")
	f.StringSliceVar(&o.ControllerManagerArgs, "controller-manager-arg", nil, "extra flag for the controller manager, e.g. --controller-manager-arg=--node-monitor-grace-period=20s")
	f.StringVar(&o.DNSUpstream, "dns-upstream", "", "upstream servers for names outside the cluster (none by default: the cluster has no route out)")
	f.BoolVar(&o.NodeLocalDNS, "node-local-dns", true, "run a node-local DNS cache (svcnet node-cache) on "+nodecache.DefaultAddress+" in every node and point pods' resolv.conf at it (false: pods ask the cluster DNS's ClusterIP, as without NodeLocal DNSCache)")
	f.DurationVar(&o.Wait, "wait", 90*time.Second, "how long each step of the start may take (API server, nodes, each add-on); more on slow machines")
	f.BoolVar(&o.NoIngress, "no-ingress", false, "leave out the ingress controller add-on (ingress-svcnet/ingress-controller, the default IngressClass svcnet, the Gateway API's CRDs and the GatewayClass svcnet)")
	f.StringArrayVar(&o.RegistryMirrors, "registry-mirror", nil, "a mirror of a registry for every node to pull from, host=endpoint (e.g. docker.io=http://10.0.0.5:5000), tried before the registry; repeatable, in order")
	f.StringArrayVar(&o.InsecureRegistries, "insecure-registry", nil, "a registry or mirror host[:port] every node speaks plain HTTP to; repeatable")
	f.StringVar(&o.IPTablesBinary, "iptables-binary", "iptables", "iptables of every node and the edge: iptables, iptables-nft or iptables-legacy (one backend for the whole cluster)")
	return cmd
}

func newDownCommand() *cobra.Command {
	return clusterCommand("down", "Delete a local cluster and everything it made (also after a crash)",
		func(cmd *cobra.Command, name string) error { return cluster.Down(name, cmd.OutOrStdout()) })
}

// clusterCommand is the command use, which run carries out on the local
// cluster named by --name (svcnet by default).
func clusterCommand(use, short string, run func(cmd *cobra.Command, name string) error) *cobra.Command {
	name := "svcnet"
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return run(cmd, name) },
	}
	cmd.Flags().StringVar(&name, "name", name, "cluster name")
	return cmd
}

func newKubeconfigCommand() *cobra.Command {
	name := "svcnet"
	var user string
	var groups []string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the path of a local cluster's admin kubeconfig, or make one for a user",
		Long: `Print the path of a local cluster's admin kubeconfig (system:masters).

With --user, write a kubeconfig with a client certificate for that user (and
--group groups) and print its path: the user may then do what RBAC bindings
grant, nothing else, e.g.

  kubectl create rolebinding alice-view --clusterrole=view --user=alice -n default
  kubectl --kubeconfig "$(svcnet kubeconfig --user alice)" get pods`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st := cluster.StateOf(name)
			if !st.Exists() {
				// `sudo svcnet up` left the invoking user a copy.
				if home, err := os.UserHomeDir(); err == nil && user == "" && len(groups) == 0 {
					if p := cluster.UserKubeconfigCopy(home, name); fileExists(p) {
						fmt.Fprintln(cmd.OutOrStdout(), p)
						return nil
					}
				}
				return fmt.Errorf("no cluster %q (svcnet up --name %s creates it)", name, name)
			}
			if user == "" {
				if len(groups) > 0 {
					return fmt.Errorf("--group goes with --user")
				}
				fmt.Fprintln(cmd.OutOrStdout(), st.Kubeconfig())
				return nil
			}
			path, err := st.UserKubeconfig(user, groups)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), path)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "cluster name")
	cmd.Flags().StringVar(&user, "user", "", "make a kubeconfig for this user (a client certificate signed by the cluster CA)")
	cmd.Flags().StringSliceVar(&groups, "group", nil, "groups of --user (repeatable)")
	return cmd
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func newEdgeCommand() *cobra.Command {
	var kubeconfig, iface, iptablesBinary, apiAddress, apiCA string
	var apiBackends []string
	cmd := &cobra.Command{
		Use:    "edge",
		Short:  "Run the edge load balancer of a local cluster (in its namespace)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := edge.New(kubeconfig, iface, iptablesBinary)
			if err != nil {
				return err
			}
			if apiAddress != "" {
				// The API's balancer first: the edge's own watch goes
				// through it.
				if err := serveAPIBalancer(cmd.Context(), apiAddress, apiBackends, apiCA); err != nil {
					return err
				}
			}
			return a.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&apiAddress, "api-address", "", "also balance the API here (HOST:PORT) over --api-backends")
	cmd.Flags().StringSliceVar(&apiBackends, "api-backends", nil, "API servers (HOST:PORT), checked over HTTPS /readyz")
	cmd.Flags().StringVar(&apiCA, "api-ca", "", "CA of the API servers' certificates")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig")
	cmd.Flags().StringVar(&iface, "interface", "eth0", "underlay interface that owns the load-balancer addresses")
	cmd.Flags().StringVar(&iptablesBinary, "iptables-binary", "iptables", "iptables command (iptables, iptables-nft, iptables-legacy)")
	return cmd
}

func newSuperviseCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:  "supervise",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.Supervise(cmd.Context(), name)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "cluster name")
	return cmd
}

func newStatusCommand() *cobra.Command {
	return clusterCommand("status", "Show a local cluster's nodes, pods and services at a glance",
		func(cmd *cobra.Command, name string) error {
			return cluster.Status(cmd.Context(), name, cmd.OutOrStdout())
		})
}

func newExecCommand() *cobra.Command {
	o := cluster.ExecOptions{Name: "svcnet"}
	cmd := &cobra.Command{
		Use:   "exec [--name NAME] TARGET -- COMMAND [ARGS...]",
		Short: "Run a command in a local cluster: on the outside client, the edge, a node, or in a pod",
		Long: `Run a command inside a local cluster. TARGET is
  client           the host that stands for the world outside the cluster
  edge             the edge load balancer host
  node/NODE        a node (its network namespace)
  NAMESPACE/POD    a pod's container, with its environment (like kubectl exec)`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Target, o.Argv = args[0], args[1:]
			o.In, o.Out, o.Err = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			err := cluster.Exec(cmd.Context(), o)
			var ee cluster.ExitError
			if errors.As(err, &ee) {
				os.Exit(ee.Code)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", o.Name, "cluster name")
	f.BoolVarP(&o.Stdin, "stdin", "i", false, "pass stdin to the command")
	f.BoolVarP(&o.TTY, "tty", "t", false, "allocate a terminal (pods)")
	return cmd
}

// serveAPIBalancer listens on addr and balances it over the API servers
// in the background.
func serveAPIBalancer(ctx context.Context, addr string, backends []string, caFile string) error {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("--api-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("--api-ca %s: no certificate", caFile)
	}
	lb, err := apilb.New(backends, &tls.Config{RootCAs: pool}, time.Second)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--api-address: %w", err)
	}
	go func() {
		if err := lb.Run(ctx, l); err != nil {
			// Without its balancer the cluster has no API: exit, and the
			// supervisor starts the edge again.
			slog.Error("API balancer", "err", err)
			os.Exit(1)
		}
	}()
	slog.Info("API balancer", "address", addr, "backends", backends)
	return nil
}
