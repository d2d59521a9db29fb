package imagestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll is how often a waiter retries a lock held by another process.
// flock(2) cannot be interrupted by a context, so waiters poll instead of
// blocking.
const lockPoll = 20 * time.Millisecond

// lock takes the exclusive flock on locks/<key>.lock and returns its
// release. The lock belongs to the open file, so it also excludes other
// Stores of this process, and the kernel releases it when a holder dies:
// a crashed pull never leaves the key locked.
func (s *Store) lock(ctx context.Context, key string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.root, "locks", key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}
