package endpointslice

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller/podendpoint"
)

// Labels and values that mark the slices this controller owns.
const (
	ManagedBy             = "endpointslice-controller.k8s.io"
	TriggerTimeAnnotation = corev1.EndpointsLastChangeTriggerTime
)

// Input is everything the desired slices of one Service depend on.
type Input struct {
	Service *corev1.Service
	// Pods are the pods the service's selector matches; or, for a service
	// without selector, Desired lists the endpoints directly (mirroring).
	Pods    []*corev1.Pod
	Desired []Desired
	// ManagedBy, Owner and Labels mark the slices; by default this
	// controller, the service, and the service's labels.
	ManagedBy   string
	Owner       *metav1.OwnerReference
	Labels      map[string]string
	Zone        func(node string) string
	Existing    []*discoveryv1.EndpointSlice // the slices this controller made for it
	MaxPerSlice int
	// TriggerTime is when the latest change that led here happened; it is
	// written on changed slices for network-programming-latency metrics.
	TriggerTime time.Time
}

// Plan is the writes that bring the existing slices to the desired state.
type Plan struct {
	Create, Update, Delete []*discoveryv1.EndpointSlice
}

// Empty reports whether nothing has to be written.
func (p Plan) Empty() bool { return len(p.Create)+len(p.Update)+len(p.Delete) == 0 }

// group is the endpoints of one address type that serve one set of ports.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   map[string]discoveryv1.Endpoint // by address
	order       []string
}

// Reconcile computes the plan for one Service. Existing slices are kept
// and edited in place where possible, so a change of one pod writes one
// slice.
func Reconcile(in Input) Plan {
	if in.MaxPerSlice <= 0 {
		in.MaxPerSlice = 100
	}
	groups := desiredGroups(in)
	var plan Plan
	remaining := slices.Clone(in.Existing)
	sort.Slice(remaining, func(i, j int) bool { return remaining[i].Name < remaining[j].Name })
	var keep []*discoveryv1.EndpointSlice

	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Existing slices of each wanted group; the others are free to reuse.
	mineByKey := map[string][]*discoveryv1.EndpointSlice{}
	remaining = slices.DeleteFunc(remaining, func(s *discoveryv1.EndpointSlice) bool {
		key := portsKeyFor(s.AddressType, s.Ports)
		if _, wanted := groups[key]; wanted {
			mineByKey[key] = append(mineByKey[key], s.DeepCopy())
			return true
		}
		return false
	})
	changed := map[*discoveryv1.EndpointSlice]bool{}
	for _, key := range keys {
		g := groups[key]
		mine := mineByKey[key]
		// Keep the endpoints still wanted, drop the rest.
		for _, s := range mine {
			var kept []discoveryv1.Endpoint
			for _, ep := range s.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				want, ok := g.endpoints[ep.Addresses[0]]
				if !ok {
					continue
				}
				kept = append(kept, want)
				delete(g.endpoints, ep.Addresses[0])
			}
			if !apiequality.Semantic.DeepEqual(kept, s.Endpoints) && !(len(kept) == 0 && len(s.Endpoints) == 0) {
				s.Endpoints = kept
				changed[s] = true
			}
		}
		// New endpoints go first into slices that change anyway, then into
		// any with room, then into a reused slice, then into new slices.
		sort.SliceStable(mine, func(i, j int) bool { return changed[mine[i]] && !changed[mine[j]] })
		for _, addr := range g.order {
			ep, ok := g.endpoints[addr]
			if !ok {
				continue
			}
			var target *discoveryv1.EndpointSlice
			for _, s := range mine {
				if len(s.Endpoints) < in.MaxPerSlice {
					target = s
					break
				}
			}
			if target == nil {
				target = reuse(&remaining, g.addressType)
				if target == nil {
					target = &discoveryv1.EndpointSlice{AddressType: g.addressType}
				}
				target.Ports, target.Endpoints = g.ports, nil
				mine = append(mine, target)
			}
			target.Endpoints = append(target.Endpoints, ep)
			changed[target] = true
		}
		for _, s := range mine {
			switch {
			case s.Name == "":
				plan.Create = append(plan.Create, s)
			case len(s.Endpoints) == 0:
				plan.Delete = append(plan.Delete, s)
			case changed[s]:
				plan.Update = append(plan.Update, s)
			default:
				keep = append(keep, s)
			}
		}
	}

	// A service without endpoints keeps one empty placeholder slice,
	// preferably one it has already.
	if len(plan.Create)+len(plan.Update)+len(keep) == 0 {
		placeholder := reuse(&remaining, primaryAddressType(in.Service))
		if placeholder == nil && len(plan.Delete) > 0 {
			placeholder, plan.Delete = plan.Delete[0], plan.Delete[1:]
		}
		switch {
		case placeholder == nil:
			plan.Create = append(plan.Create, &discoveryv1.EndpointSlice{AddressType: primaryAddressType(in.Service)})
		case len(placeholder.Endpoints) > 0 || len(placeholder.Ports) > 0:
			placeholder.Endpoints, placeholder.Ports = nil, nil
			plan.Update = append(plan.Update, placeholder)
		default:
			keep = append(keep, placeholder)
		}
	}
	// Slices of ports or address types no longer wanted.
	plan.Delete = append(plan.Delete, remaining...)

	// Metadata on everything written, and on kept slices whose labels drifted.
	for _, s := range plan.Create {
		setMeta(s, in, true)
	}
	for _, s := range plan.Update {
		setMeta(s, in, true)
	}
	for _, s := range keep {
		want := s.DeepCopy()
		setMeta(want, in, false)
		if !apiequality.Semantic.DeepEqual(want.Labels, s.Labels) || !apiequality.Semantic.DeepEqual(want.OwnerReferences, s.OwnerReferences) {
			plan.Update = append(plan.Update, want)
		}
	}
	return plan
}

func primaryAddressType(svc *corev1.Service) discoveryv1.AddressType {
	if len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// Desired is one endpoint that must be in a slice of the given address
// type and ports.
type Desired struct {
	AddressType discoveryv1.AddressType
	Ports       []discoveryv1.EndpointPort
	Endpoint    discoveryv1.Endpoint
}

// FromPods turns the pods of a service into desired endpoints: pods whose
// named ports resolve differently land in different slices.
func FromPods(svc *corev1.Service, pods []*corev1.Pod, zone func(string) string) []Desired {
	families := svc.Spec.IPFamilies
	if len(families) == 0 {
		families = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	pods = slices.Clone(pods)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var out []Desired
	for _, fam := range families {
		addrType := discoveryv1.AddressTypeIPv4
		if fam == corev1.IPv6Protocol {
			addrType = discoveryv1.AddressTypeIPv6
		}
		for _, pod := range pods {
			pe, ok := podendpoint.For(svc, pod, fam)
			if !ok {
				continue
			}
			out = append(out, Desired{AddressType: addrType, Ports: slicePorts(pe.Ports), Endpoint: endpoint(pe, zone)})
		}
	}
	return out
}

// desiredGroups groups the desired endpoints by address type and ports.
func desiredGroups(in Input) map[string]*group {
	desired := in.Desired
	if desired == nil {
		desired = FromPods(in.Service, in.Pods, in.Zone)
	}
	groups := map[string]*group{}
	for _, d := range desired {
		if len(d.Endpoint.Addresses) == 0 {
			continue
		}
		key := portsKeyFor(d.AddressType, d.Ports)
		g := groups[key]
		if g == nil {
			g = &group{addressType: d.AddressType, ports: d.Ports, endpoints: map[string]discoveryv1.Endpoint{}}
			groups[key] = g
		}
		addr := d.Endpoint.Addresses[0]
		if _, dup := g.endpoints[addr]; dup {
			continue
		}
		g.endpoints[addr] = d.Endpoint
		g.order = append(g.order, addr)
	}
	return groups
}

func portsKeyFor(t discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	return portsKey(ports) + "@" + string(t)
}

func endpoint(pe podendpoint.Endpoint, zone func(string) string) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{
		Addresses: []string{pe.IP.String()},
		Conditions: discoveryv1.EndpointConditions{
			Ready:       ptr.To(pe.Ready),
			Serving:     ptr.To(pe.Serving),
			Terminating: ptr.To(pe.Terminating),
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pe.Pod.Namespace, Name: pe.Pod.Name, UID: pe.Pod.UID},
	}
	if pe.Hostname != "" {
		ep.Hostname = ptr.To(pe.Hostname)
	}
	if pe.NodeName != "" {
		ep.NodeName = ptr.To(pe.NodeName)
		if zone != nil {
			if z := zone(pe.NodeName); z != "" {
				ep.Zone = ptr.To(z)
			}
		}
	}
	return ep
}

func slicePorts(ports []podendpoint.Port) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.Port),
			Protocol: ptr.To(p.Protocol), AppProtocol: p.AppProtocol})
	}
	sort.Slice(out, func(i, j int) bool { return *out[i].Name < *out[j].Name })
	return out
}

// portsKey identifies a set of ports independent of their order.
func portsKey(ports []discoveryv1.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s/%d/%s/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0),
			ptr.Deref(p.Protocol, corev1.ProtocolTCP), ptr.Deref(p.AppProtocol, "")))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func setMeta(s *discoveryv1.EndpointSlice, in Input, changed bool) {
	svc := in.Service
	if s.Name == "" && s.GenerateName == "" {
		s.GenerateName = svc.Name + "-"
	}
	s.Namespace = svc.Namespace
	extra := in.Labels
	if extra == nil {
		extra = svc.Labels
	}
	labels := map[string]string{}
	for k, v := range extra {
		labels[k] = v
	}
	labels[discoveryv1.LabelServiceName] = svc.Name
	labels[discoveryv1.LabelManagedBy] = ManagedBy
	if in.ManagedBy != "" {
		labels[discoveryv1.LabelManagedBy] = in.ManagedBy
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		labels[corev1.IsHeadlessService] = ""
	}
	s.Labels = labels
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	if in.Owner != nil {
		owner = *in.Owner
	}
	s.OwnerReferences = []metav1.OwnerReference{owner}
	if changed && !in.TriggerTime.IsZero() {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[TriggerTimeAnnotation] = in.TriggerTime.UTC().Format(time.RFC3339Nano)
	}
}

// reuse takes a slice of the address type out of the unwanted ones, to be
// rewritten instead of deleting one slice and creating another.
func reuse(unwanted *[]*discoveryv1.EndpointSlice, t discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	for i, s := range *unwanted {
		if s.AddressType == t {
			*unwanted = slices.Delete(*unwanted, i, i+1)
			return s.DeepCopy()
		}
	}
	return nil
}
