package controller

import "testing"

func TestExpectations(t *testing.T) {
	e := NewExpectations()
	if !e.Satisfied("rs") {
		t.Fatal("empty expectations unsatisfied")
	}
	e.ExpectCreations("rs", 2)
	e.ExpectDeletions("rs", "p1")
	e.CreationObserved("rs")
	if e.Satisfied("rs") {
		t.Fatal("satisfied with one creation and a deletion pending")
	}
	e.CreationObserved("rs")
	e.DeletionObserved("rs", "p1")
	// A pod is seen going twice (terminating, then gone): no harm.
	e.DeletionObserved("rs", "p1")
	if !e.Satisfied("rs") {
		t.Fatal("unsatisfied after everything was observed")
	}
	e.ExpectDeletions("rs", "p2")
	e.DeletionObserved("rs", "other")
	if e.Satisfied("rs") {
		t.Fatal("another pod's deletion satisfied the expectation")
	}
	e.Forget("rs")
	if !e.Satisfied("rs") {
		t.Fatal("forgotten key unsatisfied")
	}
}
