package convert

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// NoteKind tells what a Note reports.
type NoteKind int

const (
	// NotCarriedOver is an annotation that the converted objects do not
	// honour: the Gateway API has no equivalent, its value cannot be
	// used, or it has no effect where it is.
	NotCarriedOver NoteKind = iota
	// LeftOut is a part of an Ingress's spec (a path, a backend, a TLS
	// entry) that is not in the converted objects.
	LeftOut
	// Caveat is a conversion whose Gateway API counterpart behaves
	// differently in a way that may matter, or that needs something done
	// beside the printed objects.
	Caveat
)

// Note is one thing a person migrating should know.
type Note struct {
	Kind    NoteKind
	Ingress types.NamespacedName
	// Annotation is the annotation's full name (NotCarriedOver; a
	// Caveat about an annotation names it too).
	Annotation string
	Message    string
}

// String is the Note as one line: "not carried over: <annotation> on
// <ns>/<name>: <why>", "left out: <ns>/<name>: <what and why>" or
// "note: <ns>/<name>: <what>".
func (n Note) String() string {
	switch n.Kind {
	case NotCarriedOver:
		return fmt.Sprintf("not carried over: %s on %s: %s", n.Annotation, n.Ingress, n.Message)
	case LeftOut:
		return fmt.Sprintf("left out: %s: %s", n.Ingress, n.Message)
	}
	if n.Annotation != "" {
		return fmt.Sprintf("note: %s on %s: %s", n.Annotation, n.Ingress, n.Message)
	}
	return fmt.Sprintf("note: %s: %s", n.Ingress, n.Message)
}
