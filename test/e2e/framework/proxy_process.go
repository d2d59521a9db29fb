package framework

import (
	"bytes"
	"os/exec"
	"sync"
	"testing"
)

// StartProcessIn runs `svcnet args...` inside ns (through `ip netns exec`,
// which execs svcnet in place, so signals and the parent-death signal
// reach svcnet itself) until Stop or the end of the test.
func StartProcessIn(t testing.TB, ns *Netns, args ...string) *Process {
	t.Helper()
	return StartProcessInWatched(t, ns, nil, args...)
}

// StartProcessInWatched is StartProcessIn with onLine called for every
// line the process writes, as it arrives: benchmarks time events by
// the log lines that report them.
func StartProcessInWatched(t testing.TB, ns *Netns, onLine func(line string), args ...string) *Process {
	t.Helper()
	return startCommand(t, exec.Command("ip", append([]string{"netns", "exec", ns.Name, Binary(t)}, args...)...), onLine)
}

// StartProcessInNetnsOnly is StartProcessInWatched with only the network
// namespace entered (nsenter --net): the process sees the machine's
// mounts, /sys/fs/cgroup among them, which `ip netns exec` hides behind
// a sysfs of its own (the ebpf mode attaches to a cgroup there).
func StartProcessInNetnsOnly(t testing.TB, ns *Netns, onLine func(line string), args ...string) *Process {
	t.Helper()
	return startCommand(t, exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns.Name, Binary(t)}, args...)...), onLine)
}

// StartCommandIn runs another program (bin) inside ns the same way:
// the differential tests run kube-proxy beside `svcnet proxy`.
func StartCommandIn(t testing.TB, ns *Netns, bin string, args ...string) *Process {
	t.Helper()
	return StartCommandInWatched(t, ns, nil, bin, args...)
}

// StartCommandInWatched is StartCommandIn with onLine called for every
// line the program writes, as it arrives.
func StartCommandInWatched(t testing.TB, ns *Netns, onLine func(line string), bin string, args ...string) *Process {
	t.Helper()
	return startCommand(t, exec.Command("ip", append([]string{"netns", "exec", ns.Name, bin}, args...)...), onLine)
}

// lineWriter passes writes on and hands out complete lines.
type lineWriter struct {
	mu     sync.Mutex
	next   interface{ Write([]byte) (int, error) }
	onLine func(string)
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.onLine(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return l.next.Write(p)
}
