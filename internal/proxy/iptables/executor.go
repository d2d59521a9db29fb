package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Executor is every effect the iptables mode has on the host. Exec runs
// the real binaries; Fake keeps tables in memory for tests.
type Executor interface {
	// Restore applies iptables-restore input without flushing the tables,
	// atomically: all of it or none.
	Restore(ctx context.Context, data []byte) error
	// Save returns iptables-save output for one table.
	Save(ctx context.Context, table string) ([]byte, error)
	// EnsureChain creates a chain unless it exists.
	EnsureChain(ctx context.Context, table, chain string) error
	// EnsureRule inserts a rule at the top of a chain unless it is there.
	EnsureRule(ctx context.Context, table, chain string, args ...string) error
	// ChainExists reports whether a chain exists, cheaply: it is how a
	// flush of the tables by someone else is noticed.
	ChainExists(ctx context.Context, table, chain string) (bool, error)
}

// Exec runs iptables-restore, iptables-save and iptables (or their ip6
// and -legacy/-nft variants). It touches the network namespace it runs in;
// tests run it only inside namespaces they create.
type Exec struct {
	// Binary is the iptables command: "iptables", "ip6tables",
	// "iptables-legacy", …; -save and -restore are appended for the others.
	Binary string
}

// NewExec returns an Exec for the default binaries of family.
func NewExec(family v1.IPFamily) *Exec {
	if family == v1.IPv6Protocol {
		return &Exec{Binary: "ip6tables"}
	}
	return &Exec{Binary: "iptables"}
}

// lockWait makes concurrent iptables users (kubelet, CNI plugins) queue
// for the xtables lock instead of failing.
const lockWait = "5"

func (e *Exec) run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, &ExecError{Command: name + " " + strings.Join(args, " "), Stderr: strings.TrimSpace(stderr.String()), Err: err}
	}
	return stdout.Bytes(), nil
}

// Restore implements Executor.
func (e *Exec) Restore(ctx context.Context, data []byte) error {
	_, err := e.run(ctx, data, e.Binary+"-restore", "-w", lockWait, "--noflush")
	if err != nil {
		return withFailedLine(err, data)
	}
	return nil
}

// Save implements Executor.
func (e *Exec) Save(ctx context.Context, table string) ([]byte, error) {
	return e.run(ctx, nil, e.Binary+"-save", "-t", table)
}

// EnsureChain implements Executor.
func (e *Exec) EnsureChain(ctx context.Context, table, chain string) error {
	_, err := e.run(ctx, nil, e.Binary, "-w", lockWait, "-t", table, "-N", chain)
	var ee *ExecError
	if errors.As(err, &ee) && strings.Contains(ee.Stderr, "already exists") {
		return nil
	}
	return err
}

// EnsureRule implements Executor.
func (e *Exec) EnsureRule(ctx context.Context, table, chain string, args ...string) error {
	check := append([]string{"-w", lockWait, "-t", table, "-C", chain}, args...)
	_, err := e.run(ctx, nil, e.Binary, check...)
	if err == nil {
		return nil
	}
	// Exit status 1 means "no such rule"; anything else is a real error.
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		return err
	}
	insert := append([]string{"-w", lockWait, "-t", table, "-I", chain}, args...)
	_, err = e.run(ctx, nil, e.Binary, insert...)
	return err
}

// ChainExists implements Executor.
func (e *Exec) ChainExists(ctx context.Context, table, chain string) (bool, error) {
	_, err := e.run(ctx, nil, e.Binary, "-w", lockWait, "-t", table, "-n", "-L", chain)
	if err == nil {
		return true, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return false, err
}

// ExecError is a failed command with what it said.
type ExecError struct {
	Command string
	Stderr  string
	Context string // for restores: the input around the failing line
	Err     error
}

func (e *ExecError) Error() string {
	msg := fmt.Sprintf("%s: %v: %s", e.Command, e.Err, e.Stderr)
	if e.Context != "" {
		msg += "\n" + e.Context
	}
	return msg
}

func (e *ExecError) Unwrap() error { return e.Err }

var failedLine = regexp.MustCompile(`line (\d+) failed`)

// withFailedLine adds the lines around the one iptables-restore rejected,
// which it names only by number.
func withFailedLine(err error, data []byte) error {
	var ee *ExecError
	if !errors.As(err, &ee) {
		return err
	}
	m := failedLine.FindStringSubmatch(ee.Stderr)
	if m == nil {
		return err
	}
	n, _ := strconv.Atoi(m[1])
	ee.Context = linesAround(data, n, 3)
	return err
}

func linesAround(data []byte, n, radius int) string {
	lines := strings.Split(string(data), "\n")
	var b strings.Builder
	for i := max(1, n-radius); i <= min(len(lines), n+radius); i++ {
		marker := "  "
		if i == n {
			marker = "> "
		}
		fmt.Fprintf(&b, "%s%d: %s\n", marker, i, lines[i-1])
	}
	return b.String()
}
