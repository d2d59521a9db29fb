package pods

import (
	"context"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/podstate"
	"github.com/svcnet/svcnet/internal/node/prober"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

// execIn runs commands in c's pod with the environment of its current
// start (exec probes and hooks).
func (p *Pod) execIn(c *Container) prober.Exec {
	opts := runtime.ExecOptions{Netns: p.netns, Hostname: Hostname(p.pod),
		ResolvConf: filepath.Join(p.dir, "resolv.conf"), Hosts: filepath.Join(p.dir, "hosts"),
		HostnameFile: filepath.Join(p.dir, "hostname")}
	sec, err := p.security(c)
	if err == nil {
		err = p.namespaces(&opts)
	}
	env, self, image := c.env, p.rt.Self, c.Spec.Image
	if c.Running() && c.proc != nil {
		opts.Join = c.proc.Pid()
	}
	return func(cmd []string, timeout time.Duration) ([]byte, int, error) {
		if err != nil {
			return nil, -1, err
		}
		argv, err := ImageCommand(image, cmd)
		if err != nil {
			return nil, -1, err
		}
		o := opts
		o.Security = sec
		o.Argv = argv
		return runtime.RunOnce(self, o, env, timeout)
	}
}

// startProbes runs c's probes for its current start until it ends; their
// verdicts come out of Probes.
func (p *Pod) startProbes(ctx context.Context, c *Container) {
	pctx, cancel := context.WithCancel(ctx)
	c.stopProbe = cancel
	exec := p.execIn(c) // exec probes run with the container's environment
	if c.NeedsListening() {
		go prober.WaitListening(pctx, c.Spec.Name, podstate.TCPPorts(&c.Spec), p.ip, c.Gen, prober.ListenWait, p.probes)
	}
	for kind, pb := range map[podstate.ProbeKind]*corev1.Probe{podstate.Readiness: c.Spec.ReadinessProbe,
		podstate.Liveness: c.Spec.LivenessProbe, podstate.Startup: c.Spec.StartupProbe} {
		if pb == nil {
			continue
		}
		pr := &prober.Prober{Kind: kind, Probe: pb, Container: &c.Spec, PodIP: p.ip, Exec: exec, Gen: c.Gen, Out: p.probes}
		if kind != podstate.Startup && c.Spec.StartupProbe != nil {
			// Readiness and liveness wait for the startup probe.
			state := c.Container
			go func() {
				for !state.StartedOK() {
					select {
					case <-pctx.Done():
						return
					case <-time.After(200 * time.Millisecond):
					}
				}
				pr.Run(pctx)
			}()
			continue
		}
		go pr.Run(pctx)
	}
}
