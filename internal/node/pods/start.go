package pods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/images"
	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/node/confine"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

// Start launches the container named name, or records in its state why
// it cannot start.
func (p *Pod) Start(ctx context.Context, name string) {
	c := p.Container(name)
	waiting := func(reason, msg string, retry time.Duration) { c.Waiting(reason, msg, time.Now().Add(retry)) }
	l, reason, err := p.prepare(ctx, c)
	switch {
	case reason == "ErrImagePull":
		msg := err.Error()
		if c.State.Waiting == nil || c.State.Waiting.Reason != "ErrImagePull" {
			p.event(corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", c.Spec.Image, msg)
		}
		waiting("ErrImagePull", msg, 30*time.Second)
		p.Publish()
		return
	case err != nil:
		if c.State.Waiting == nil || c.State.Waiting.Reason != reason {
			p.event(corev1.EventTypeWarning, "Failed", "Error: %v", err)
		}
		waiting(reason, err.Error(), 10*time.Second)
		return
	}
	if err := p.makeDirs(); err != nil {
		waiting("RunContainerError", err.Error(), 10*time.Second)
		return
	}
	logPath := p.logPath(c)
	if c.Gen > 0 {
		_ = os.Rename(logPath, filepath.Join(p.dir, c.Spec.Name+".previous.log"))
	}
	// What a restarted agent needs to adopt this start, written before
	// it: the shim's state directory only ever describes this start.
	run := p.runDir(c)
	runtime.Kill(run) // a shim an earlier run started as it died, unrecorded
	meta, err := json.Marshal(runMeta{Gen: c.Gen + 1})
	if err == nil {
		err = errors.Join(os.RemoveAll(run), os.MkdirAll(run, 0o700))
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(run, "meta.json"), meta, 0o600)
	}
	if err != nil {
		waiting("RunContainerError", err.Error(), 10*time.Second)
		return
	}
	exec := runtime.ExecOptions{Netns: p.netns, Hostname: Hostname(p.pod),
		ResolvConf: filepath.Join(p.dir, "resolv.conf"), Hosts: filepath.Join(p.dir, "hosts"),
		HostnameFile: filepath.Join(p.dir, "hostname"),
		Dir:          l.dir, Argv: l.argv, Security: l.sec}
	if err := p.namespaces(&exec); err != nil {
		waiting("RunContainerError", err.Error(), 10*time.Second)
		return
	}
	if err := p.makeCgroups(c); err != nil {
		waiting("RunContainerError", err.Error(), 10*time.Second)
		return
	}
	exec.Cgroups = c.cgroup.Procs()
	proc, err := runtime.Start(p.rt.Self, runtime.Spec{
		Exec: exec,
		Env:  l.env, Log: logPath, StateDir: run,
		Stdio: runtime.Stdio{Stdin: c.Spec.Stdin, StdinOnce: c.Spec.StdinOnce, TTY: c.Spec.TTY},
	})
	if err != nil {
		_ = c.cgroup.Remove()
		waiting("RunContainerError", err.Error(), 10*time.Second)
		return
	}
	c.Started(proc.Started)
	c.ImageID = l.imageID
	p.follow(ctx, c, proc, l.env)
	p.event(corev1.EventTypeNormal, "Started", "Started container %s", c.Spec.Name)
	p.postStart(ctx, c)
}

// runMeta is what the agent keeps of a container start for adoption
// (its environment is the runtime's).
type runMeta struct {
	Gen int `json:"gen"`
}

func (p *Pod) runDir(c *Container) string  { return filepath.Join(p.dir, c.Spec.Name+".run") }
func (p *Pod) logPath(c *Container) string { return filepath.Join(p.dir, c.Spec.Name+".log") }

// follow takes a started (or adopted) process into the pod: its exit
// becomes an Exit, its probes run.
func (p *Pod) follow(ctx context.Context, c *Container, proc *runtime.Process, env []string) {
	c.proc, c.logPath, c.env = proc, p.logPath(c), env
	gen := c.Gen
	go func() {
		<-proc.Done()
		p.exits <- Exit{c: c, gen: gen, code: proc.ExitCode(), at: proc.Started}
	}()
	p.Publish()
	p.startProbes(ctx, c)
}

// adopt takes over the containers an earlier run of the agent started
// and that outlived it (their shims keep them), instead of starting them
// again: a restarted agent does not interrupt its pods. Containers that
// ended meanwhile report their exit as if it had just happened.
func (p *Pod) adopt(ctx context.Context) {
	for _, c := range p.containers {
		run := p.runDir(c)
		data, err := os.ReadFile(filepath.Join(run, "meta.json"))
		if err != nil {
			continue
		}
		var meta runMeta
		if json.Unmarshal(data, &meta) != nil {
			continue
		}
		proc, err := runtime.Adopt(run)
		if err != nil {
			continue
		}
		env, _ := runtime.Env(run)
		var was corev1.ContainerStatus
		for _, st := range slices.Concat(p.pod.Status.InitContainerStatuses, p.pod.Status.ContainerStatuses) {
			if st.Name == c.Spec.Name {
				was = st
			}
		}
		c.Adopted(proc.Started, meta.Gen, was)
		c.cgroup = p.rt.Cgroups.Find(p.cgroupName(c))
		if _, stored, err := p.image(c.Spec.Image); err == nil && stored != nil {
			c.ImageID = stored.ID
		}
		if code, done := runtime.Finished(run); done {
			// It ended while the agent was away: report the end, never a
			// run that is not there (a finished init container stays
			// finished; a crashed one backs off).
			c.env = env
			c.exited(code, proc.Started)
			if c.ShouldRestart(p.pod.Spec.RestartPolicy) {
				c.ScheduleRestart(p.pod.Name, time.Now())
			}
			continue
		}
		p.follow(ctx, c, proc, env)
		p.log().Info("adopted a running container", "container", c.Spec.Name, "pid", proc.Pid())
	}
}

// argv is the command of c: the image's entrypoint unless the container
// sets command, then args.
func (p *Pod) argv(img images.Image, c *Container) ([]string, error) {
	if img.Name == images.Host {
		if len(c.Spec.Command) == 0 {
			return nil, fmt.Errorf("image %q runs the host executable named by command, and command is empty", images.Host)
		}
		return append(append([]string{}, c.Spec.Command...), c.Spec.Args...), nil
	}
	if img.Argv != nil {
		return img.Argv(c.Spec.Command, c.Spec.Args)
	}
	if len(c.Spec.Command) > 0 {
		return append(append([]string{}, c.Spec.Command...), c.Spec.Args...), nil
	}
	args := c.Spec.Args
	if len(args) == 0 {
		args = img.Cmd
	}
	return append(append([]string{p.rt.Self}, img.Entrypoint...), args...), nil
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return m
}

// security is how c is confined (the same for its start, its probes and
// hooks, and exec into it).
func (p *Pod) security(c *Container) (*runtime.Security, error) {
	_, stored, _ := p.image(c.Spec.Image)
	sec, _, err := p.confinement(c, stored)
	return sec, err
}

// confinement is how c is confined, given its image from the node's
// store (nil: a built-in image), and the home directory its user has in
// the image.
func (p *Pod) confinement(c *Container, stored *imagestore.Image) (*runtime.Security, string, error) {
	if stored == nil {
		sec, err := confine.For(p.pod, &c.Spec, p.dir, p.user)
		if err != nil {
			return nil, "", err
		}
		// The image's programs are svcnet itself, where the image has them.
		if img, ok := images.Lookup(c.Spec.Image); ok {
			for _, prog := range img.Programs {
				sec.Mounts = append(sec.Mounts, runtime.Mount{Source: p.rt.Self, Target: prog, ReadOnly: true})
			}
		}
		return &sec, "", nil
	}
	var user *confine.ImageUser
	if !confine.RunAsUser(p.pod, &c.Spec) {
		var err error
		if user, err = imageUser(stored); err != nil {
			return nil, "", err
		}
	}
	sec, err := confine.ForImage(p.pod, &c.Spec, p.dir, p.user, user)
	if err != nil {
		return nil, "", err
	}
	for _, l := range stored.Layers {
		sec.Layers = append(sec.Layers, l.Dir)
	}
	// The pod's own user stands for the image's root (OwnsRoot): root's
	// home, as the program expects.
	homeUID := int64(sec.UID)
	if sec.OwnsRoot {
		homeUID = 0
	}
	return &sec, imageHome(stored, homeUID), nil
}

// makeDirs makes the pod's directory, its hostPath volumes that ask to be
// made (and checks the typed ones), and its emptyDir volumes, writable
// by every user as kubelet makes them: containers may run as anyone.
func (p *Pod) makeDirs() error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	if err := prepareHostPaths(p.pod); err != nil {
		return err
	}
	for _, d := range confine.EmptyDirs(p.pod, p.dir) {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o777); err != nil { // past the umask
			return err
		}
	}
	return nil
}

// ImageCommand is how a command run in a container of image (exec,
// probes, hooks) is started: as the image's own programs would run it.
func ImageCommand(image string, cmd []string) ([]string, error) {
	if img, ok := images.Lookup(image); ok && img.Argv != nil {
		return img.Argv(cmd, nil)
	}
	return cmd, nil
}
