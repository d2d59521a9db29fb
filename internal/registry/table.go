package registry

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Column is one column of a kind's `kubectl get` output.
type Column struct {
	Name        string
	Type        string // "string", "integer", "date" …
	Description string
	// Wide columns are shown only with -o wide.
	Wide bool
}

// Table prints objects of one kind as the server-side tables kubectl shows.
// The first column is always NAME and the row function gives the others.
type Table struct {
	Columns []Column
	Row     func(obj runtime.Object) []any
}

// ConvertToTable implements rest.TableConvertor.
func (t *Table) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	noHeaders := false
	if opt, ok := tableOptions.(*metav1.TableOptions); ok && opt != nil {
		noHeaders = opt.NoHeaders
	}
	if !noHeaders {
		table.ColumnDefinitions = append(table.ColumnDefinitions, metav1.TableColumnDefinition{
			Name: "Name", Type: "string", Format: "name",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["name"],
		})
		for _, c := range t.Columns {
			def := metav1.TableColumnDefinition{Name: c.Name, Type: c.Type, Description: c.Description}
			if def.Type == "" {
				def.Type = "string"
			}
			if c.Wide {
				def.Priority = 1
			}
			table.ColumnDefinitions = append(table.ColumnDefinitions, def)
		}
	}
	addRow := func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		cells := append([]any{m.GetName()}, t.Row(o)...)
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: o}})
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, addRow); err != nil {
			return nil, fmt.Errorf("print list: %w", err)
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
	} else {
		if err := addRow(obj); err != nil {
			return nil, err
		}
		if m, err := meta.Accessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	return table, nil
}

// Age prints the time since t the way kubectl does ("5m", "2d3h").
func Age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// AgeColumn is the AGE column every kind ends with.
var AgeColumn = Column{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}

// Join joins values with commas, printing "<none>" for none.
func Join(values []string) string {
	if len(values) == 0 {
		return "<none>"
	}
	return strings.Join(values, ",")
}

// CreationAge is the age of obj.
func CreationAge(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "<unknown>"
	}
	return Age(m.GetCreationTimestamp())
}

// Abbrev collects the values of a column that kubectl abbreviates, as it
// does endpoints: it keeps the first three and counts the rest.
type Abbrev struct {
	first []string
	n     int
}

// Add adds v to the column.
func (a *Abbrev) Add(v string) {
	a.n++
	if len(a.first) < 3 {
		a.first = append(a.first, v)
	}
}

// String prints "a,b,c + 2 more...", or none when nothing was added.
func (a *Abbrev) String(none string) string {
	switch {
	case a.n == 0:
		return none
	case a.n > len(a.first):
		return strings.Join(a.first, ",") + fmt.Sprintf(" + %d more...", a.n-len(a.first))
	}
	return strings.Join(a.first, ",")
}
