package pods

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/runtime"
)

// initRun is the state directory of the pod's pod-init (a start of the
// runtime's, as a container's is; `*.run`, so that what kills a pod's
// containers kills it too).
const initRun = "pod-init.run"

// initUser is pod-init's user and group, as the pause image's: no pod's
// default user, so that no container's process may trace it.
const initUser = 65535

// nsDir holds the pod's IPC and UTS namespaces and its shared memory
// (runtime.NewPodNamespaces).
func (p *Pod) nsDir() string { return filepath.Join(p.dir, "ns") }

// namespaces sets the pod's namespaces in o, for a container of the pod
// or a process run in one: its IPC (unless hostIPC) and UTS namespaces;
// a PID namespace of its own, the pod's shared one, or the node's
// (hostPID).
func (p *Pod) namespaces(o *runtime.ExecOptions) error {
	o.UTS = filepath.Join(p.nsDir(), runtime.UTSFile)
	if !p.pod.Spec.HostIPC {
		o.IPC = filepath.Join(p.nsDir(), runtime.IPCFile)
		o.Shm = filepath.Join(p.nsDir(), runtime.ShmDir)
	}
	switch {
	case p.pod.Spec.HostPID:
		o.PID = ""
	case sharesPIDs(p.pod):
		if p.init == nil {
			return errors.New("the pod's shared PID namespace has no pod-init")
		}
		o.PID = runtime.PIDNamespaceOf(p.init.Pid())
	default:
		o.PID = runtime.PIDOwn
	}
	return nil
}

func sharesPIDs(pod *corev1.Pod) bool {
	return pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace && !pod.Spec.HostPID
}

// ensureInit keeps a pod that shares its PID namespace with its
// pod-init, process 1 there: adopted from an earlier run of the agent,
// or started. When it ends, the kernel ends every process of the
// namespace: the containers restart in a new one, as they do when a
// pod's sandbox is recreated.
func (p *Pod) ensureInit() error {
	if !sharesPIDs(p.pod) {
		return nil
	}
	if p.init != nil {
		select {
		case <-p.init.Done():
		default:
			return nil
		}
	}
	run := filepath.Join(p.dir, initRun)
	if p.init == nil {
		if proc, err := runtime.Adopt(run); err == nil {
			if _, ended := runtime.Finished(run); !ended {
				p.init = proc
				return nil
			}
		}
	}
	runtime.Kill(run)
	if err := errors.Join(os.RemoveAll(run), os.MkdirAll(run, 0o700)); err != nil {
		return err
	}
	proc, err := runtime.Start(p.rt.Self, runtime.Spec{
		Exec: runtime.ExecOptions{Netns: p.netns, PID: runtime.PIDOwn,
			Security: &runtime.Security{UID: initUser, GID: initUser, NoNewPrivs: true},
			Argv:     []string{p.rt.Self, "internal", "pod-init"}},
		Log: filepath.Join(run, "log"), StateDir: run,
	})
	if err != nil {
		return fmt.Errorf("the pod's shared PID namespace: %w", err)
	}
	p.init = proc
	return nil
}

// stopInitGrace: pod-init ends on SIGTERM at once.
const stopInitGrace = 2 * time.Second

// stopInit ends the pod's pod-init once its containers have stopped.
func (p *Pod) stopInit() {
	if p.init != nil {
		p.init.Stop(stopInitGrace)
	}
}

// userFile records the pod's default user in its directory: the pod
// keeps it across restarts of the agent (its emptyDir files are the
// user's).
const userFile = "user"

// claimUser gives the pod its default user: the one it recorded, or a
// new one from the machine's.
func (p *Pod) claimUser() error {
	if p.rt.Users == nil {
		return errors.New("the node has no pod users to give")
	}
	var want int64
	if b, err := os.ReadFile(filepath.Join(p.dir, userFile)); err == nil {
		want, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	uid, err := p.rt.Users.Claim(p.dir, string(p.uid), want)
	if err != nil {
		return fmt.Errorf("the pod's user: %w", err)
	}
	if uid != want {
		if err := os.WriteFile(filepath.Join(p.dir, userFile), []byte(strconv.FormatInt(uid, 10)), 0o644); err != nil {
			return err
		}
	}
	p.user = uid
	return nil
}
