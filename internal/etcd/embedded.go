// Package etcd runs the embedded single-member etcd that svcnet stores its
// objects in when no external etcd cluster is given.
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/svcnet/svcnet/internal/portpick"
)

// Embedded is a running embedded etcd member.
type Embedded struct {
	etcd *embed.Etcd
	// Endpoints are the client URLs, e.g. https://127.0.0.1:41234.
	Endpoints []string
}

// ports are the loopback ports of the member, kept in the data directory
// so that a restart finds the member where it was.
type ports struct {
	Client int `json:"client"`
	Peer   int `json:"peer"`
}

// TLS are the member's certificates. Clients and peers are served over
// TLS only and must present a certificate signed by CA (kubeadm's setup):
// loopback is shared with every local user, and etcd has no other lock.
type TLS struct {
	CA, ServerCert, ServerKey, PeerCert, PeerKey string
}

// Start runs etcd with its data in dir, serving on loopback only. It
// returns once the member is ready to serve.
func Start(ctx context.Context, dir string, certs TLS) (*Embedded, error) {
	if certs.CA == "" || certs.ServerCert == "" || certs.PeerCert == "" {
		return nil, errors.New("embedded etcd: certificates are required (it serves only mutual TLS)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd data directory: %w", err)
	}
	p, err := loadPorts(dir)
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("https://127.0.0.1:%d", p.Client)
	peer := fmt.Sprintf("https://127.0.0.1:%d", p.Peer)
	server := TLSFiles{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, TrustedCAFile: certs.CA, ClientCertAuth: true}
	return StartMember(ctx, Member{
		Name:             "svcnet",
		DataDir:          filepath.Join(dir, "member-data"),
		ListenClientURLs: []string{client}, AdvertiseClientURLs: []string{client},
		ListenPeerURLs: []string{peer}, AdvertisePeerURLs: []string{peer},
		Client:   server,
		Peer:     TLSFiles{CertFile: certs.PeerCert, KeyFile: certs.PeerKey, TrustedCAFile: certs.CA, ClientCertAuth: true},
		LogFile:  filepath.Join(dir, "etcd.log"),
		LogLevel: "error",
	}, 60*time.Second)
}

// Err reports a fatal error of the running member.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close stops the member.
func (e *Embedded) Close() { e.etcd.Close() }

func loadPorts(dir string) (ports, error) {
	path := filepath.Join(dir, "ports.json")
	var p ports
	if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &p) == nil && free(p.Client) && free(p.Peer) {
		return p, nil
	}
	// Not listening on port 0: the port it gives, from the ephemeral
	// range, could be taken by an outgoing connection before etcd binds it.
	var err error
	if p.Client, err = portpick.Loopback(); err != nil {
		return p, fmt.Errorf("etcd client port: %w", err)
	}
	if p.Peer, err = portpick.Loopback(); err != nil {
		return p, fmt.Errorf("etcd peer port: %w", err)
	}
	data, _ := json.Marshal(p)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return p, fmt.Errorf("record etcd ports: %w", err)
	}
	return p, nil
}

func free(port int) bool {
	if port == 0 {
		return false
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
