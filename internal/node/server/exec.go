package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/creack/pty"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/svcnet/svcnet/internal/node/pods"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	ns, pod, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	remotecommand.ServeExec(lingering{w}, r, &executor{s: s, ns: ns}, pod, "", container, cmd, opts,
		4*time.Hour, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ns, pod, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	remotecommand.ServeAttach(lingering{w}, r, &attacher{s: s, ns: ns}, pod, "", container, opts,
		4*time.Hour, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

// attacher connects kubectl attach to a container's shim, which holds its
// stdin and sees its output.
type attacher struct {
	s  *Server
	ns string
}

func (at *attacher) AttachContainer(ctx context.Context, pod, _ string, container string, in io.Reader,
	out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	t, err := at.s.target(at.ns, pod, container)
	if err != nil {
		return err
	}
	if t.pid == 0 {
		return fmt.Errorf("container %s of pod %s is not running", t.container, pod)
	}
	s := runtime.AttachStreams{Stdin: in}
	if out != nil {
		s.Stdout = out
	}
	if errw != nil {
		s.Stderr = errw
	}
	if resize != nil {
		sizes := make(chan [2]uint16)
		s.Resize = sizes
		go func() {
			defer close(sizes)
			for {
				select {
				case size, ok := <-resize:
					if !ok {
						return
					}
					select {
					case sizes <- [2]uint16{size.Width, size.Height}:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	err = runtime.Attach(filepath.Join(t.dir, t.container+".run"), s)
	if errors.Is(err, runtime.ErrExited) {
		// As kubelet answers for a container that is not running:
		// kubectl run -i shows the logs instead.
		return fmt.Errorf("container %s of pod %s is not running", t.container, pod)
	}
	return err
}

// executor runs kubectl exec commands in a pod's container.
type executor struct {
	s  *Server
	ns string
}

func (e *executor) ExecInContainer(ctx context.Context, pod, _ string, container string, cmd []string, in io.Reader,
	out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	t, err := e.s.target(e.ns, pod, container)
	if err != nil {
		return err
	}
	if cmd, err = pods.ImageCommand(t.image, cmd); err != nil {
		return err
	}
	return runInPod(ctx, e.s.cfg.Self, t, cmd, in, out, errw, tty, resize)
}

// runInPod runs cmd inside a pod's namespaces with the container's
// environment, like `kubectl exec` and `svcnet exec`.
func runInPod(ctx context.Context, self string, t *execTarget, argv []string, in io.Reader, out, errw io.Writer,
	tty bool, resize <-chan remotecommand.TerminalSize) error {
	o := runtime.ExecOptions{Netns: t.netns, Hostname: t.hostname, ResolvConf: filepath.Join(t.dir, "resolv.conf"),
		HostnameFile: filepath.Join(t.dir, "hostname"),
		Hosts:        filepath.Join(t.dir, "hosts"), Argv: argv, Security: t.security, Join: t.pid}
	c := exec.CommandContext(ctx, self, o.Args()...)
	c.Env = t.env
	c.SysProcAttr = runtime.SysProcAttr(o)
	if tty {
		// A terminal session instead of a process group.
		c.SysProcAttr.Setpgid = false
		c.SysProcAttr.Setsid, c.SysProcAttr.Setctty = true, true
		f, err := pty.StartWithAttrs(c, nil, c.SysProcAttr)
		if err != nil {
			return err
		}
		defer f.Close()
		go func() {
			for size := range resize {
				_ = pty.Setsize(f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
			}
		}()
		var wg sync.WaitGroup
		if in != nil {
			go func() { _, _ = io.Copy(f, in) }()
		}
		if out != nil {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(out, f) }()
		}
		err = c.Wait()
		wg.Wait()
		return exitErr(c, err)
	}
	if in != nil {
		c.Stdin = in
	}
	c.Stdout, c.Stderr = out, errw
	return exitErr(c, c.Run())
}

// exitErr reports a non-zero exit as utilexec's ExitError, which the
// streaming protocol turns into kubectl's exit code.
func exitErr(c *exec.Cmd, err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", ee.ExitCode()), Code: ee.ExitCode()}
	}
	return err
}
