// Package server is the node agent's HTTP server (kubelet's port 10250):
// the API server's way to its pods' logs, exec, attach, port-forward and
// proxy, and to the node's resource metrics. It reads the pods through
// the agent's Node interface and changes nothing of them.
package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

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

func (s *Server) logPath(ns, pod, container string, previous bool) (string, error) {
	wp, err := s.pod(ns, pod)
	if err != nil {
		return "", err
	}
	// Only a container of this pod: the name becomes a file name.
	p := wp.Pod
	if !slices.ContainsFunc(append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...),
		func(c corev1.Container) bool { return c.Name == container }) {
		return "", fmt.Errorf("container %q is not valid for pod %q", container, pod)
	}
	name := container + ".log"
	if previous {
		name = container + ".previous.log"
	}
	path := filepath.Join(wp.Dir, name)
	if _, err := os.Stat(path); err != nil {
		if previous {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, pod)
		}
		why := ""
		if t := wp.Exec; t != nil && t.Waiting[container] != "" {
			why = ": " + t.Waiting[container]
		}
		return "", fmt.Errorf("container %q in pod %q is waiting to start%s", container, pod, why)
	}
	return path, nil
}

func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	path, err := s.logPath(r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container"), q.Get("previous") == "true")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	opts := logOptions{timestamps: q.Get("timestamps") == "true", tail: -1, limit: -1}
	if v, err := strconv.Atoi(q.Get("tailLines")); err == nil {
		opts.tail = v
	}
	if v, err := strconv.Atoi(q.Get("limitBytes")); err == nil {
		opts.limit = v
	}
	if v, err := strconv.Atoi(q.Get("sinceSeconds")); err == nil {
		opts.since = time.Now().Add(-time.Duration(v) * time.Second)
	}
	if v, err := time.Parse(time.RFC3339, q.Get("sinceTime")); err == nil {
		opts.since = v
	}
	w.Header().Set("Content-Type", "text/plain")
	fw := &flushWriter{w: w}
	offset, err := writeLogs(fw, f, opts)
	if err != nil || q.Get("follow") != "true" {
		return
	}
	// Follow until the client goes or the container stops writing to
	// this file (it exited, or restarted into a new one).
	for {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
		st, err := os.Stat(path)
		if err != nil || st.Size() < offset {
			return
		}
		if st.Size() == offset {
			if !s.node.LogActive(path) {
				return
			}
			continue
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return
		}
		opts.tail = -1
		n, err := writeLogs(fw, f, opts)
		if err != nil {
			return
		}
		offset += n
	}
}

type logOptions struct {
	timestamps  bool
	tail, limit int
	since       time.Time
}

// writeLogs turns CRI log lines into what kubectl logs prints and returns
// how many bytes of the file it consumed.
func writeLogs(w io.Writer, r io.Reader, o logOptions) (int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	consumed := int64(bytes.LastIndexByte(data, '\n') + 1)
	lines := strings.Split(string(data[:consumed]), "\n")
	lines = lines[:len(lines)-1]
	if o.tail >= 0 && len(lines) > o.tail {
		lines = lines[len(lines)-o.tail:]
	}
	var out bytes.Buffer
	for _, line := range lines {
		ts, rest, _ := strings.Cut(line, " ")
		_, rest, _ = strings.Cut(rest, " ") // stream
		_, msg, _ := strings.Cut(rest, " ") // F or P
		if !o.since.IsZero() {
			if t, err := time.Parse(time.RFC3339Nano, ts); err == nil && t.Before(o.since) {
				continue
			}
		}
		if o.timestamps {
			out.WriteString(ts + " ")
		}
		out.WriteString(msg + "\n")
	}
	b := out.Bytes()
	if o.limit >= 0 && len(b) > o.limit {
		b = b[:o.limit]
	}
	_, err = w.Write(b)
	return consumed, err
}

type flushWriter struct{ w http.ResponseWriter }

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	ns, pod, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	remotecommand.ServeExec(w, r, &executor{s: s, ns: ns}, pod, "", container, cmd, opts,
		4*time.Hour, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ns, pod, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	remotecommand.ServeAttach(w, r, &attacher{s: s, ns: ns}, pod, "", container, opts,
		4*time.Hour, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

// attacher connects kubectl attach to a container's shim, which holds its
// stdin and sees its output.
type attacher struct {
	s  *Server
	ns string
}

func (at *attacher) AttachContainer(ctx context.Context, pod, _ string, container string, in io.Reader,
	out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	t, err := at.s.target(at.ns, pod, container)
	if err != nil {
		return err
	}
	if t.pid == 0 {
		return fmt.Errorf("container %s of pod %s is not running", t.container, pod)
	}
	s := runtime.AttachStreams{Stdin: in}
	if out != nil {
		s.Stdout = out
	}
	if errw != nil {
		s.Stderr = errw
	}
	if resize != nil {
		sizes := make(chan [2]uint16)
		s.Resize = sizes
		go func() {
			defer close(sizes)
			for {
				select {
				case size, ok := <-resize:
					if !ok {
						return
					}
					select {
					case sizes <- [2]uint16{size.Width, size.Height}:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return runtime.Attach(filepath.Join(t.dir, t.container+".run"), s)
}

// executor runs kubectl exec commands in a pod's container.
type executor struct {
	s  *Server
	ns string
}

func (e *executor) ExecInContainer(ctx context.Context, pod, _ string, container string, cmd []string, in io.Reader,
	out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	t, err := e.s.target(e.ns, pod, container)
	if err != nil {
		return err
	}
	if cmd, err = pods.ImageCommand(t.image, cmd); err != nil {
		return err
	}
	return runInPod(ctx, e.s.cfg.Self, t, cmd, in, out, errw, tty, resize)
}

// runInPod runs cmd inside a pod's namespaces with the container's
// environment, like `kubectl exec` and `svcnet exec`.
func runInPod(ctx context.Context, self string, t *execTarget, argv []string, in io.Reader, out, errw io.Writer,
	tty bool, resize <-chan remotecommand.TerminalSize) error {
	o := runtime.ExecOptions{Netns: t.netns, Hostname: t.hostname, ResolvConf: filepath.Join(t.dir, "resolv.conf"),
		Hosts: filepath.Join(t.dir, "hosts"), Argv: argv, Security: t.security, Join: t.pid}
	c := exec.CommandContext(ctx, self, o.Args()...)
	c.Env = t.env
	c.SysProcAttr = runtime.SysProcAttr()
	if tty {
		// A terminal session instead of a process group.
		c.SysProcAttr.Setpgid = false
		c.SysProcAttr.Setsid, c.SysProcAttr.Setctty = true, true
		f, err := pty.StartWithAttrs(c, nil, c.SysProcAttr)
		if err != nil {
			return err
		}
		defer f.Close()
		go func() {
			for size := range resize {
				_ = pty.Setsize(f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
			}
		}()
		var wg sync.WaitGroup
		if in != nil {
			go func() { _, _ = io.Copy(f, in) }()
		}
		if out != nil {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(out, f) }()
		}
		err = c.Wait()
		wg.Wait()
		return exitErr(c, err)
	}
	if in != nil {
		c.Stdin = in
	}
	c.Stdout, c.Stderr = out, errw
	return exitErr(c, c.Run())
}

// exitErr reports a non-zero exit as utilexec's ExitError, which the
// streaming protocol turns into kubectl's exit code.
func exitErr(c *exec.Cmd, err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", ee.ExitCode()), Code: ee.ExitCode()}
	}
	return err
}
