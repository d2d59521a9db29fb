package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/etcd"
)

func newEtcdCommand() *cobra.Command {
	var m etcd.Member
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run one member of an etcd cluster (the etcd server, with etcd's flags)",
		Long: `Run one member of an etcd cluster, the same server as etcd itself (its
library), with etcd's flag names: start three on three machines with one
--initial-cluster and point every API server at them with --etcd-servers
(and --etcd-cafile/--etcd-certfile/--etcd-keyfile).

Unlike etcd, svcnet etcd serves only mutual TLS, to clients and to peers:
https URLs, certificates and --client-cert-auth/--peer-client-cert-auth are
required (whoever reaches etcd reads every Secret). --listen-metrics-urls may
be plain http, for /metrics and /health probes.

A member that already has data in --data-dir rejoins its cluster and ignores
the --initial-* flags, as etcd does.`,
		Example: `  svcnet etcd --name m1 --data-dir /var/lib/svcnet-etcd \
    --listen-client-urls https://10.0.0.1:2379 --advertise-client-urls https://10.0.0.1:2379 \
    --listen-peer-urls https://10.0.0.1:2380 --initial-advertise-peer-urls https://10.0.0.1:2380 \
    --initial-cluster m1=https://10.0.0.1:2380,m2=https://10.0.0.2:2380,m3=https://10.0.0.3:2380 \
    --cert-file server.crt --key-file server.key --trusted-ca-file ca.crt --client-cert-auth \
    --peer-cert-file peer.crt --peer-key-file peer.key --peer-trusted-ca-file ca.crt --peer-client-cert-auth`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			member, err := etcd.StartMember(cmd.Context(), m, wait)
			if err != nil {
				return err
			}
			defer member.Close()
			slog.Info("etcd member serving", "name", m.Name, "clients", member.Endpoints)
			select {
			case <-cmd.Context().Done():
				slog.Info("etcd member stopping", "name", m.Name)
				return nil
			case err := <-member.Err():
				return fmt.Errorf("etcd member %s: %w", m.Name, err)
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&m.Name, "name", "default", "human-readable name of this member, unique in the cluster")
	f.StringVar(&m.DataDir, "data-dir", "", "directory of the member's data (required; made owner-only)")
	f.StringSliceVar(&m.ListenClientURLs, "listen-client-urls", []string{"https://127.0.0.1:2379"}, "URLs to serve clients on")
	f.StringSliceVar(&m.AdvertiseClientURLs, "advertise-client-urls", []string{"https://127.0.0.1:2379"}, "client URLs of this member told to the cluster")
	f.StringSliceVar(&m.ListenPeerURLs, "listen-peer-urls", []string{"https://127.0.0.1:2380"}, "URLs to serve the other members on")
	f.StringSliceVar(&m.AdvertisePeerURLs, "initial-advertise-peer-urls", []string{"https://127.0.0.1:2380"}, "peer URLs of this member told to the cluster")
	f.StringSliceVar(&m.ListenMetricsURLs, "listen-metrics-urls", nil, "extra URLs serving only /metrics and /health (http allowed)")
	f.StringVar(&m.InitialCluster, "initial-cluster", "", "name=peer-URL of every member at bootstrap (default: this member alone)")
	f.StringVar(&m.InitialClusterState, "initial-cluster-state", "new", `"new" to bootstrap a cluster, "existing" to join one (after etcdctl member add)`)
	f.StringVar(&m.InitialClusterToken, "initial-cluster-token", "etcd-cluster", "token distinguishing this cluster at bootstrap")
	f.StringVar(&m.Client.CertFile, "cert-file", "", "serving certificate for clients")
	f.StringVar(&m.Client.KeyFile, "key-file", "", "key of --cert-file")
	f.StringVar(&m.Client.TrustedCAFile, "trusted-ca-file", "", "CA that signs clients' certificates")
	f.BoolVar(&m.Client.ClientCertAuth, "client-cert-auth", false, "require a client certificate signed by --trusted-ca-file (required)")
	f.StringVar(&m.Peer.CertFile, "peer-cert-file", "", "certificate for peer connections (served and presented)")
	f.StringVar(&m.Peer.KeyFile, "peer-key-file", "", "key of --peer-cert-file")
	f.StringVar(&m.Peer.TrustedCAFile, "peer-trusted-ca-file", "", "CA that signs peers' certificates")
	f.BoolVar(&m.Peer.ClientCertAuth, "peer-client-cert-auth", false, "require a peer certificate signed by --peer-trusted-ca-file (required)")
	f.DurationVar(&m.HeartbeatInterval, "heartbeat-interval", 0, "leader heartbeat interval (etcd's default 100ms when 0; etcd's flag takes milliseconds, this one a duration)")
	f.DurationVar(&m.ElectionTimeout, "election-timeout", 0, "election timeout (etcd's default 1s when 0; a duration)")
	f.Int64Var(&m.QuotaBackendBytes, "quota-backend-bytes", 0, "backend size limit in bytes (default 8 GiB)")
	f.StringVar(&m.LogFile, "log-file", "", "write etcd's log to this file (owner-only) instead of stderr")
	f.StringVar(&m.LogLevel, "log-level", "info", "etcd's log level: debug, info, warn, error")
	f.DurationVar(&wait, "ready-timeout", wait, "give up when the member does not serve within this time (0: wait, as etcd does, until a quorum of members has started)")
	return cmd
}
