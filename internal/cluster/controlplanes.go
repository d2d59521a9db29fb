package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/apiserver"
	"github.com/svcnet/svcnet/internal/etcd"
	"github.com/svcnet/svcnet/internal/pki"
)

// Ports of a control-plane host, kubeadm's.
const (
	etcdClientPort = 2379
	etcdPeerPort   = 2380
)

// startControlPlanes runs a highly available control plane, as kubeadm's
// stacked topology behind a load balancer: on every control-plane host
// (a namespace on the underlay) an etcd member, an API server on the
// etcd cluster and a controller manager with leader election; the edge
// balances the API over the hosts' /readyz; the host's loopback port
// (port) leads to the edge. Credentials are the cluster's one PKI,
// made before anything starts.
func (s *supervisor) startControlPlanes(ctx context.Context, ca *pki.CA, encryption string, port int, t0 time.Time) error {
	shared := filepath.Join(s.state.APIServerDir(), "pki")
	tokens := filepath.Join(shared, "tokens.csv")
	if err := apiserver.EnsureTokenFile(tokens); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	var initial, clientURLs, backends, names []string
	for _, cp := range s.plan.ControlPlanes {
		initial = append(initial, cp.Name+"=https://"+netip.AddrPortFrom(cp.IP, etcdPeerPort).String())
		clientURLs = append(clientURLs, "https://"+netip.AddrPortFrom(cp.IP, etcdClientPort).String())
		backends = append(backends, netip.AddrPortFrom(cp.IP, APIPortInCluster).String())
		names = append(names, cp.Name)
	}
	type host struct {
		cp       ControlPlanePlan
		etcdArgs []string
		apiArgs  []string
		cmConfig string
	}
	var hosts []host
	for _, cp := range s.plan.ControlPlanes {
		dir := s.state.ControlPlaneDir(cp.Name)
		files, err := pki.EnsureEtcdMember(shared, filepath.Join(dir, "etcd-pki"), []string{cp.IP.String()})
		if err != nil {
			return err
		}
		// The API server's data directory holds the cluster's CA,
		// ServiceAccount key and tokens; it makes its serving
		// certificate (its address, the edge's) from them.
		apiDir := filepath.Join(dir, "apiserver")
		if err := copyFiles(shared, filepath.Join(apiDir, "pki"), pki.CACertFile, pki.CAKeyFile, pki.ServiceAccountKeyFile, "tokens.csv"); err != nil {
			return fmt.Errorf("%s: %w", cp.Name, err)
		}
		apiURL := "https://" + netip.AddrPortFrom(cp.IP, APIPortInCluster).String()
		cmConfig := filepath.Join(dir, "controller-manager.kubeconfig")
		cred, err := ca.ClientCredentials(apiserver.ControllerManagerUser)
		if err != nil {
			return err
		}
		// As kubeadm's: each controller manager talks to its host's API
		// server.
		if err := pki.WriteKubeconfig(cmConfig, pki.Kubeconfig("svcnet", apiURL, ca.CertPEM, cred)); err != nil {
			return err
		}
		client, peer := "https://"+netip.AddrPortFrom(cp.IP, etcdClientPort).String(), "https://"+netip.AddrPortFrom(cp.IP, etcdPeerPort).String()
		member := etcd.Defaults()
		member.Name, member.DataDir = cp.Name, filepath.Join(dir, "etcd")
		member.ListenClientURLs, member.AdvertiseClientURLs = []string{client}, []string{client}
		member.ListenPeerURLs, member.AdvertisePeerURLs = []string{peer}, []string{peer}
		member.InitialCluster, member.InitialClusterState = strings.Join(initial, ","), "new"
		member.InitialClusterToken = "svcnet-" + s.opts.Name
		member.Client = etcd.TLSFiles{CertFile: files.ServerCert, KeyFile: files.ServerKey, TrustedCAFile: files.CA, ClientCertAuth: true}
		member.Peer = etcd.TLSFiles{CertFile: files.PeerCert, KeyFile: files.PeerKey, TrustedCAFile: files.CA, ClientCertAuth: true}
		hosts = append(hosts, host{cp: cp, cmConfig: cmConfig,
			etcdArgs: append([]string{"etcd"}, member.Args()...),
			apiArgs:  s.haAPIServer(cp, apiDir, encryption, clientURLs, files),
		})
	}
	// The admin's kubeconfig: the host's loopback port, which leads to
	// the edge's balancer.
	admin, err := ca.ClientCredentials(apiserver.AdminUser, apiserver.AdminGroup)
	if err != nil {
		return err
	}
	if err := pki.WriteKubeconfig(s.state.Kubeconfig(), pki.Kubeconfig("svcnet", fmt.Sprintf("https://127.0.0.1:%d", port), ca.CertPEM, admin)); err != nil {
		return err
	}

	for _, h := range hosts {
		s.run(h.cp.Name+"-etcd", s.inNetns(h.cp.Netns, h.etcdArgs...))
	}
	for _, h := range hosts {
		s.run(h.cp.Name+"-apiserver", s.inNetns(h.cp.Netns, h.apiArgs...))
	}
	s.runEdge(backends)
	s.run("api-relay", []string{"internal", "relay", "--listen-fd", "3", "--netns", s.plan.EdgeNetns(), "--to", s.plan.APIAddress().String()}, s.apiListener)
	if err := s.waitAPI(ctx, ca, port); err != nil {
		return err
	}
	s.state.step("control plane: %d hosts (%s at %s…): etcd members, API servers on them, behind the edge's balancer at https://%s; on this host https://127.0.0.1:%d (%.1fs)",
		len(hosts), strings.Join(names, ", "), s.plan.ControlPlanes[0].IP, s.plan.APIAddress(), port, time.Since(t0).Seconds())
	for _, h := range hosts {
		s.run(h.cp.Name+"-controller-manager", s.inNetns(h.cp.Netns, s.controllerManager(h.cmConfig, true)...))
	}
	return nil
}

// inNetns is the command line of args run in a namespace.
func (s *supervisor) inNetns(netns string, args ...string) []string {
	return append([]string{"internal", "netns-exec", "--netns", netns, "--", s.self}, args...)
}

// copyFiles copies the named files of src to dst (mode 0600, dst 0700).
func copyFiles(src, dst string, names ...string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, n), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// haAPIServer is the command line of a control-plane host's API server:
// on the host's address, on the etcd cluster, its certificate also
// naming the edge that balances it.
func (s *supervisor) haAPIServer(cp ControlPlanePlan, dataDir, encryption string, etcdURLs []string, files pki.EtcdFiles) []string {
	o := s.apiServer(dataDir, encryption)
	o.BindAddress, o.SecurePort, o.AdvertiseAddress = cp.IP.String(), APIPortInCluster, cp.IP.String()
	o.TLSSANs = []string{s.plan.Edge.String()}
	o.EtcdServers = etcdURLs
	o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = files.CA, files.ClientCert, files.ClientKey
	return slices.Concat([]string{"apiserver"}, o.Args(), s.opts.APIServerArgs)
}
