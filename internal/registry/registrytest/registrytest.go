// Package registrytest runs a kind's strategy as the API server does,
// without one, for the registry's table tests: defaults, then
// PrepareForCreate/Update and Validate/ValidateUpdate in the request's
// namespace, and compares the field errors and table rows they give.
package registrytest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/registry"
)

// Error descriptions as CheckErrors compares them: "path: type".
func Inv(path string) string    { return path + ": " + field.ErrorTypeInvalid.String() }
func Req(path string) string    { return path + ": " + field.ErrorTypeRequired.String() }
func Unsup(path string) string  { return path + ": " + field.ErrorTypeNotSupported.String() }
func Forbid(path string) string { return path + ": " + field.ErrorTypeForbidden.String() }

// CheckErrors asserts that errs are exactly want, in any order: all
// "path: type", or all bare paths when any error type will do; and that
// no error is reported twice.
func CheckErrors(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	pathsOnly := len(want) > 0 && !strings.Contains(want[0], ": ")
	var got []string
	seen := map[string]bool{}
	for _, e := range errs {
		if seen[e.Error()] {
			t.Errorf("error reported twice: %v", e)
		}
		seen[e.Error()] = true
		if pathsOnly {
			got = append(got, e.Field)
		} else {
			got = append(got, e.Field+": "+e.Type.String())
		}
	}
	want = slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("errors %q, want %q (%v)", got, want, errs.ToAggregate())
	}
}

// Ctx is a request's context for kind k: in namespace default when the
// kind is namespaced.
func Ctx(k *registry.Kind) context.Context {
	if k.Namespaced {
		return InNamespace("default")
	}
	return InNamespace(metav1.NamespaceNone)
}

// InNamespace is a request's context in namespace ns.
func InNamespace(ns string) context.Context {
	return genericapirequest.WithNamespace(context.Background(), ns)
}

// ValidateCreate defaults obj and runs k's create strategy on it.
func ValidateCreate(k *registry.Kind, obj runtime.Object) field.ErrorList {
	apis.Scheme.Default(obj)
	s := registry.NewStrategy(k)
	s.PrepareForCreate(Ctx(k), obj)
	return s.Validate(Ctx(k), obj)
}

// ValidateUpdate defaults obj and runs k's update strategy on it.
func ValidateUpdate(k *registry.Kind, obj, old runtime.Object) field.ErrorList {
	apis.Scheme.Default(obj)
	s := registry.NewStrategy(k)
	s.PrepareForUpdate(Ctx(k), obj, old)
	return s.ValidateUpdate(Ctx(k), obj, old)
}

// TableOf converts obj and returns its column names (wide ones marked
// with a trailing "*") and its single row.
func TableOf(t *testing.T, k *registry.Kind, obj runtime.Object) ([]string, []any) {
	t.Helper()
	tbl, err := k.Table.ConvertToTable(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		name := c.Name
		if c.Priority > 0 {
			name += "*"
		}
		cols = append(cols, name)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("%d rows", len(tbl.Rows))
	}
	return cols, tbl.Rows[0].Cells
}

// CheckRow compares a table's columns and row with what is wanted.
func CheckRow(t *testing.T, cols []string, row []any, wantCols []string, want []any) {
	t.Helper()
	if !slices.Equal(cols, wantCols) {
		t.Errorf("columns %q, want %q", cols, wantCols)
	}
	if len(row) != len(want) {
		t.Fatalf("row %v, want %v", row, want)
	}
	for i := range want {
		if row[i] != want[i] {
			t.Errorf("%s = %#v, want %#v", cols[i], row[i], want[i])
		}
	}
}

// Create prepares obj in ctx as the API server prepares a new object
// before storing it: its system fields (UID, creation time) filled, then
// k's PrepareForCreate and Validate. It fails the test on an error.
func Create(t *testing.T, ctx context.Context, k *registry.Kind, obj runtime.Object) {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	rest.FillObjectMetaSystemFields(m)
	if err := rest.BeforeCreate(registry.NewStrategy(k), ctx, obj); err != nil {
		t.Fatalf("create: %v", err)
	}
}

// Update prepares obj, the update of old, in ctx as the API server
// prepares it before storing it: through k's status subresource with
// status, else through the resource itself. It fails the test on an
// error.
func Update(t *testing.T, ctx context.Context, k *registry.Kind, status bool, obj, old runtime.Object) {
	t.Helper()
	var s rest.RESTUpdateStrategy = registry.NewStrategy(k)
	if status {
		s = &registry.StatusStrategy{Strategy: registry.NewStrategy(k)}
	}
	if err := rest.BeforeUpdate(s, ctx, obj, old); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// TwoDaysAgo is a creation time that tables show as "2d".
func TwoDaysAgo() metav1.Time { return metav1.NewTime(time.Now().Add(-48*time.Hour - time.Second)) }

// Mutated applies mutate, when there is one, to obj and returns obj. The
// table tests build one valid object per kind and let each case change
// it: a nil mutate is the valid object itself.
func Mutated[T runtime.Object](obj T, mutate func(T)) T {
	if mutate != nil {
		mutate(obj)
	}
	return obj
}

// Case is a row of a validation table: how the case changes a valid
// object and the errors it must then give, as CheckErrors takes them. It
// is a plain struct (an alias), so that tables keep the positional rows
// of the anonymous structs they replace.
type Case[T runtime.Object] = struct {
	Name   string
	Mutate func(T)
	Want   []string
}

// RunCreate runs each case as a subtest: fixture builds the object the
// case changes, and k's create strategy must give exactly the case's
// errors.
func RunCreate[T runtime.Object](t *testing.T, k *registry.Kind, fixture func(func(T)) T, cases []Case[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			CheckErrors(t, ValidateCreate(k, fixture(tc.Mutate)), tc.Want...)
		})
	}
}

// RunUpdate runs each case as a subtest: the case changes a copy of the
// defaulted fixture, and k's update strategy, from the fixture to that
// copy, must give exactly the case's errors.
func RunUpdate[T runtime.Object](t *testing.T, k *registry.Kind, fixture func(func(T)) T, cases []Case[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			old := fixture(nil)
			apis.Scheme.Default(old)
			obj := Mutated(old.DeepCopyObject().(T), tc.Mutate)
			CheckErrors(t, ValidateUpdate(k, obj, old), tc.Want...)
		})
	}
}

// ExpectError checks err against what a case expects: an error that
// check accepts, or, for a case without a check, none. It reports
// whether the case expected an error, when there is nothing more to
// check.
func ExpectError(t *testing.T, err error, check func(error) bool) bool {
	t.Helper()
	if check != nil {
		if !check(err) {
			t.Fatalf("error %v", err)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
