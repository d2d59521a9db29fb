// Package allocator hands out offsets of a fixed range (service IPs, node
// ports) exactly once. Like kube-apiserver it keeps the lower part of the
// range for explicitly requested values and allocates dynamically from the
// upper part first, so that well-known addresses (the DNS service at .10)
// are rarely taken by chance.
package allocator

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"math/rand/v2"
	"sync"
)

var (
	// ErrFull means every offset of the range is taken.
	ErrFull = errors.New("range is full")
	// ErrAllocated means the requested offset is taken.
	ErrAllocated = errors.New("provided value is already allocated")
)

// Bitmap tracks which offsets of [0, size) are allocated. It is safe for
// concurrent use.
type Bitmap struct {
	mu        sync.Mutex
	size      int
	staticTop int // offsets below staticTop form the band for requested values
	used      []uint64
	count     int
}

// NewBitmap returns an empty bitmap over [0, size).
func NewBitmap(size int) *Bitmap {
	return &Bitmap{size: size, staticTop: StaticBand(size), used: make([]uint64, (size+63)/64)}
}

// StaticBand is the size of the lower band reserved for requested values:
// size/16, at least 16 and at most 256 (kube-apiserver's rule), and never
// the whole range.
func StaticBand(size int) int {
	band := min(max(size/16, 16), 256)
	if band >= size {
		return 0
	}
	return band
}

// Size is the number of offsets.
func (b *Bitmap) Size() int { return b.size }

// Allocate marks offset as used; ErrAllocated if it already is.
func (b *Bitmap) Allocate(offset int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if offset < 0 || offset >= b.size {
		return errors.New("offset out of range")
	}
	if b.bit(offset) {
		return ErrAllocated
	}
	b.set(offset, true)
	b.count++
	return nil
}

// AllocateNext marks a free offset as used and returns it, choosing at
// random in the dynamic band first, then in the static band.
func (b *Bitmap) AllocateNext() (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if off, ok := b.findFree(b.staticTop, b.size); ok {
		b.set(off, true)
		b.count++
		return off, nil
	}
	if off, ok := b.findFree(0, b.staticTop); ok {
		b.set(off, true)
		b.count++
		return off, nil
	}
	return 0, ErrFull
}

// findFree scans [lo, hi) from a random start for a free offset.
func (b *Bitmap) findFree(lo, hi int) (int, bool) {
	n := hi - lo
	if n <= 0 {
		return 0, false
	}
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		off := lo + (start+i)%n
		if !b.bit(off) {
			return off, true
		}
	}
	return 0, false
}

// Release frees offset; releasing a free offset is a no-op.
func (b *Bitmap) Release(offset int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if offset < 0 || offset >= b.size || !b.bit(offset) {
		return
	}
	b.set(offset, false)
	b.count--
}

// Has reports whether offset is allocated.
func (b *Bitmap) Has(offset int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return offset >= 0 && offset < b.size && b.bit(offset)
}

// Free is the number of free offsets.
func (b *Bitmap) Free() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size - b.count
}

// Reset frees everything and then marks the given offsets.
func (b *Bitmap) Reset(offsets []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.used)
	b.count = 0
	for _, off := range offsets {
		if off >= 0 && off < b.size && !b.bit(off) {
			b.set(off, true)
			b.count++
		}
	}
}

func (b *Bitmap) bit(off int) bool { return b.used[off/64]&(1<<(off%64)) != 0 }

func (b *Bitmap) set(off int, v bool) {
	if v {
		b.used[off/64] |= 1 << (off % 64)
	} else {
		b.used[off/64] &^= 1 << (off % 64)
	}
}

// Snapshot encodes the bitmap for storage: the 64-bit words, little
// endian, lowest offsets first.
func (b *Bitmap) Snapshot() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]byte, 8*len(b.used))
	for i, w := range b.used {
		binary.LittleEndian.PutUint64(out[8*i:], w)
	}
	return out
}

// Restore replaces the bitmap's state with a Snapshot. Offsets beyond the
// bitmap's size (a range made smaller since) are dropped.
func (b *Bitmap) Restore(data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.used)
	b.count = 0
	for i := range b.used {
		if 8*i+8 > len(data) {
			break
		}
		b.used[i] = binary.LittleEndian.Uint64(data[8*i:])
	}
	if extra := b.size % 64; extra != 0 {
		b.used[len(b.used)-1] &= 1<<extra - 1
	}
	for _, w := range b.used {
		b.count += bits.OnesCount64(w)
	}
}
