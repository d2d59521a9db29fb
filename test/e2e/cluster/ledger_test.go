package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ledger writes objects to the namespace "ledger" while faults strike and
// keeps the writes the API acknowledged: afterwards, every one of them
// must be stored.
type ledger struct {
	client kubernetes.Interface
	mu     sync.Mutex
	seq    map[string]int  // by name format
	acked  map[string]bool // ConfigMaps by name, other kinds prefixed
}

func newLedger(client kubernetes.Interface) *ledger {
	return &ledger{client: client, seq: map[string]int{}, acked: map[string]bool{}}
}

// name is the next name of format, which numbers it with one %d.
func (l *ledger) name(format string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq[format]++
	return fmt.Sprintf(format, l.seq[format])
}

// record is a loadgen step's outcome for a write of key that returned
// err, which keeps key when the API acknowledged the write.
func (l *ledger) record(key string, err error) string {
	if err != nil {
		return apiErrorKind(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[key] = true
	return ""
}

// writeConfigMap is a loadgen step: a new ConfigMap that holds its own
// name, so that a stored one can be told intact.
func (l *ledger) writeConfigMap() string {
	name := l.name("w-%05d")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"seq": name}}
	_, err := l.client.CoreV1().ConfigMaps("ledger").Create(context.Background(), cm, metav1.CreateOptions{})
	return l.record(name, err)
}

// acknowledged is how many writes the API acknowledged.
func (l *ledger) acknowledged() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// storedConfigMaps are the ConfigMaps of the namespace, by name: true
// for those stored intact.
func (l *ledger) storedConfigMaps(t *testing.T) map[string]bool {
	t.Helper()
	cms, err := l.client.CoreV1().ConfigMaps("ledger").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, cm := range cms.Items {
		stored[cm.Name] = cm.Data["seq"] == cm.Name
	}
	return stored
}

// lost fails t for each acknowledged write that stored lacks, and counts
// them.
func (l *ledger) lost(t *testing.T, stored map[string]bool) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := 0
	for key := range l.acked {
		if !stored[key] {
			lost++
			t.Errorf("acknowledged write %s is not stored", key)
		}
	}
	return lost
}
