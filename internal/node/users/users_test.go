package users

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestThousandPodsDistinct: 1,000 pods on two nodes of a machine, their
// agents claiming at once, get 1,000 distinct users, each in range; a
// pod claiming again keeps its user; a released user, or one whose pod's
// directory is gone, is taken again.
func TestThousandPodsDistinct(t *testing.T) {
	root := t.TempDir()
	claims := filepath.Join(root, "users")
	const pods = 1000
	got := make([]int64, pods)
	var wg sync.WaitGroup
	for node := range 2 {
		a, err := Open(claims) // each node agent opens the machine's
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := node; i < pods; i += 2 {
				owner := filepath.Join(root, fmt.Sprint("node-", node), "pods", fmt.Sprint(i))
				if err := os.MkdirAll(owner, 0o755); err != nil {
					t.Error(err)
					return
				}
				// Every tenth pod's seed is the same: their hashes
				// collide, as different UIDs' do by chance.
				seed := fmt.Sprint("pod-uid-", i)
				if i%10 == 0 {
					seed = "same-seed"
				}
				uid, err := a.Claim(owner, seed, 0)
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = uid
			}
		}()
	}
	wg.Wait()
	seen := map[int64]int{}
	for i, uid := range got {
		if uid < Base || uid >= Base+Range {
			t.Fatalf("pod %d: user %d out of range", i, uid)
		}
		if j, dup := seen[uid]; dup {
			t.Fatalf("pods %d and %d share user %d", i, j, uid)
		}
		seen[uid] = i
	}
	a, _ := Open(claims)
	owner0 := filepath.Join(root, "node-0", "pods", "0")
	if uid, err := a.Claim(owner0, "other-seed", got[0]); err != nil || uid != got[0] {
		t.Errorf("pod 0 claiming again: %d %v, want its user %d", uid, err, got[0])
	}
	// Another pod asking for pod 0's user (a stale record) gets another.
	newPod := filepath.Join(root, "node-1", "pods", "new")
	_ = os.MkdirAll(newPod, 0o755)
	if uid, _ := a.Claim(newPod, "x", got[0]); uid == got[0] {
		t.Errorf("a pod took user %d, held by a live pod", uid)
	}
	if err := a.Release(owner0, got[0]); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(root, "node-0", "pods", "again")
	_ = os.MkdirAll(again, 0o755)
	if uid, _ := a.Claim(again, "y", got[0]); uid != got[0] {
		t.Errorf("a released user %d was not taken again: got %d", got[0], uid)
	}
	// Pod 2's directory goes (removed while its agent was away): its user
	// is free.
	_ = os.RemoveAll(filepath.Join(root, "node-0", "pods", "2"))
	late := filepath.Join(root, "node-1", "pods", "late")
	_ = os.MkdirAll(late, 0o755)
	if uid, _ := a.Claim(late, "z", got[2]); uid != got[2] {
		t.Errorf("a stale user %d was not taken: got %d", got[2], uid)
	}
	if _, err := a.Claim("relative/dir", "s", 0); err == nil {
		t.Error("a relative owner was accepted")
	}
	holders, err := a.Holders()
	if err != nil || len(holders) != pods+1 {
		t.Errorf("%d users held (%v), want %d", len(holders), err, pods+1)
	}
}
