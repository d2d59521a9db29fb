package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The package's shared API server, as Kubernetes' integration tests share
// a control plane: started by the first test that asks for it, stopped by
// RunSharedAPIServerTests after the package's tests. A test may use it
// when it needs no special flags, never stops, restarts or kills the
// server nor looks into its data beyond the CA and kubeconfigs, and
// asserts nothing about cluster-wide state that another test changes; it
// keeps its objects in a namespace of its own (CreateNamespace) and gives
// its cluster-scoped objects names of its own (UniqueName).
var shared struct {
	mainRuns bool // RunSharedAPIServerTests runs the tests
	once     sync.Once
	started  *APIServer // the process once its start began (t nil after)
	ready    *APIServer // set once it answers: the views' template
}

// RunSharedAPIServerTests runs the package's tests (m.Run) and then stops
// the shared API server if a test started it, and removes its data. A
// package whose tests call SharedAPIServer calls it from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(framework.RunSharedAPIServerTests(m)) }
//
// It returns the exit code, not zero also when the shared server ended on
// its own before the tests were done (its logs are printed then).
func RunSharedAPIServerTests(m *testing.M) int {
	shared.mainRuns = true
	code := m.Run()
	s := shared.started
	if s == nil {
		return code
	}
	// A start that failed has failed its test already.
	if !s.stop() && shared.ready != nil {
		fmt.Fprintf(os.Stderr, "the shared svcnet apiserver ended before the tests did; its logs:\n%s\n", s.Logs())
		if code == 0 {
			code = 1
		}
	}
	if err := os.RemoveAll(s.DataDir); err != nil {
		fmt.Fprintf(os.Stderr, "removing the shared API server's data: %v\n", err)
	}
	return code
}

// SharedAPIServer returns t's view of the package's shared API server,
// starting it if no test has yet (on a data directory of its own, which
// outlives that test). The view's methods fail t, and t's logs get the
// server's logs when t fails. A view must not Start, Stop, Kill or
// Restart the server: a test that does needs its own (StartAPIServer).
func SharedAPIServer(t testing.TB) *APIServer {
	t.Helper()
	if !shared.mainRuns {
		t.Fatal("SharedAPIServer: the package's TestMain must run framework.RunSharedAPIServerTests, which stops the server")
	}
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "svcnet-e2e-shared-")
		if err != nil {
			t.Fatal(err)
		}
		s := &APIServer{t: t, DataDir: dir}
		shared.started = s
		// A failure (of the build too: Binary) fails t with the logs, and
		// leaves ready nil for the tests that ask after it.
		s.Start()
		s.t = nil
		shared.ready = s
	})
	if shared.ready == nil {
		t.Fatal("the shared svcnet apiserver did not start: the first test that asked for it says why (the build's error or the server's logs)")
	}
	v := *shared.ready
	v.t, v.shared = t, true
	from := len(v.Logs())
	t.Cleanup(func() {
		if t.Failed() {
			logs := v.Logs()
			t.Logf("shared svcnet apiserver logs (all its tests'):\n%s\n--- %s took the server here ---\n%s", logs[:from], t.Name(), logs[from:])
		}
	})
	return &v
}

// mustOwn fails the test when s is a view of the shared server: what would
// stop or restart it would do so under the other tests.
func (s *APIServer) mustOwn(what string) {
	if s.shared {
		s.t.Helper()
		s.t.Fatalf("%s on the shared API server: a test that does needs its own (StartAPIServer)", what)
	}
}

var uniqueNames atomic.Int64

// UniqueName is base with a suffix no other call in this test process
// gets: names on the shared server (which lives as long as the process)
// differ between tests and between runs of one test (-count).
func UniqueName(base string) string {
	return fmt.Sprintf("%s-%d", base, uniqueNames.Add(1))
}

// CreateNamespace creates a namespace named UniqueName("e2e-"+base), for
// the test's objects on the shared server, and deletes it when the test
// ends. It returns the name.
func (s *APIServer) CreateNamespace(base string) string {
	s.t.Helper()
	name := UniqueName("e2e-" + strings.ToLower(base))
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("create namespace %s: %v", name, err)
	}
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.t.Logf("delete namespace %s: %v", name, err)
		}
	})
	return name
}
