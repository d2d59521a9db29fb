package node

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// Options are `svcnet node`'s flags, as given; Config turns them into the
// agent's Config.
type Options struct {
	Kubeconfig         string
	HostnameOverride   string
	NodeIP             string
	PodCIDR            string
	PodBridge          string
	ClusterCIDR        string
	NetnsPrefix        string
	RootDir            string
	ClusterDNS         string
	ClusterDomain      string
	NodeLabels         []string
	IPTablesBinary     string
	ProxyCommand       string
	NodeCacheCommand   string
	Address            string
	TLSCertFile        string
	TLSPrivateKeyFile  string
	ClientCAFile       string
	EndpointDrainDelay time.Duration
	ImageStoreDir      string
	PodUsersDir        string
	RegistryMirrors    []string
	InsecureRegistries []string
	CgroupRoot         string
}

// Defaults are the flags' defaults.
func Defaults() Options {
	return Options{PodBridge: "cbr0", ClusterDNS: "10.96.0.10", ClusterDomain: "cluster.local",
		IPTablesBinary: "iptables"}
}

// Required are the flags without which the agent cannot run.
var Required = []string{"kubeconfig", "hostname-override", "node-ip", "pod-cidr", "netns-prefix", "root-dir"}

// AddFlags adds `svcnet node`'s flags for o to f: kubelet's names where
// it has them.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig with this node's credentials")
	f.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "the Node's name")
	f.StringVar(&o.NodeIP, "node-ip", o.NodeIP, "the node's address on the underlay")
	f.StringVar(&o.PodCIDR, "pod-cidr", o.PodCIDR, "the node's pod CIDR")
	f.StringVar(&o.PodBridge, "pod-bridge", o.PodBridge, "the node's pod bridge")
	f.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "every node's pods; traffic from this node's pods to elsewhere is masqueraded (empty: none)")
	f.StringVar(&o.NetnsPrefix, "netns-prefix", o.NetnsPrefix, "name prefix of pod network namespaces (svcnet-<cluster>-<node>-)")
	f.StringVar(&o.RootDir, "root-dir", o.RootDir, "directory of the agent's state, pod files and logs")
	f.StringVar(&o.ClusterDNS, "cluster-dns", o.ClusterDNS, "address of the cluster DNS in pods' resolv.conf")
	f.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "the cluster's DNS domain")
	f.StringSliceVar(&o.NodeLabels, "node-labels", o.NodeLabels, "labels of the Node, key=value")
	f.StringVar(&o.IPTablesBinary, "iptables-binary", o.IPTablesBinary, "iptables command of the node's own rules (pod egress); give the proxy the same")
	f.StringVar(&o.ProxyCommand, "proxy-command", o.ProxyCommand, "command line of the node's service proxy, started in the node's namespace")
	f.StringVar(&o.NodeCacheCommand, "node-cache-command", o.NodeCacheCommand, "command line of the node-local DNS cache (svcnet node-cache), started in the node's namespace; give its address as --cluster-dns")
	f.StringVar(&o.Address, "address", o.Address, "address of the logs and exec server for the API server (e.g. 172.18.0.11:10250)")
	f.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "serving certificate of the logs and exec server")
	f.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "key of the serving certificate")
	f.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "CA that signs the API server's client certificate")
	f.DurationVar(&o.EndpointDrainDelay, "endpoint-drain-delay", o.EndpointDrainDelay,
		"a margin more before the SIGTERM of a deleted pod that backs a Service and has no preStop hook, once its EndpointSlices stop offering it and every svcnet proxy has programmed that: for proxies that do not say so, such as kube-proxy (the hold is at most half the grace period in all)")
	f.StringVar(&o.ImageStoreDir, "image-store-dir", o.ImageStoreDir, "directory of the image store the agent pulls images into, shared by every node agent of the machine (empty: no store; only built-in images run)")
	f.StringVar(&o.PodUsersDir, "pod-users-dir", o.PodUsersDir, "directory of the claims on pods' default users, shared by every node agent of the machine so that no two pods share one (empty: <root-dir>/users, distinct on this node only)")
	f.StringArrayVar(&o.RegistryMirrors, "registry-mirror", o.RegistryMirrors, "a mirror of a registry, host=endpoint (e.g. docker.io=http://10.0.0.5:5000), tried before the registry; repeatable, in order")
	f.StringVar(&o.CgroupRoot, "cgroup-root", o.CgroupRoot, "cgroup v2 group of this node's pods (svcnet-…, below the hierarchy's root): every container gets a group of its own below it, which the ebpf proxy mode's programs reach (empty: only containers with limits get groups)")
	f.StringArrayVar(&o.InsecureRegistries, "insecure-registry", o.InsecureRegistries, "a registry or mirror host[:port] spoken to in plain HTTP; repeatable")
}

// Args is the command line of `svcnet node` with o: the flags whose values
// differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }

// Config is the agent's configuration from the flags.
func (o Options) Config() (Config, error) {
	cfg := Config{
		Kubeconfig: o.Kubeconfig, NodeName: o.HostnameOverride, Bridge: o.PodBridge, NetnsPrefix: o.NetnsPrefix,
		StateDir: o.RootDir, ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain, IPTablesBinary: o.IPTablesBinary,
		ServerAddress: o.Address, TLSCertFile: o.TLSCertFile, TLSKeyFile: o.TLSPrivateKeyFile, ClientCAFile: o.ClientCAFile,
		EndpointDrainDelay: o.EndpointDrainDelay, Labels: map[string]string{},
		ImageStoreDir: o.ImageStoreDir, InsecureRegistries: o.InsecureRegistries, PodUsersDir: o.PodUsersDir,
		CgroupRoot: o.CgroupRoot,
	}
	var err error
	if cfg.NodeIP, err = netip.ParseAddr(o.NodeIP); err != nil {
		return Config{}, fmt.Errorf("--node-ip %q: %w", o.NodeIP, err)
	}
	if cfg.PodCIDR, err = netip.ParsePrefix(o.PodCIDR); err != nil {
		return Config{}, fmt.Errorf("--pod-cidr %q: %w", o.PodCIDR, err)
	}
	if o.ClusterCIDR != "" {
		if cfg.ClusterCIDR, err = netip.ParsePrefix(o.ClusterCIDR); err != nil {
			return Config{}, fmt.Errorf("--cluster-cidr %q: %w", o.ClusterCIDR, err)
		}
	}
	if cfg.RegistryMirrors, err = ParseMirrors(o.RegistryMirrors); err != nil {
		return Config{}, err
	}
	for _, l := range o.NodeLabels {
		k, v, _ := strings.Cut(l, "=")
		cfg.Labels[k] = v
	}
	if o.ProxyCommand != "" {
		cfg.Proxy = strings.Fields(o.ProxyCommand)
	}
	if o.NodeCacheCommand != "" {
		cfg.NodeCache = strings.Fields(o.NodeCacheCommand)
	}
	return cfg, nil
}

// ParseMirrors parses --registry-mirror values, host=endpoint, into the
// mirrors of each registry host in the order given.
func ParseMirrors(flags []string) (map[string][]string, error) {
	var m map[string][]string
	for _, f := range flags {
		host, endpoint, ok := strings.Cut(f, "=")
		if !ok || host == "" || endpoint == "" || strings.ContainsAny(host, "/ ") {
			return nil, fmt.Errorf("--registry-mirror %q: want host=endpoint, e.g. docker.io=http://10.0.0.5:5000", f)
		}
		if m == nil {
			m = map[string][]string{}
		}
		m[host] = append(m[host], endpoint)
	}
	return m, nil
}
