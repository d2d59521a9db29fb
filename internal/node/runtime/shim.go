package runtime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// A container's process is the child of a shim (`svcnet internal
// container-shim`), as containerd keeps a shim per container: the shim
// runs in a session of its own, so the node agent can die, be restarted
// and find its containers still running, serving their Services. The
// shim writes the container's output to its log, and into its state
// directory:
//
//	env    the container's environment (NUL-separated), from the agent
//	pid    "<container pid> <shim pid> <start time, unix ns>", once started
//	exit   the exit code (128+signal when killed), once it has exited
const (
	envFile  = "env"
	pidFile  = "pid"
	exitFile = "exit"
)

// ShimOptions is what a shim runs: one container process.
type ShimOptions struct {
	StateDir string // the container start's state, created by the agent
	Log      string // its CRI log
	Stdio    Stdio
	Exec     ExecOptions
}

// Args encodes o as the arguments of `svcnet internal container-shim`.
func (o ShimOptions) Args() []string {
	args := []string{"internal", "container-shim", "--state", o.StateDir, "--log", o.Log}
	for flag, on := range map[string]bool{"--stdin": o.Stdio.Stdin, "--stdin-once": o.Stdio.StdinOnce, "--tty": o.Stdio.TTY} {
		if on {
			args = append(args, flag)
		}
	}
	return append(append(args, "--"), o.Exec.Args()...)
}

// RunShim is the shim: it starts `self internal pod-exec …` (o.Exec: the
// container, entering its pod), copies its output to the log, records
// its pid and then its exit code, and returns when it has exited. The
// container dies with the shim (its parent-death signal).
func RunShim(self string, o ShimOptions) error {
	stateDir, logPath, stdio := o.StateDir, o.Log, o.Stdio
	// The agent stops a container through its process group; the shim
	// has nothing to stop for but its container's end. Caught, not
	// ignored: an ignored signal would stay ignored in the container.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	env, err := Env(stateDir)
	if err != nil {
		return writeExit(stateDir, 128, err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return writeExit(stateDir, 128, err)
	}
	defer logf.Close()
	cmd := exec.Command(self, o.Exec.Args()...)
	// The container's environment is the container's alone: the shim
	// itself (a Go program) runs with the agent's minimal one.
	cmd.Env = env
	cmd.SysProcAttr = SysProcAttr(o.Exec)
	outputs := map[string]io.Reader{}
	var in io.WriteCloser
	var term, termSlave *os.File
	if stdio.TTY {
		// A terminal of its own, as its controlling one: output is all
		// stdout, as kubelet logs a tty container's.
		if term, termSlave, err = pty.Open(); err != nil {
			return writeExit(stateDir, 128, err)
		}
		defer term.Close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = termSlave, termSlave, termSlave
		cmd.SysProcAttr.Setpgid = false
		cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty = true, true
		outputs["stdout"] = term
		if stdio.Stdin {
			in = term
		}
	} else {
		if stdio.Stdin {
			if in, err = cmd.StdinPipe(); err != nil {
				return writeExit(stateDir, 128, err)
			}
		}
		if outputs["stdout"], err = cmd.StdoutPipe(); err != nil {
			return writeExit(stateDir, 128, err)
		}
		if outputs["stderr"], err = cmd.StderrPipe(); err != nil {
			return writeExit(stateDir, 128, err)
		}
	}
	hub := newAttachHub(stdio, in, term)
	attach, err := listenAttach(stateDir)
	if err != nil {
		return writeExit(stateDir, 128, fmt.Errorf("attach socket: %w", err))
	}
	defer attach.Close()
	go hub.serve(attach)
	if pidns := o.Exec.PID; pidns != "" && pidns != PIDOwn {
		// The container joins its pod's PID namespace: started in it, so
		// that the pid recorded is its own, not a relay's.
		if err := joinPIDNamespaceForChildren(cmd, pidns); err != nil {
			return writeExit(stateDir, 128, err)
		}
	}
	if err := cmd.Start(); err != nil {
		return writeExit(stateDir, 128, err)
	}
	if termSlave != nil {
		termSlave.Close() // the container's now
	}
	started := time.Now()
	record := fmt.Sprintf("%d %d %d", cmd.Process.Pid, os.Getpid(), started.UnixNano())
	if err := writeAtomic(filepath.Join(stateDir, pidFile), record); err != nil {
		// Untracked, it must not run: the agent would start another.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return writeExit(stateDir, 128+int(syscall.SIGKILL), fmt.Errorf("record the container's pid: %w", err))
	}
	var logMu sync.Mutex
	var wg sync.WaitGroup
	for stream, r := range outputs {
		kind := byte(frameStdout)
		if stream == "stderr" {
			kind = frameStderr
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			copyLog(logf, &logMu, stream, io.TeeReader(r, hub.output(kind)))
		}()
	}
	if stdio.TTY {
		// A terminal's output ends (EIO) only when every holder of
		// its other side has gone: the container's exit ends it.
		werr := cmd.Wait()
		wg.Wait()
		hub.closeAll()
		return writeExit(stateDir, exitCode(cmd, werr), nil)
	}
	wg.Wait() // output first, so readers of the log see it all at exit
	werr := cmd.Wait()
	hub.closeAll()
	return writeExit(stateDir, exitCode(cmd, werr), nil)
}

func writeExit(dir string, code int, cause error) error {
	err := writeAtomic(filepath.Join(dir, exitFile), strconv.Itoa(code))
	return errors.Join(cause, err)
}

func writeAtomic(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Env reads the environment the agent gave a container start.
func Env(stateDir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, envFile))
	if err != nil {
		return nil, fmt.Errorf("container environment: %w", err)
	}
	var env []string
	for kv := range strings.SplitSeq(string(data), "\x00") {
		if kv != "" {
			env = append(env, kv)
		}
	}
	return env, nil
}

// Finished returns the exit code a start recorded, if it has ended.
func Finished(stateDir string) (int, bool) { return readExit(stateDir) }

// shimRecord is a parsed pid file.
type shimRecord struct {
	pid, shim int
	started   time.Time
}

func readRecord(dir string) (shimRecord, error) {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return shimRecord{}, err
	}
	f := strings.Fields(string(data))
	if len(f) != 3 {
		return shimRecord{}, fmt.Errorf("%s: malformed pid file %q", dir, data)
	}
	pid, err1 := strconv.Atoi(f[0])
	shim, err2 := strconv.Atoi(f[1])
	ns, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return shimRecord{}, fmt.Errorf("%s: malformed pid file: %w", dir, err)
	}
	return shimRecord{pid: pid, shim: shim, started: time.Unix(0, ns)}, nil
}

// readExit returns the recorded exit code, or false while there is none.
func readExit(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, exitFile))
	if err != nil {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return code, err == nil
}
