// Package framework runs svcnet's real binary for end-to-end tests and
// drives it with the real kubectl binaries installed on the machine.
package framework

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/pki"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RaceEnv, set to 1, builds the svcnet binary with the race detector,
// so the processes end-to-end tests start (supervisor, agents, proxies)
// report their data races in their logs.
const RaceEnv = "SVCNET_E2E_RACE"

// BinaryEnv names a svcnet binary to use instead of building one: `make
// test` gives every end-to-end package the one it has just built (each
// package is a process of its own, and would link its own), and the tests
// that run inside the test VM get the one their host process used (a
// build there would take minutes).
const BinaryEnv = "SVCNET_E2E_BINARY"

// Binary builds cmd/svcnet once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		return p
	}
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		// One directory per test process, named by its pid: a process
		// cannot remove it when it ends (tests have no exit hook), so the
		// next one removes those of processes that are gone — each holds
		// a 130 MB binary, and a few hundred runs fill a disk.
		removeStaleBinaries()
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", binDirPrefix, os.Getpid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "svcnet")
		args := []string{"build", "-o", binPath}
		if os.Getenv(RaceEnv) == "1" {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/svcnet")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

const binDirPrefix = "svcnet-e2e-bin-"

// removeStaleBinaries removes the binary directories of test processes
// that no longer run.
func removeStaleBinaries() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), binDirPrefix))
		if err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // its process still runs (or the number is a live pid)
		}
		_ = os.RemoveAll(d)
	}
}

// APIServer is a running `svcnet apiserver` process.
type APIServer struct {
	t       testing.TB
	DataDir string
	Args    []string
	URL     string
	// Kubeconfig is the admin kubeconfig.
	Kubeconfig string
	cmd        *exec.Cmd
	done       chan struct{}
	logs       *bytes.Buffer
	// mu guards logs. A pointer: a view of the shared server (see
	// SharedAPIServer) is a copy of this struct, and must lock the same.
	mu *sync.Mutex
	// shared marks such a view: the server is not its test's to stop.
	shared bool
}

var urlLine = regexp.MustCompile(`svcnet API server at (https://\S+)`)

// StartAPIServer runs `svcnet apiserver` on a free loopback port with a
// fresh data directory and the given extra flags, and waits until it is
// ready. It is stopped when the test ends.
func StartAPIServer(t testing.TB, args ...string) *APIServer {
	t.Helper()
	return StartAPIServerFor(t, &APIServer{DataDir: t.TempDir(), Args: args})
}

// StartAPIServerFor starts s (DataDir and Args set by the caller) and
// stops it when t ends.
func StartAPIServerFor(t testing.TB, s *APIServer) *APIServer {
	t.Helper()
	s.t = t
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts (or restarts) the process on the same data directory.
func (s *APIServer) Start() {
	s.t.Helper()
	s.mustOwn("Start")
	args := append([]string{"apiserver", "--data-dir", s.DataDir, "--secure-port", "0"}, s.Args...)
	if s.URL != "" {
		// A restart keeps the port, so that clients reconnect.
		args = append(args, "--secure-port", s.URL[strings.LastIndex(s.URL, ":")+1:])
	}
	cmd := exec.Command(Binary(s.t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if s.mu == nil {
		s.mu = &sync.Mutex{}
	}
	s.mu.Lock()
	s.logs = &bytes.Buffer{}
	cmd.Stderr = &lockedWriter{w: s.logs, mu: s.mu}
	s.mu.Unlock()
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	urlCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				urlCh <- m[1]
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	select {
	case s.URL = <-urlCh:
	case <-s.done:
		s.t.Fatalf("svcnet apiserver exited at start:\n%s", s.Logs())
	case <-time.After(60 * time.Second):
		s.t.Fatalf("svcnet apiserver did not start in 60s:\n%s", s.Logs())
	}
	s.Kubeconfig = filepath.Join(s.DataDir, "kubeconfigs", "admin.kubeconfig")
	s.WaitReady()
}

// WaitReady waits until /readyz answers ok.
func (s *APIServer) WaitReady() {
	s.t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.done:
			s.t.Fatalf("svcnet apiserver exited:\n%s", s.Logs())
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.t.Fatalf("svcnet apiserver not ready in 60s:\n%s", s.Logs())
}

// Stop stops the process (SIGTERM, then SIGKILL).
func (s *APIServer) Stop() {
	s.mustOwn("Stop")
	if !s.stop() {
		return
	}
	if s.t.Failed() {
		s.t.Logf("svcnet apiserver logs:\n%s", s.Logs())
	}
}

// stop stops the process (SIGTERM, then SIGKILL) and reports whether it
// was running.
func (s *APIServer) stop() bool {
	if s.cmd == nil || s.cmd.Process == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	return true
}

// Kill ends the server at once (SIGKILL), as a crash would.
func (s *APIServer) Kill() {
	s.mustOwn("Kill")
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Restart stops and starts the server on the same data and port.
func (s *APIServer) Restart() {
	s.t.Helper()
	s.mustOwn("Restart")
	s.Stop()
	s.Start()
}

// Logs returns what the server wrote to stderr.
func (s *APIServer) Logs() string {
	if s.mu == nil {
		return "" // never started
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Config is a client config for the named identity's kubeconfig in the
// data directory (admin, viewer, proxy …).
func (s *APIServer) Config(identity string) *rest.Config {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.KubeconfigOf(identity))
	if err != nil {
		s.t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
}

// KubeconfigOf is the path of an identity's kubeconfig.
func (s *APIServer) KubeconfigOf(identity string) string {
	return filepath.Join(s.DataDir, "kubeconfigs", identity+".kubeconfig")
}

// Client is an admin clientset.
func (s *APIServer) Client() kubernetes.Interface {
	s.t.Helper()
	c, err := kubernetes.NewForConfig(s.Config("admin"))
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// ClientAs is a clientset that authenticates as user, in groups, with a
// client certificate from the server's CA.
func (s *APIServer) ClientAs(user string, groups ...string) kubernetes.Interface {
	s.t.Helper()
	ca, err := pki.LoadCA(filepath.Join(s.DataDir, "pki"))
	if err != nil {
		s.t.Fatal(err)
	}
	cred, err := ca.ClientCredentials(user, groups...)
	if err != nil {
		s.t.Fatal(err)
	}
	cfg := rest.CopyConfig(s.Config("admin"))
	cfg.CertData, cfg.KeyData = cred.CertPEM, cred.KeyPEM
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Context is a test context bounded in time.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
