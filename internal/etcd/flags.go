package etcd

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// Options are `svcnet etcd`'s settings: one member, and how long to wait
// for it to serve.
type Options struct {
	Member
	// ReadyTimeout gives up when the member does not serve within it; 0
	// waits, as etcd does, until a quorum of members has started.
	ReadyTimeout time.Duration
}

// Defaults are etcd's defaults for its flags.
func Defaults() Options {
	return Options{Member: Member{
		Name:                "default",
		ListenClientURLs:    []string{"https://127.0.0.1:2379"},
		AdvertiseClientURLs: []string{"https://127.0.0.1:2379"},
		ListenPeerURLs:      []string{"https://127.0.0.1:2380"},
		AdvertisePeerURLs:   []string{"https://127.0.0.1:2380"},
		InitialClusterState: "new",
		InitialClusterToken: "etcd-cluster",
		LogLevel:            "info",
	}}
}

// AddFlags adds `svcnet etcd`'s flags for o to f: etcd's names.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Name, "name", o.Name, "human-readable name of this member, unique in the cluster")
	f.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory of the member's data (required; made owner-only)")
	f.StringSliceVar(&o.ListenClientURLs, "listen-client-urls", o.ListenClientURLs, "URLs to serve clients on")
	f.StringSliceVar(&o.AdvertiseClientURLs, "advertise-client-urls", o.AdvertiseClientURLs, "client URLs of this member told to the cluster")
	f.StringSliceVar(&o.ListenPeerURLs, "listen-peer-urls", o.ListenPeerURLs, "URLs to serve the other members on")
	f.StringSliceVar(&o.AdvertisePeerURLs, "initial-advertise-peer-urls", o.AdvertisePeerURLs, "peer URLs of this member told to the cluster")
	f.StringSliceVar(&o.ListenMetricsURLs, "listen-metrics-urls", o.ListenMetricsURLs, "extra URLs serving only /metrics and /health (http allowed)")
	f.StringVar(&o.InitialCluster, "initial-cluster", o.InitialCluster, "name=peer-URL of every member at bootstrap (default: this member alone)")
	f.StringVar(&o.InitialClusterState, "initial-cluster-state", o.InitialClusterState, `"new" to bootstrap a cluster, "existing" to join one (after etcdctl member add)`)
	f.StringVar(&o.InitialClusterToken, "initial-cluster-token", o.InitialClusterToken, "token distinguishing this cluster at bootstrap")
	f.StringVar(&o.Client.CertFile, "cert-file", o.Client.CertFile, "serving certificate for clients")
	f.StringVar(&o.Client.KeyFile, "key-file", o.Client.KeyFile, "key of --cert-file")
	f.StringVar(&o.Client.TrustedCAFile, "trusted-ca-file", o.Client.TrustedCAFile, "CA that signs clients' certificates")
	f.BoolVar(&o.Client.ClientCertAuth, "client-cert-auth", o.Client.ClientCertAuth, "require a client certificate signed by --trusted-ca-file (required)")
	f.StringVar(&o.Peer.CertFile, "peer-cert-file", o.Peer.CertFile, "certificate for peer connections (served and presented)")
	f.StringVar(&o.Peer.KeyFile, "peer-key-file", o.Peer.KeyFile, "key of --peer-cert-file")
	f.StringVar(&o.Peer.TrustedCAFile, "peer-trusted-ca-file", o.Peer.TrustedCAFile, "CA that signs peers' certificates")
	f.BoolVar(&o.Peer.ClientCertAuth, "peer-client-cert-auth", o.Peer.ClientCertAuth, "require a peer certificate signed by --peer-trusted-ca-file (required)")
	f.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "leader heartbeat interval (etcd's default 100ms when 0; etcd's flag takes milliseconds, this one a duration)")
	f.DurationVar(&o.ElectionTimeout, "election-timeout", o.ElectionTimeout, "election timeout (etcd's default 1s when 0; a duration)")
	f.Int64Var(&o.QuotaBackendBytes, "quota-backend-bytes", o.QuotaBackendBytes, "backend size limit in bytes (default 8 GiB)")
	f.StringVar(&o.LogFile, "log-file", o.LogFile, "write etcd's log to this file (owner-only) instead of stderr")
	f.StringVar(&o.LogLevel, "log-level", o.LogLevel, "etcd's log level: debug, info, warn, error")
	f.DurationVar(&o.ReadyTimeout, "ready-timeout", o.ReadyTimeout, "give up when the member does not serve within this time (0: wait, as etcd does, until a quorum of members has started)")
}

// Args is the command line of `svcnet etcd` with o: the flags whose
// values differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }
