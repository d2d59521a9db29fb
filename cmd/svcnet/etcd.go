package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/etcd"
)

func newEtcdCommand() *cobra.Command {
	o := etcd.Defaults()
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
			member, err := etcd.StartMember(cmd.Context(), o.Member, o.ReadyTimeout)
			if err != nil {
				return err
			}
			defer member.Close()
			slog.Info("etcd member serving", "name", o.Name, "clients", member.Endpoints)
			select {
			case <-cmd.Context().Done():
				slog.Info("etcd member stopping", "name", o.Name)
				return nil
			case err := <-member.Err():
				return fmt.Errorf("etcd member %s: %w", o.Name, err)
			}
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
