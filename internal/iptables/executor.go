// Package iptables is svcnet's one way to program iptables: the executor
// (iptables-restore and -save, always waiting for the xtables lock), the
// backend detection, the nf_tables commit monitor, the restore-language
// tokenizer and helpers for rules in chains svcnet does not own. Every
// writer — the proxy's modes, the node agent, the edge — uses it, so one
// namespace never sees two backends or an unlocked write. Kubernetes
// keeps its pkg/util/iptables apart from the proxiers the same way.
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
	"sync"
)

// Executor is every effect an iptables writer has on the host. Exec runs
// the real binaries; iptablestest.Fake keeps tables in memory for tests.
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
	// DeleteRule deletes a rule from a chain; a rule or chain that is not
	// there is no error.
	DeleteRule(ctx context.Context, table, chain string, args ...string) error
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
	// Netns, if set, runs every command in that named network namespace
	// (through `ip netns exec`) rather than in the caller's: how tests and
	// benchmarks program a namespace they made without entering it.
	Netns string
	// EarlyCommit (nft backend, Netns empty) makes a small Restore return
	// as soon as the kernel announces its commits, not when
	// iptables-restore exits about 10 ms later; see genMonitor.
	EarlyCommit bool

	monOnce sync.Once
	mon     *genMonitor
}

// earlyMaxBytes bounds the restores EarlyCommit watches: for each object a
// commit changes, the kernel sends a notification to every subscriber.
const earlyMaxBytes = 64 << 10

// lockWait makes concurrent iptables users (kubelet, CNI plugins, the
// node agent and the proxy) queue for the xtables lock instead of failing.
const lockWait = "5"

func (e *Exec) run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmdName, cmdArgs := name, args
	if e.Netns != "" {
		cmdName, cmdArgs = "ip", append([]string{"netns", "exec", e.Netns, name}, args...)
	}
	cmd := exec.CommandContext(ctx, cmdName, cmdArgs...)
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
	if e.EarlyCommit && e.Netns == "" && len(data) <= earlyMaxBytes {
		e.monOnce.Do(func() { e.mon, _ = newGenMonitor() })
		if e.mon != nil {
			return e.restoreEarly(ctx, data)
		}
	}
	_, err := e.run(ctx, data, e.Binary+"-restore", "-w", lockWait, "--noflush")
	if err != nil {
		return withFailedLine(err, data)
	}
	return nil
}

var errExited = errors.New("exited")

// restoreEarly runs iptables-restore and returns once the kernel has
// committed every table it wrote, leaving the process to finish (and be
// reaped) in the background. A table whose section changed nothing
// commits nothing, and a failure ends the process early: either way the
// exit status decides, as without EarlyCommit.
func (e *Exec) restoreEarly(ctx context.Context, data []byte) error {
	m := e.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.subscribe(); err != nil {
		_, err := e.run(ctx, data, e.Binary+"-restore", "-w", lockWait, "--noflush")
		return withFailedLine(err, data)
	}
	defer m.unsubscribe()
	name := e.Binary + "-restore"
	args := []string{"-w", lockWait, "--noflush"}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return &ExecError{Command: name, Err: err}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var exitErr error
	exited := false
	stop := func() error {
		select {
		case exitErr = <-done:
			exited = true
			return errExited
		default:
			return ctx.Err()
		}
	}
	err := m.wait(cmd.Process.Pid, bytes.Count(data, []byte("COMMIT\n")), stop)
	if err == nil {
		go func() { <-done }() // it only has its socket left to close
		return nil
	}
	if !exited {
		exitErr = <-done
	}
	if exitErr != nil {
		// stderr is complete: Wait has returned.
		return withFailedLine(&ExecError{Command: name + " " + strings.Join(args, " "),
			Stderr: strings.TrimSpace(stderr.String()), Err: exitErr}, data)
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

// DeleteRule implements Executor.
func (e *Exec) DeleteRule(ctx context.Context, table, chain string, args ...string) error {
	for {
		_, err := e.run(ctx, nil, e.Binary, append([]string{"-w", lockWait, "-t", table, "-D", chain}, args...)...)
		var ee *exec.ExitError
		var xe *ExecError
		switch {
		case err == nil:
			continue // an older run may have inserted it twice
		case errors.As(err, &ee) && ee.ExitCode() == 1:
			return nil // no (more) such rule, or no such chain
		case errors.As(err, &xe) && strings.Contains(xe.Stderr, "does not exist"):
			return nil // the rule's jump target is gone, so is the rule
		default:
			return err
		}
	}
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

// Backend is how the iptables commands reach the kernel.
type Backend string

// The backends of iptables 1.8.
const (
	BackendNFT    Backend = "nf_tables"
	BackendLegacy Backend = "legacy"
)

// Backend asks the binary which backend it uses ("iptables v1.8.9
// (nf_tables)"). The nft one wants big syncs split, the legacy one does
// not.
func (e *Exec) Backend(ctx context.Context) (Backend, error) {
	out, err := e.run(ctx, nil, e.Binary, "--version")
	if err != nil {
		return "", err
	}
	switch v := string(out); {
	case strings.Contains(v, "(nf_tables)"):
		return BackendNFT, nil
	case strings.Contains(v, "(legacy)"):
		return BackendLegacy, nil
	default:
		return "", fmt.Errorf("%s --version: unknown backend in %q", e.Binary, strings.TrimSpace(v))
	}
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

// failedLine finds the line number in iptables-restore's complaint: the
// legacy backend says "line N failed", the nft one "Error occurred at
// line: N" (often the COMMIT that surfaced the error).
var failedLine = regexp.MustCompile(`line (\d+) failed|Error occurred at line: (\d+)`)

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
	n, _ := strconv.Atoi(m[1] + m[2])
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
