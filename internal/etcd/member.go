package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Member describes one member of an etcd cluster in the terms of etcd's
// own flags, so that `svcnet etcd` reads like `etcd`.
type Member struct {
	Name    string
	DataDir string

	ListenClientURLs    []string
	AdvertiseClientURLs []string
	ListenPeerURLs      []string
	AdvertisePeerURLs   []string
	// ListenMetricsURLs serve /metrics and /health without client
	// certificates (etcd's --listen-metrics-urls), for probes.
	ListenMetricsURLs []string

	// InitialCluster is name=peerURL,… of every member at bootstrap.
	InitialCluster      string
	InitialClusterState string // "new" or "existing"
	InitialClusterToken string

	Client, Peer TLSFiles

	// Tuning, etcd's defaults when zero.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	QuotaBackendBytes int64

	// LogFile receives etcd's log; "" writes it to stderr.
	LogFile  string
	LogLevel string
}

// TLSFiles are one side's (clients' or peers') certificates.
type TLSFiles struct {
	CertFile, KeyFile, TrustedCAFile string
	// ClientCertAuth requires a certificate signed by TrustedCAFile
	// from whoever connects.
	ClientCertAuth bool
}

func (f TLSFiles) info() transport.TLSInfo {
	return transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.TrustedCAFile, ClientCertAuth: f.ClientCertAuth}
}

// Config checks the member's description and turns it into etcd's
// configuration. It reads no files: what it refuses, it refuses for what
// was asked, with the flag's name.
//
// svcnet serves etcd only over mutual TLS (etcd itself also allows plain
// HTTP and anonymous clients): whoever reaches etcd has every object of
// the cluster, Secrets included, with no authorization in between.
func (m Member) Config() (*embed.Config, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if m.Name == "" {
		bad("--name is required")
	}
	if m.DataDir == "" {
		bad("--data-dir is required")
	}
	parse := func(flag string, raw []string, required bool) []url.URL {
		if len(raw) == 0 && required {
			bad("%s is required", flag)
		}
		var out []url.URL
		for _, s := range raw {
			u, err := url.Parse(s)
			switch {
			case err != nil:
				bad("%s: %q is not a URL: %v", flag, s, err)
				continue
			case u.Scheme != "https":
				bad("%s: %q: svcnet etcd serves only https (mutual TLS)", flag, s)
				continue
			case u.Port() == "" || u.Hostname() == "":
				bad("%s: %q needs a host and a port", flag, s)
				continue
			case u.Path != "" && u.Path != "/":
				bad("%s: %q: a URL of etcd has no path", flag, s)
				continue
			}
			out = append(out, *u)
		}
		return out
	}
	lc := parse("--listen-client-urls", m.ListenClientURLs, true)
	ac := parse("--advertise-client-urls", m.AdvertiseClientURLs, true)
	lp := parse("--listen-peer-urls", m.ListenPeerURLs, true)
	ap := parse("--initial-advertise-peer-urls", m.AdvertisePeerURLs, true)
	var lm []url.URL
	for _, s := range m.ListenMetricsURLs {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
			bad("--listen-metrics-urls: %q is not an http(s) URL with a port", s)
			continue
		}
		lm = append(lm, *u)
	}
	for _, side := range []struct {
		prefix, who string
		f           TLSFiles
	}{{"", "clients", m.Client}, {"peer-", "peers", m.Peer}} {
		if side.f.CertFile == "" || side.f.KeyFile == "" {
			bad("--%scert-file and --%skey-file are required", side.prefix, side.prefix)
		}
		if side.f.TrustedCAFile == "" || !side.f.ClientCertAuth {
			bad("--%strusted-ca-file with --%sclient-cert-auth is required: svcnet etcd accepts only %s with a certificate", side.prefix, side.prefix, side.who)
		}
	}
	state := m.InitialClusterState
	if state == "" {
		state = embed.ClusterStateFlagNew
	}
	if state != embed.ClusterStateFlagNew && state != embed.ClusterStateFlagExisting {
		bad("--initial-cluster-state: %q is neither %q nor %q", state, embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting)
	}
	initial := m.InitialCluster
	if initial == "" && len(m.AdvertisePeerURLs) > 0 {
		initial = m.Name + "=" + strings.Join(m.AdvertisePeerURLs, ","+m.Name+"=")
	}
	if initial != "" && m.Name != "" && !memberNamed(initial, m.Name) {
		bad("--initial-cluster %q does not name this member (%q)", initial, m.Name)
	}
	if m.HeartbeatInterval < 0 || m.ElectionTimeout < 0 || m.QuotaBackendBytes < 0 {
		bad("--heartbeat-interval, --election-timeout and --quota-backend-bytes cannot be negative")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.DataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = lc, ac
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = lp, ap
	cfg.ListenMetricsUrls = lm
	cfg.InitialCluster = initial
	cfg.ClusterState = state
	if m.InitialClusterToken != "" {
		cfg.InitialClusterToken = m.InitialClusterToken
	}
	cfg.ClientTLSInfo, cfg.PeerTLSInfo = m.Client.info(), m.Peer.info()
	cfg.ClientAutoTLS, cfg.PeerAutoTLS = false, false
	if m.HeartbeatInterval > 0 {
		cfg.TickMs = uint(m.HeartbeatInterval / time.Millisecond)
	}
	if m.ElectionTimeout > 0 {
		cfg.ElectionMs = uint(m.ElectionTimeout / time.Millisecond)
	}
	cfg.QuotaBackendBytes = 8 << 30
	if m.QuotaBackendBytes > 0 {
		cfg.QuotaBackendBytes = m.QuotaBackendBytes
	}
	// The API server's watch cache asks for progress notifications.
	cfg.WatchProgressNotifyInterval = 5 * time.Second
	cfg.Logger = "zap"
	cfg.LogLevel = "info"
	if m.LogLevel != "" {
		cfg.LogLevel = m.LogLevel
	}
	cfg.LogOutputs = []string{"stderr"}
	if m.LogFile != "" {
		cfg.LogOutputs = []string{m.LogFile}
	}
	// etcd's own Validate runs when the member starts: it sets up the
	// log outputs, which this function must not touch.
	return cfg, nil
}

// memberNamed reports whether name=URL pairs name the member.
func memberNamed(initial, name string) bool {
	for pair := range strings.SplitSeq(initial, ",") {
		if n, _, ok := strings.Cut(strings.TrimSpace(pair), "="); ok && n == name {
			return true
		}
	}
	return false
}

// StartMember runs the member until Close and returns once it serves
// (a new cluster's members wait for each other: a quorum must form);
// wait > 0 bounds that wait.
func StartMember(ctx context.Context, m Member, wait time.Duration) (*Embedded, error) {
	cfg, err := m.Config()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd data directory: %w", err)
	}
	// etcd refuses a data directory others can read; make it the owner's
	// as etcd does for the one it creates.
	if err := os.Chmod(m.DataDir, 0o700); err != nil {
		return nil, err
	}
	if m.LogFile != "" {
		// The log names keys and members: the owner's only (zap would
		// make it world-readable).
		if f, err := os.OpenFile(m.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			f.Close()
			_ = os.Chmod(m.LogFile, 0o600)
		}
	}
	return start(ctx, cfg, wait, filepath.Base(m.LogFile))
}

// start runs an etcd configuration and waits until it is ready.
func start(ctx context.Context, cfg *embed.Config, wait time.Duration, logName string) (*Embedded, error) {
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd member %s in %s: %w", cfg.Name, cfg.Dir, err)
	}
	var timeout <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd member %s failed: %w", cfg.Name, err)
	case <-timeout:
		e.Close()
		hint := "its log"
		if logName != "" && logName != "." {
			hint = logName
		}
		return nil, fmt.Errorf("etcd member %s did not become ready within %s (a new cluster needs a quorum of its members started); see %s", cfg.Name, wait, hint)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	var urls []string
	for _, u := range cfg.AdvertiseClientUrls {
		urls = append(urls, u.String())
	}
	return &Embedded{etcd: e, Endpoints: urls}, nil
}
