package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	noderuntime "github.com/svcnet/svcnet/internal/node/runtime"
)

// Up starts cluster opts.Name in the background and returns once it is
// ready, printing its progress to out.
func Up(ctx context.Context, opts Options, out io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("svcnet up needs root: nodes and pods are network namespaces (run it with sudo)")
	}
	for _, tool := range []string{"ip", "iptables-restore", "iptables-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (the Makefile's `make deps` installs what svcnet needs)", tool)
		}
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	st := StateOf(opts.Name)
	if pid := st.supervisorPid(); pid != 0 {
		return fmt.Errorf("cluster %q is already running (pid %d); `svcnet down --name %s` removes it", opts.Name, pid, opts.Name)
	}
	if st.Exists() {
		// A cluster that crashed: clear what it left before starting anew.
		fmt.Fprintf(out, "Removing what a previous run of cluster %q left behind...\n", opts.Name)
		if err := Down(opts.Name, io.Discard); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(st.path("logs"), 0o700); err != nil {
		return err
	}
	if err := st.writeOptions(opts); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(st.Log("supervisor"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(self, "internal", "supervise", "--name", opts.Name)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: it outlives this command and the terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	fmt.Fprintf(out, "Creating cluster %q (%d nodes, proxy mode %s) ...\n", opts.Name, opts.Nodes, opts.ProxyMode)
	start := time.Now()
	err = follow(ctx, st, cmd.Process.Pid, out, max(5*time.Minute, 4*opts.stepWait()))
	if err != nil {
		fmt.Fprintf(out, "Cluster %q failed: %v\n", opts.Name, err)
		// The logs go with the cluster: their ends are what is left.
		printLogTails(out, st.path("logs"), 12)
		fmt.Fprintf(out, "Removing the cluster.\n")
		_ = Down(opts.Name, io.Discard)
		return err
	}
	fmt.Fprintf(out, "Cluster %q is ready in %.1fs.\n\n", opts.Name, time.Since(start).Seconds())
	kubeconfig := st.Kubeconfig()
	// Under sudo the state is root's: the user who ran it gets a copy.
	if mine, err := copyKubeconfigForInvoker(st, opts.Name, sudoInvoker()); err != nil {
		fmt.Fprintf(out, "(could not copy the kubeconfig for %s: %v)\n", os.Getenv("SUDO_USER"), err)
	} else if mine != "" {
		kubeconfig = mine
	}
	fmt.Fprint(out, Hints(opts, kubeconfig, invokedAs()))
	return nil
}

// Hints is what up prints once the cluster is ready: commands that work
// as printed, with the binary as it was invoked.
func Hints(opts Options, kubeconfig, bin string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Kubeconfig: %s\n  export KUBECONFIG=%s\n  kubectl get nodes -o wide\n\nTry next:\n", kubeconfig, kubeconfig)
	if InPortRange(opts.NodePortRange, ExampleNodePort) {
		fmt.Fprintf(&b, "  kubectl apply -f examples/hostnames.yaml\n")
		fmt.Fprintf(&b, "  %s exec --name %s client -- curl -s 172.18.0.11:%d      # from outside the cluster\n", bin, opts.Name, ExampleNodePort)
		fmt.Fprintf(&b, "  %s exec --name %s default/<pod> -- curl -s hostnames       # from a pod\n", bin, opts.Name)
	} else {
		fmt.Fprintf(&b, "  (examples/hostnames.yaml asks for nodePort %d, outside --service-node-port-range %s:\n", ExampleNodePort, opts.NodePortRange)
		fmt.Fprintf(&b, "   recreate the cluster with --service-node-port-range 8000-32767 to apply it)\n")
		fmt.Fprintf(&b, "  kubectl create deployment web --image=svcnet/echo --replicas=2\n")
		fmt.Fprintf(&b, "  kubectl expose deployment web --port 80 --target-port 8080 --type NodePort\n")
	}
	fmt.Fprintf(&b, "  %s status --name %s\n  %s down --name %s\n", bin, opts.Name, bin, opts.Name)
	return b.String()
}

// invokedAs is how the user ran svcnet: ./bin/svcnet from the checkout,
// svcnet from the PATH.
func invokedAs() string {
	if strings.Contains(os.Args[0], "/") {
		return os.Args[0]
	}
	return "svcnet"
}

// follow prints the supervisor's progress until it is ready or fails.
func follow(ctx context.Context, st State, pid int, out io.Writer, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	printed := 0
	for time.Now().Before(deadline) {
		f, err := os.Open(st.progress())
		if err == nil {
			sc := bufio.NewScanner(f)
			n := 0
			for sc.Scan() {
				n++
				if n <= printed {
					continue
				}
				printed = n
				line := sc.Text()
				switch {
				case line == "ready":
					f.Close()
					return nil
				case strings.HasPrefix(line, "error: "):
					f.Close()
					return errors.New(strings.TrimPrefix(line, "error: "))
				default:
					fmt.Fprintf(out, " ✓ %s\n", line)
				}
			}
			f.Close()
		}
		if !alive(pid) {
			return fmt.Errorf("the cluster's supervisor exited; see %s", st.Log("supervisor"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("not ready in 5 minutes")
}

// Down stops cluster name and removes everything it made: processes,
// namespaces (pods' too) and its state. It works after a crash as well.
func Down(name string, out io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("svcnet down needs root (run it with sudo)")
	}
	removeInvokerKubeconfig(name)
	st := StateOf(name)
	if left, _ := netns.List(NetnsPrefix(name)); !st.Exists() && len(left) == 0 {
		return fmt.Errorf("no cluster %q (nothing in %s, no namespaces named %s*)", name, st.Dir, NetnsPrefix(name))
	}
	if pid := st.supervisorPid(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 300 && alive(pid); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Whatever is left of the supervisor's children, and every process
	// living in one of the cluster's namespaces (pods, node agents,
	// proxies), however it got there.
	for _, pid := range st.pids() {
		if alive(pid) && isSvcnet(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	killInNamespaces(NetnsPrefix(name))
	if err := Destroy(name); err != nil {
		return err
	}
	// The pods' IPC and UTS namespaces are held by files in their
	// directories: let go of them before removing those.
	if err := noderuntime.ReleaseNamespaces(st.Dir); err != nil {
		return err
	}
	if err := os.RemoveAll(st.Dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "Deleted cluster %q.\n", name)
	return nil
}

// isSvcnet checks that pid still runs svcnet (pids are reused).
func isSvcnet(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), "svcnet")
}

// killInNamespaces kills the processes that live in the cluster's
// namespaces (named with prefix): pods, node agents, proxies.
func killInNamespaces(prefix string) {
	for _, pid := range netns.Residents(prefix) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// printLogTails prints the last n lines of each non-empty log in dir.
func printLogTails(out io.Writer, dir string, n int) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(logs)
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(out, "--- %s (last %d lines)\n", filepath.Base(l), len(lines))
		for _, line := range lines {
			fmt.Fprintf(out, "    %s\n", line)
		}
	}
}
