package netns

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Residents returns the processes that live in the named namespaces whose
// names start with prefix: every one of their threads is in one of them.
// A process with only some threads inside, such as a test binary or an
// agent whose goroutine entered a namespace for a moment to dial or listen,
// is a visitor, not a resident: /proc/PID/ns/net shows only the main
// thread's namespace, and killing on that alone once killed a test
// binary whose main thread happened to run such a goroutine.
func Residents(prefix string) []int {
	names, _ := List(prefix)
	inside := map[uint64]bool{}
	for _, n := range names {
		if ino, ok := inode(Path(n)); ok {
			inside[ino] = true
		}
	}
	if len(inside) == 0 {
		return nil
	}
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if residentOf(pid, inside) {
			out = append(out, pid)
		}
	}
	return out
}

// residentOf reports whether every thread of pid is in one of the
// namespaces.
func residentOf(pid int, inside map[uint64]bool) bool {
	if ino, ok := inode(fmt.Sprintf("/proc/%d/ns/net", pid)); !ok || !inside[ino] {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		ino, ok := inode(fmt.Sprintf("/proc/%d/task/%s/ns/net", pid, t.Name()))
		if ok && !inside[ino] {
			return false
		}
	}
	return true
}

func inode(path string) (uint64, bool) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0, false
	}
	return st.Ino, true
}
