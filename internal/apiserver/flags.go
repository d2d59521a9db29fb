package apiserver

import (
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// AddFlags adds `svcnet apiserver`'s flags for o to f: kube-apiserver's
// names.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory of the embedded etcd, certificates and kubeconfigs")
	f.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "address to serve on (0.0.0.0 for all)")
	f.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "HTTPS port (0 picks a free one)")
	f.StringVar(&o.AdvertiseAddress, "advertise-address", o.AdvertiseAddress, "address published in the default/kubernetes endpoints")
	f.StringVar(&o.EndpointReconcilerType, "endpoint-reconciler-type", o.EndpointReconcilerType, "lease: default/kubernetes lists every API server with a live lease in etcd (renewed every 10s, 15s to live, removed at shutdown); none: this server writes no endpoints")
	f.StringVar(&o.WriteKubeconfig, "write-kubeconfig", o.WriteKubeconfig, "also write the admin kubeconfig to this file")
	f.StringSliceVar(&o.EtcdServers, "etcd-servers", o.EtcdServers, "external etcd client URLs (default: embedded etcd in --data-dir)")
	f.StringVar(&o.EtcdCAFile, "etcd-cafile", o.EtcdCAFile, "CA bundle that verifies the external etcd's serving certificates")
	f.StringVar(&o.EtcdCertFile, "etcd-certfile", o.EtcdCertFile, "client certificate for the external etcd")
	f.StringVar(&o.EtcdKeyFile, "etcd-keyfile", o.EtcdKeyFile, "key of --etcd-certfile")
	f.StringVar(&o.EncryptionProviderConfig, "encryption-provider-config", o.EncryptionProviderConfig, "EncryptionConfiguration file: how resources (Secrets …) are encrypted in etcd (aescbc, aesgcm, secretbox, identity)")
	f.IntVar(&o.MaxRequestsInFlight, "max-requests-inflight", o.MaxRequestsInFlight, "most non-mutating requests served at once; more get 429 (0: no limit)")
	f.IntVar(&o.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", o.MaxMutatingRequestsInFlight, "most mutating requests served at once; more get 429 (0: no limit)")
	o.Audit.AddFlags(f)
	f.StringVar(&o.ServiceCIDR, "service-cluster-ip-range", o.ServiceCIDR, "CIDR of service cluster IPs")
	f.StringVar(&o.NodePortRange, "service-node-port-range", o.NodePortRange, "port range of NodePort services, MIN-MAX")
	f.DurationVar(&o.AllocationRepairInterval, "allocation-repair-interval", o.AllocationRepairInterval, "how often the recorded cluster IPs (IPAddresses) and node ports are checked against the Services: missing ones recorded, ones no Service holds at three checks in a row freed")
	f.DurationVar(&o.EventTTL, "event-ttl", o.EventTTL, "how long an Event is kept after its last write")
	f.StringVar(&o.TokenAuthFile, "token-auth-file", o.TokenAuthFile, "bearer tokens, CSV: token,user,uid,\"group1,group2\" (default: generated in --data-dir)")
	f.DurationVar(&o.EtcdCompactionInterval, "etcd-compaction-interval", o.EtcdCompactionInterval, "how often to compact old etcd revisions (older resourceVersions then get 410 Gone)")
	f.StringSliceVar(&o.AlsoListenAt, "also-listen", o.AlsoListenAt, "also serve inside a named network namespace: NETNS/HOST:PORT (svcnet up uses it)")
	f.IntVar(&o.Nodes.Port, "kubelet-port", o.Nodes.Port, "port of the node agents' logs and exec server")
	f.BoolVar(&o.Nodes.Enabled, "kubelet-connection", o.Nodes.Enabled, "serve pods/log and pods/exec through node agents (mutual TLS from the cluster CA)")
	f.StringVar(&o.Nodes.Netns, "kubelet-netns", o.Nodes.Netns, "named network namespace in which node addresses are reachable")
	f.IntVar(&o.ListenFD, "listen-fd", o.ListenFD, "serve the secure port on this inherited, already listening socket (svcnet up keeps the port across restarts)")
	f.StringSliceVar(&o.TLSSANs, "tls-san", o.TLSSANs, "extra DNS names or IPs of the serving certificate")
}

// Args is the command line of `svcnet apiserver` with o: the flags whose
// values differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }
