package networking

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func serviceCIDR(cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceCIDR}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func TestServiceCIDRValidate(t *testing.T) {
	cases := []struct {
		name  string
		cidrs []string
		want  []string
	}{
		{"IPv4", []string{"10.96.0.0/12"}, nil},
		{"IPv6", []string{"fd00:10:96::/112"}, nil},
		{"dual stack", []string{"10.96.0.0/12", "fd00:10:96::/112"}, nil},
		{"dual stack, IPv6 first", []string{"fd00:10:96::/112", "10.96.0.0/12"}, nil},
		{"none", nil, []string{Inv("spec.cidrs")}},
		{"three", []string{"10.96.0.0/12", "fd00:10:96::/112", "10.0.0.0/24"}, []string{Inv("spec.cidrs")}},
		{"two IPv4", []string{"10.96.0.0/12", "10.128.0.0/12"}, []string{Inv("spec.cidrs")}},
		{"host bits set", []string{"10.96.0.1/12"}, []string{Inv("spec.cidrs[0]")}},
		{"an address", []string{"fd00::1", "10.96.0.0/12"}, []string{Inv("spec.cidrs[0]")}},
		{"not canonical", []string{"10.96.0.0/12", "fd00:10:96:0::/112"}, []string{Inv("spec.cidrs[1]")}},
		{"garbage", []string{"ten"}, []string{Inv("spec.cidrs[0]")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			CheckErrors(t, ValidateCreate(ServiceCIDR, serviceCIDR(tc.cidrs...)), tc.want...)
		})
	}
	t.Run("bad name", func(t *testing.T) {
		sc := serviceCIDR("10.96.0.0/12")
		sc.Name = "Kubernetes"
		CheckErrors(t, ValidateCreate(ServiceCIDR, sc), Inv("metadata.name"))
	})
}

func TestServiceCIDRValidateUpdate(t *testing.T) {
	cases := []struct {
		name     string
		old, new []string
		ok       bool
	}{
		{"unchanged", []string{"10.96.0.0/12"}, []string{"10.96.0.0/12"}, true},
		{"unchanged dual stack", []string{"10.96.0.0/12", "fd00::/108"}, []string{"10.96.0.0/12", "fd00::/108"}, true},
		{"IPv4 gains IPv6", []string{"10.96.0.0/12"}, []string{"10.96.0.0/12", "fd00::/108"}, true},
		{"IPv6 gains IPv4", []string{"fd00::/108"}, []string{"fd00::/108", "10.96.0.0/12"}, true},
		{"changed", []string{"10.96.0.0/12"}, []string{"10.100.0.0/16"}, false},
		{"second family added, first changed", []string{"10.96.0.0/12"}, []string{"10.100.0.0/16", "fd00::/108"}, false},
		{"second range of the same family", []string{"10.96.0.0/12"}, []string{"10.96.0.0/12", "10.100.0.0/16"}, false},
		{"family removed", []string{"10.96.0.0/12", "fd00::/108"}, []string{"10.96.0.0/12"}, false},
		{"reordered", []string{"10.96.0.0/12", "fd00::/108"}, []string{"fd00::/108", "10.96.0.0/12"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateUpdate(ServiceCIDR, serviceCIDR(tc.new...), serviceCIDR(tc.old...))
			if ok := len(errs) == 0; ok != tc.ok {
				t.Errorf("accepted %v, want %v: %v", ok, tc.ok, errs)
			}
		})
	}
}

func TestServiceCIDRStatusAndGeneration(t *testing.T) {
	cond := []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue, Reason: "Ready",
		LastTransitionTime: metav1.Now()}}
	old := serviceCIDR("10.96.0.0/12")
	old.Status.Conditions = cond
	Create(t, InNamespace(metav1.NamespaceNone), ServiceCIDR, old)
	if old.Generation != 1 || len(old.Status.Conditions) != 0 {
		t.Fatalf("created with generation %d and status %+v", old.Generation, old.Status)
	}
	old.ResourceVersion = "2"

	obj := old.DeepCopy()
	obj.Spec.CIDRs = append(obj.Spec.CIDRs, "fd00::/108")
	obj.Status.Conditions = cond
	Update(t, InNamespace(metav1.NamespaceNone), ServiceCIDR, false, obj, old)
	if obj.Generation != 2 || len(obj.Status.Conditions) != 0 {
		t.Errorf("after adding a family: generation %d, status %+v", obj.Generation, obj.Status)
	}

	obj = old.DeepCopy()
	obj.Status.Conditions = cond
	Update(t, InNamespace(metav1.NamespaceNone), ServiceCIDR, true, obj, old)
	if obj.Generation != 1 || len(obj.Status.Conditions) != 1 {
		t.Errorf("after a status update: generation %d, status %+v", obj.Generation, obj.Status)
	}
}

func TestServiceCIDRTable(t *testing.T) {
	sc := serviceCIDR("10.96.0.0/12", "fd00::/108")
	sc.CreationTimestamp = TwoDaysAgo()
	cols, cells := TableOf(t, ServiceCIDR, sc)
	if want := []string{"Name", "CIDRs", "Age"}; !slices.Equal(cols, want) {
		t.Errorf("columns %q, want %q", cols, want)
	}
	if want := []any{"kubernetes", "10.96.0.0/12,fd00::/108", "2d"}; !slices.Equal(cells, want) {
		t.Errorf("row %q, want %q", cells, want)
	}
}

func ipAddress(name string, mutate func(*networkingv1.IPAddress)) *networkingv1.IPAddress {
	return Mutated(&networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Resource: "services", Namespace: "default", Name: "kubernetes"}},
	}, mutate)
}

func TestIPAddressValidate(t *testing.T) {
	cases := []struct {
		name   string
		ip     string
		mutate func(*networkingv1.IPAddress)
		want   []string
	}{
		{"IPv4", "10.96.0.1", nil, nil},
		{"IPv6", "fd00::1", nil, nil},
		{"leading zero", "10.96.0.01", nil, []string{Inv("metadata.name")}},
		{"IPv6 not compressed", "fd00:0:0:0:0:0:0:1", nil, []string{Inv("metadata.name")}},
		{"IPv6 upper case", "FD00::1", nil, []string{Inv("metadata.name")}},
		{"IPv4-mapped IPv6", "::ffff:10.96.0.1", nil, []string{Inv("metadata.name")}},
		{"with a zone", "fe80::1%eth0", nil, []string{Inv("metadata.name")}},
		{"not an address", "kubernetes", nil, []string{Inv("metadata.name")}},
		{"generated name", "10.96.0.1", func(ip *networkingv1.IPAddress) { ip.GenerateName = "ip-" }, []string{Inv("metadata.generateName")}},
		{"parent of a group", "10.96.0.1", func(ip *networkingv1.IPAddress) {
			ip.Spec.ParentRef = &networkingv1.ParentReference{Group: "gateway.networking.k8s.io", Resource: "gateways", Namespace: "default", Name: "gw"}
		}, nil},
		{"no parent", "10.96.0.1", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef = nil }, []string{Req("spec.parentRef")}},
		{"parent without resource and name", "10.96.0.1", func(ip *networkingv1.IPAddress) {
			ip.Spec.ParentRef = &networkingv1.ParentReference{Namespace: "default"}
		}, []string{Req("spec.parentRef.resource"), Req("spec.parentRef.name")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			CheckErrors(t, ValidateCreate(IPAddress, ipAddress(tc.ip, tc.mutate)), tc.want...)
		})
	}
}

func TestIPAddressValidateUpdate(t *testing.T) {
	fixture := func(mutate func(*networkingv1.IPAddress)) *networkingv1.IPAddress {
		return ipAddress("10.96.0.1", mutate)
	}
	RunUpdate(t, IPAddress, fixture, []Case[*networkingv1.IPAddress]{
		{"labels", func(ip *networkingv1.IPAddress) {
			ip.Labels = map[string]string{networkingv1.LabelIPAddressFamily: "IPv4"}
		}, nil},
		{"other parent", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef.Name = "web" }, []string{Inv("spec.parentRef")}},
		{"parent removed", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef = nil }, []string{Req("spec.parentRef"), Inv("spec.parentRef")}},
	})
}

func TestIPAddressTable(t *testing.T) {
	cases := []struct {
		name   string
		parent *networkingv1.ParentReference
		want   string
	}{
		{"service", &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "kubernetes"}, "services/default/kubernetes"},
		{"cluster-scoped parent", &networkingv1.ParentReference{Group: "example.com", Resource: "pools", Name: "p1"}, "pools/p1"},
		{"no parent", nil, "<none>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ip := ipAddress("10.96.0.1", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef = tc.parent })
			ip.CreationTimestamp = TwoDaysAgo()
			cols, cells := TableOf(t, IPAddress, ip)
			if want := []string{"Name", "ParentRef", "Age"}; !slices.Equal(cols, want) {
				t.Errorf("columns %q, want %q", cols, want)
			}
			if want := []any{"10.96.0.1", tc.want, "2d"}; !slices.Equal(cells, want) {
				t.Errorf("row %q, want %q", cells, want)
			}
		})
	}
}
