package core

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Node describes core/v1 Nodes.
var Node = &registry.Kind{
	Resource:           schema.GroupResource{Resource: "nodes"},
	Singular:           "node",
	Version:            "v1",
	New:                func() runtime.Object { return &corev1.Node{} },
	NewList:            func() runtime.Object { return &corev1.NodeList{} },
	ShortNames:         []string{"no"},
	Status:             true,
	KeepStatusOnCreate: true,
	Validate: func(_ context.Context, obj runtime.Object) field.ErrorList {
		node := obj.(*corev1.Node)
		errs := registry.ValidateMeta(node, false, registry.DNS1123Domain)
		cidrs := node.Spec.PodCIDRs
		if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
			cidrs = []string{node.Spec.PodCIDR}
		}
		for i, c := range cidrs {
			if _, err := netip.ParsePrefix(c); err != nil {
				errs = append(errs, field.Invalid(field.NewPath("spec", "podCIDRs").Index(i), c, "must be a valid CIDR"))
			}
		}
		if len(node.Spec.PodCIDRs) > 0 && node.Spec.PodCIDR != node.Spec.PodCIDRs[0] {
			errs = append(errs, field.Invalid(field.NewPath("spec", "podCIDR"), node.Spec.PodCIDR, "must match the first element of podCIDRs"))
		}
		return errs
	},
	ValidateUpdate: func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		node, oldNode := obj.(*corev1.Node), old.(*corev1.Node)
		if oldNode.Spec.PodCIDR != "" && node.Spec.PodCIDR != oldNode.Spec.PodCIDR {
			return field.ErrorList{field.Forbidden(field.NewPath("spec", "podCIDRs"), "node updates may not change podCIDR except from \"\" to valid")}
		}
		return nil
	},
	Fields: func(obj runtime.Object) fields.Set {
		return fields.Set{"spec.unschedulable": fmt.Sprint(obj.(*corev1.Node).Spec.Unschedulable)}
	},
	Table: &registry.Table{
		Columns: []registry.Column{
			{Name: "Status", Description: "The status of the node"},
			{Name: "Roles", Description: "The roles of the node"},
			registry.AgeColumn,
			{Name: "Version", Description: "Kubelet Version reported by the node."},
			{Name: "Internal-IP", Wide: true, Description: "List of internal IPs."},
			{Name: "External-IP", Wide: true, Description: "List of external IPs."},
			{Name: "OS-Image", Wide: true, Description: "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."},
			{Name: "Kernel-Version", Wide: true, Description: "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."},
			{Name: "Container-Runtime", Wide: true, Description: "Container runtime version reported by the node through runtime remote API (e.g. containerd://1.4.2)."},
		},
		Row: func(obj runtime.Object) []any {
			node := obj.(*corev1.Node)
			status := "Unknown"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					status = "NotReady"
					if c.Status == corev1.ConditionTrue {
						status = "Ready"
					}
				}
			}
			if node.Spec.Unschedulable {
				status += ",SchedulingDisabled"
			}
			var roles []string
			for k := range node.Labels {
				if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && r != "" {
					roles = append(roles, r)
				}
			}
			sort.Strings(roles)
			addr := func(t corev1.NodeAddressType) string {
				for _, a := range node.Status.Addresses {
					if a.Type == t {
						return a.Address
					}
				}
				return "<none>"
			}
			info := node.Status.NodeInfo
			return []any{status, registry.Join(roles), registry.CreationAge(node), info.KubeletVersion,
				addr(corev1.NodeInternalIP), addr(corev1.NodeExternalIP), nonEmpty(info.OSImage, "<unknown>"),
				nonEmpty(info.KernelVersion, "<unknown>"), nonEmpty(info.ContainerRuntimeVersion, "<unknown>")}
		},
	},
}
