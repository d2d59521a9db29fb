package sockdiag

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// namespacesOf returns, per network namespace the processes of the
// cgroup dir and its descendants live in, one of those processes.
func namespacesOf(dir string) ([]int, error) {
	seen := map[uint64]bool{}
	var out []int
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		f, err := os.Open(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil // gone meanwhile
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
			if err != nil {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) != nil || seen[st.Ino] {
				continue
			}
			seen[st.Ino] = true
			out = append(out, pid)
		}
		return nil
	})
	return out, err
}

// inNetns runs fn on a thread in the network namespace of process pid,
// and leaves it. A thread that cannot return is not given back to the
// runtime.
func inNetns(pid int, fn func() (int, error)) (int, error) {
	type result struct {
		n   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{} // the process is gone, and its namespace with it, or not ours to care
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter the network namespace of %d: %w", pid, err)}
			return
		}
		n, ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{n, fmt.Errorf("leave the network namespace of %d: %w", pid, err)}
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		ch <- result{n, ferr}
	}()
	r := <-ch
	return r.n, r.err
}
