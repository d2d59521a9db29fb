package pods

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/cgroups"
)

// limits are c's resource limits as the kernel enforces them.
func limits(c *corev1.Container) cgroups.Limits {
	var l cgroups.Limits
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		l.MemoryBytes = q.Value()
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		l.CPUMilli = q.MilliValue()
	}
	return l
}

// cgroupName names c's cgroups: svcnet-<pod UID>-<container>.
func (p *Pod) cgroupName(c *Container) string {
	return p.cgroupPrefix() + c.Spec.Name
}

// cgroupPrefix starts the names of every cgroup of the pod.
func (p *Pod) cgroupPrefix() string { return "svcnet-" + string(p.uid) + "-" }

// makeCgroups gives c's start cgroups enforcing its limits, and says on
// the pod which the machine cannot enforce.
func (p *Pod) makeCgroups(c *Container) error {
	c.cgroup = cgroups.Group{}
	l := limits(&c.Spec)
	if l == (cgroups.Limits{}) && !p.rt.Cgroups.PerContainer() {
		return nil
	}
	g, unenforced, err := p.rt.Cgroups.Create(p.cgroupName(c), l)
	if err != nil {
		return err
	}
	if len(unenforced) > 0 && !c.warnedLimits {
		c.warnedLimits = true
		p.event(corev1.EventTypeWarning, "LimitNotEnforced",
			"Container %s: %s limit not enforced: no cgroup v1 %s controller svcnet may use (svcnet does not use cgroup v2 yet)",
			c.Spec.Name, strings.Join(unenforced, " and "), strings.Join(unenforced, " or "))
	}
	c.cgroup = g
	return nil
}
