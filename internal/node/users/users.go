// Package users gives each pod of a machine a user of its own, for the
// containers that name none: claims are files in a directory every node
// agent of the machine shares, taken under a lock, so that no two pods
// hold one user (a hash of the pod's UID would collide: with a few
// hundred pods among 800,000 ids, likely). A user stays its pod's for
// the pod's life, across restarts of the agent; a claim whose pod's
// directory is gone is free again.
package users

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Users are taken from [Base, Base+Range), away from the machine's own
// users and from the ids pods usually name.
const (
	Base  = 200000
	Range = 800000
)

// Allocator hands out users from its directory's claims.
type Allocator struct {
	dir string
}

// Open uses dir (made if missing) for the machine's claims.
func Open(dir string) (*Allocator, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Allocator{dir: dir}, nil
}

// Claim returns owner's user: want, when owner holds it already or it is
// free (a pod's recorded user, claimed again), else a free one, first
// looked for where seed (the pod's UID) hashes, so that a pod's user
// is usually the same on every machine. owner is the pod's directory,
// absolute: while it exists, the claim stands.
func (a *Allocator) Claim(owner, seed string, want int64) (int64, error) {
	if !filepath.IsAbs(owner) {
		return 0, fmt.Errorf("claim owner %q is not an absolute path", owner)
	}
	unlock, err := a.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	if want >= Base && want < Base+Range {
		if ok, err := a.take(want, owner); ok || err != nil {
			return want, err
		}
	}
	h := fnv.New32a()
	h.Write([]byte(seed))
	start := int64(h.Sum32() % Range)
	for i := range int64(Range) {
		uid := Base + (start+i)%Range
		if ok, err := a.take(uid, owner); ok || err != nil {
			return uid, err
		}
	}
	return 0, errors.New("every pod user is taken")
}

// take claims uid for owner if it is free, stale or owner's already.
func (a *Allocator) take(uid int64, owner string) (bool, error) {
	path := a.path(uid)
	holder, err := os.ReadFile(path)
	switch {
	case err == nil && string(holder) == owner:
		return true, nil
	case err == nil && exists(string(holder)):
		return false, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(owner), 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

// Release gives owner's user back.
func (a *Allocator) Release(owner string, uid int64) error {
	unlock, err := a.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if holder, err := os.ReadFile(a.path(uid)); err == nil && string(holder) == owner {
		return os.Remove(a.path(uid))
	}
	return nil
}

// Holders lists the users claimed and their owners.
func (a *Allocator) Holders() (map[int64]string, error) {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for _, e := range entries {
		uid, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(a.dir, e.Name())); err == nil {
			out[uid] = strings.TrimSpace(string(b))
		}
	}
	return out, nil
}

func (a *Allocator) path(uid int64) string { return filepath.Join(a.dir, strconv.FormatInt(uid, 10)) }

// lock serialises the machine's agents over the claims.
func (a *Allocator) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(a.dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", a.dir, err)
	}
	return func() { f.Close() }, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
