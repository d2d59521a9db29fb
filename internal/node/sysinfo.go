package node

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

type kernelInfo struct{ release, bootID string }

func (k *kernelInfo) read() {
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		k.release = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		k.bootID = strings.TrimSpace(string(b))
	}
}

func memoryBytes() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}
