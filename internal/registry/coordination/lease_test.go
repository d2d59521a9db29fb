package coordination

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func lease(mutate func(*coordinationv1.Lease)) *coordinationv1.Lease {
	return Mutated(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, mutate)
}

func TestLeaseValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*coordinationv1.Lease)
		want   []string // "path: type"
	}{
		{"node lease", nil, nil},
		{"no holder", func(l *coordinationv1.Lease) { l.Spec = coordinationv1.LeaseSpec{} }, nil},
		{"leader election lease", func(l *coordinationv1.Lease) {
			l.Name = "kube-controller-manager"
			l.Spec.LeaseTransitions = ptr.To[int32](3)
		}, nil},
		{"dotted name", func(l *coordinationv1.Lease) { l.Name = "apiserver.example.com" }, nil},
		{"bad name", func(l *coordinationv1.Lease) { l.Name = "Node_1" }, []string{"metadata.name: Invalid value"}},
		{"no namespace", func(l *coordinationv1.Lease) { l.Namespace = "" }, []string{"metadata.namespace: Required value"}},
		{"zero duration", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](0) },
			[]string{"spec.leaseDurationSeconds: Invalid value"}},
		{"negative duration", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](-5) },
			[]string{"spec.leaseDurationSeconds: Invalid value"}},
		{"negative transitions", func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr.To[int32](-1) },
			[]string{"spec.leaseTransitions: Invalid value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := registry.NewStrategy(Lease)
			l := lease(tc.mutate)
			s.PrepareForCreate(InNamespace("kube-node-lease"), l)
			CheckErrors(t, s.Validate(InNamespace("kube-node-lease"), l), tc.want...)
			// An update is held to the same rules.
			old := lease(nil)
			s.PrepareForUpdate(InNamespace("kube-node-lease"), l, old)
			CheckErrors(t, s.ValidateUpdate(InNamespace("kube-node-lease"), l, old), tc.want...)
		})
	}
}

// Leases have no status and no generation: an update stores what the
// holder sends.
func TestLeaseUpdate(t *testing.T) {
	old := lease(nil)
	rest.FillObjectMetaSystemFields(old)
	old.ResourceVersion = "10"
	if err := rest.BeforeCreate(registry.NewStrategy(Lease), InNamespace("kube-node-lease"), old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	obj := old.DeepCopy()
	obj.Spec.HolderIdentity = ptr.To("node-2")
	obj.Spec.LeaseTransitions = ptr.To[int32](1)
	Update(t, InNamespace("kube-node-lease"), Lease, false, obj, old)
	if *obj.Spec.HolderIdentity != "node-2" || *obj.Spec.LeaseTransitions != 1 || obj.Generation != 0 {
		t.Errorf("updated lease %+v (generation %d)", obj.Spec, obj.Generation)
	}
	if registry.NewStrategy(Lease).GetResetFields() != nil {
		t.Error("leases reset fields on update")
	}
}

func TestLeaseTable(t *testing.T) {
	cases := []struct {
		name   string
		holder *string
		want   string
	}{
		{"held", ptr.To("node-1"), "node-1"},
		{"released", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := lease(func(l *coordinationv1.Lease) {
				l.Spec.HolderIdentity = tc.holder
				l.CreationTimestamp = metav1.NewTime(time.Now().Add(-48*time.Hour - time.Second))
			})
			tbl, err := Lease.Table.ConvertToTable(context.Background(), &coordinationv1.LeaseList{
				ListMeta: metav1.ListMeta{ResourceVersion: "99"}, Items: []coordinationv1.Lease{*l}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var cols []string
			for _, c := range tbl.ColumnDefinitions {
				cols = append(cols, c.Name)
			}
			if want := []string{"Name", "Holder", "Age"}; !slices.Equal(cols, want) {
				t.Errorf("columns %q, want %q", cols, want)
			}
			if len(tbl.Rows) != 1 || !slices.Equal(tbl.Rows[0].Cells, []any{"node-1", tc.want, "2d"}) {
				t.Errorf("rows %+v", tbl.Rows)
			}
			if tbl.ResourceVersion != "99" {
				t.Errorf("list resourceVersion %q", tbl.ResourceVersion)
			}
		})
	}
}
