package etcd

import (
	"strings"
	"testing"
	"time"
)

func TestMemberConfig(t *testing.T) {
	tlsFiles := TLSFiles{CertFile: "s.crt", KeyFile: "s.key", TrustedCAFile: "ca.crt", ClientCertAuth: true}
	valid := func() Member {
		return Member{
			Name: "m1", DataDir: "/d",
			ListenClientURLs: []string{"https://127.0.0.1:2379"}, AdvertiseClientURLs: []string{"https://127.0.0.1:2379"},
			ListenPeerURLs: []string{"https://127.0.0.1:2380"}, AdvertisePeerURLs: []string{"https://127.0.0.1:2380"},
			InitialCluster: "m1=https://127.0.0.1:2380,m2=https://127.0.0.1:2381",
			Client:         tlsFiles, Peer: tlsFiles,
		}
	}
	cases := []struct {
		name   string
		change func(*Member)
		errs   []string // each must appear; none: valid
	}{
		{"valid", func(*Member) {}, nil},
		{"no name", func(m *Member) { m.Name = "" }, []string{"--name is required"}},
		{"no data dir", func(m *Member) { m.DataDir = "" }, []string{"--data-dir is required"}},
		{"plain http clients", func(m *Member) { m.ListenClientURLs = []string{"http://127.0.0.1:2379"} }, []string{"--listen-client-urls", "only https"}},
		{"plain http peers", func(m *Member) { m.AdvertisePeerURLs = []string{"http://127.0.0.1:2380"} }, []string{"--initial-advertise-peer-urls", "only https"}},
		{"no port", func(m *Member) { m.ListenPeerURLs = []string{"https://127.0.0.1"} }, []string{"needs a host and a port"}},
		{"a path", func(m *Member) { m.AdvertiseClientURLs = []string{"https://127.0.0.1:2379/x"} }, []string{"no path"}},
		{"no client URLs", func(m *Member) { m.ListenClientURLs = nil }, []string{"--listen-client-urls is required"}},
		{"anonymous clients", func(m *Member) { m.Client.ClientCertAuth = false }, []string{"--client-cert-auth", "only clients"}},
		{"anonymous peers", func(m *Member) { m.Peer.TrustedCAFile = "" }, []string{"--peer-client-cert-auth", "only peers"}},
		{"no serving cert", func(m *Member) { m.Client.KeyFile = "" }, []string{"--cert-file and --key-file"}},
		{"bad state", func(m *Member) { m.InitialClusterState = "joining" }, []string{"--initial-cluster-state"}},
		{"cluster without this member", func(m *Member) { m.InitialCluster = "m2=https://127.0.0.1:2381" }, []string{"does not name this member"}},
		{"metrics over http", func(m *Member) { m.ListenMetricsURLs = []string{"http://127.0.0.1:2381"} }, nil},
		{"metrics without port", func(m *Member) { m.ListenMetricsURLs = []string{"http://127.0.0.1"} }, []string{"--listen-metrics-urls"}},
		{"negative timeout", func(m *Member) { m.ElectionTimeout = -time.Second }, []string{"cannot be negative"}},
		{"several at once", func(m *Member) { m.Name, m.DataDir = "", "" }, []string{"--name", "--data-dir"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := valid()
			c.change(&m)
			cfg, err := m.Config()
			if len(c.errs) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if cfg.Name != m.Name || cfg.Dir != m.DataDir || cfg.InitialCluster != m.InitialCluster || cfg.ClusterState != "new" {
					t.Errorf("config %+v does not carry the member's description", cfg)
				}
				if !cfg.ClientTLSInfo.ClientCertAuth || !cfg.PeerTLSInfo.ClientCertAuth || cfg.ClientAutoTLS || cfg.PeerAutoTLS {
					t.Error("the config does not require certificates of clients and peers")
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range c.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestMemberConfigDefaults(t *testing.T) {
	f := TLSFiles{CertFile: "c", KeyFile: "k", TrustedCAFile: "ca", ClientCertAuth: true}
	m := Member{Name: "solo", DataDir: "/d", ListenClientURLs: []string{"https://127.0.0.1:1"}, AdvertiseClientURLs: []string{"https://127.0.0.1:1"},
		ListenPeerURLs: []string{"https://127.0.0.1:2"}, AdvertisePeerURLs: []string{"https://127.0.0.1:2"}, Client: f, Peer: f,
		HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond}
	cfg, err := m.Config()
	if err != nil {
		t.Fatal(err)
	}
	// Alone by default, as etcd with no --initial-cluster.
	if cfg.InitialCluster != "solo=https://127.0.0.1:2" {
		t.Errorf("initial cluster %q", cfg.InitialCluster)
	}
	if cfg.TickMs != 50 || cfg.ElectionMs != 500 || cfg.QuotaBackendBytes != 8<<30 {
		t.Errorf("tick %d ms, election %d ms, quota %d", cfg.TickMs, cfg.ElectionMs, cfg.QuotaBackendBytes)
	}
}
