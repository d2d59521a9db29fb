// Package server is the node agent's HTTP server (kubelet's port 10250):
// the API server's way to its pods' logs, exec, attach, port-forward and
// proxy, and to the node's resource metrics. It reads the pods through
// the agent's Node interface and changes nothing of them.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/pods"
	"github.com/svcnet/svcnet/internal/node/runtime"
	"github.com/svcnet/svcnet/internal/node/stats"
)

// Config configures a node server.
type Config struct {
	// Address is where it listens (like kubelet's :10250), over TLS with
	// CertFile and KeyFile, trusting client certificates signed by
	// ClientCAFile.
	Address, CertFile, KeyFile, ClientCAFile string
	NodeName                                 string
	// NodeIP, PodCIDR and ClusterCIDR bound where /proxy goes: the
	// cluster's pod addresses and the node's own (its hostNetwork pods').
	NodeIP               netip.Addr
	PodCIDR, ClusterCIDR netip.Prefix
	// Self is the svcnet executable, which enters pods for exec.
	Self string
}

// Node is what the server needs of its node agent.
type Node interface {
	// Pod finds a pod the node runs by namespace and name.
	Pod(namespace, name string) (Pod, bool)
	// LogActive reports whether a running container writes the log
	// file at path.
	LogActive(path string) bool
	// Stats is the summary of the node's last measure (nil before the
	// first).
	Stats() *stats.Summary
}

// Pod is what the server knows of a pod the node runs.
type Pod struct {
	Pod  *corev1.Pod    // the newest copy from the API
	Dir  string         // its directory: logs, files, container state
	Exec *pods.ExecInfo // nil until it started
}

// Server is a node's server.
type Server struct {
	cfg  Config
	node Node
}

// New makes the server of node.
func New(cfg Config, node Node) *Server { return &Server{cfg: cfg, node: node} }

// Run answers the API server's requests for this node's pods, at
// kubelet's paths, until ctx ends:
//
//	GET /containerLogs/{namespace}/{pod}/{container}?follow&previous&timestamps&tailLines&sinceSeconds&limitBytes
//	    /exec/{namespace}/{pod}/{container}?command=…&input=1&output=1&error=1&tty=1
//	    /attach/{namespace}/{pod}/{container}?input=1&output=1&error=1&tty=1
//	GET /stats/summary   (CPU and memory of the node's containers, kubelet's shape)
//
// It serves TLS and requires a client certificate of the API server
// signed by the cluster CA, as kubelet does (pods can reach this port).
func (s *Server) Run(ctx context.Context) error {
	caPEM, err := os.ReadFile(s.cfg.ClientCAFile)
	if err != nil {
		return fmt.Errorf("node server client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("node server client CA %s: no certificate", s.cfg.ClientCAFile)
	}
	cert, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("node server certificate: %w", err)
	}
	auth := s.Handler()
	l, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return err
	}
	l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12})
	srv := &http.Server{Handler: auth, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the node server's: the API server's requests only, but for
// /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", s.serveLogs)
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", s.serveExec)
	mux.HandleFunc("/attach/{ns}/{pod}/{container}", s.serveAttach)
	mux.HandleFunc("/portForward/{ns}/{pod}", s.servePortForward)
	mux.HandleFunc("/proxy/{scheme}/{ip}/{port}/{path...}", s.serveProxy)
	mux.HandleFunc("GET /stats/summary", s.serveStats)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !apiServerClient(r) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// apiServerClient reports whether the request comes with the API server's
// verified client certificate (or an admin's).
func apiServerClient(r *http.Request) bool {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return false
	}
	c := r.TLS.VerifiedChains[0][0]
	return c.Subject.CommonName == KubeletClientUser || slices.Contains(c.Subject.Organization, "system:masters")
}

// KubeletClientUser is the API server's identity towards node agents.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// execTarget is what exec and logs need to know of a running container.
type execTarget struct {
	netns, hostname, dir string
	image                string
	env                  []string
	uid                  string
	security             *runtime.Security
	pid                  int // the running container's process (0: not running)
	container            string
}

// pod finds a pod this node runs.
func (s *Server) pod(ns, name string) (Pod, error) {
	p, ok := s.node.Pod(ns, name)
	if !ok {
		return Pod{}, fmt.Errorf("pod %s/%s is not running on node %s", ns, name, s.cfg.NodeName)
	}
	return p, nil
}

// target finds a container of a pod this node runs.
func (s *Server) target(ns, pod, container string) (*execTarget, error) {
	wp, err := s.pod(ns, pod)
	if err != nil {
		return nil, err
	}
	p := wp.Pod
	if container == "" {
		if len(p.Spec.Containers) != 1 {
			return nil, fmt.Errorf("a container name must be specified for pod %s", pod)
		}
		container = p.Spec.Containers[0].Name
	}
	t := wp.Exec
	if t == nil {
		return nil, fmt.Errorf("pod %s has not started yet", pod)
	}
	env, ok := t.Env[container]
	if !ok {
		return nil, fmt.Errorf("container %s is not valid for pod %s", container, pod)
	}
	sec, ok := t.Security[container]
	if !ok {
		return nil, fmt.Errorf("container %s of pod %s cannot be confined; see its status", container, pod)
	}
	image := ""
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		if c.Name == container {
			image = c.Image
		}
	}
	return &execTarget{netns: t.Netns, hostname: t.Hostname, dir: wp.Dir, image: image, env: env, uid: string(p.UID), security: sec,
		pid: t.Pids[container], container: container}, nil
}
