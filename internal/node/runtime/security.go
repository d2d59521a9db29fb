package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Security is what confines a container process: who it runs as, what it
// may do, and what of the machine it sees. Containers always run with
// one (the node's confinement rules make it from the pod's
// securityContext); the node agent's own helpers run without.
type Security struct {
	// ReadOnlyHost: the machine's filesystems are read-only, with private
	// writable /tmp, /run and /dev/shm (not for privileged containers);
	// with a RootLayer, / itself is the container's, writable.
	ReadOnlyHost bool     `json:"readOnlyHost,omitempty"`
	UID          uint32   `json:"uid"`
	GID          uint32   `json:"gid"`
	Groups       []uint32 `json:"groups,omitempty"`
	Caps         []string `json:"caps,omitempty"` // CAP_ names the process keeps; every other one is gone for good
	NoNewPrivs   bool     `json:"noNewPrivs,omitempty"`
	Mounts       []Mount  `json:"mounts,omitempty"`
	// RootLayer, when set, gives the container a root filesystem of its
	// own: the machine's root under a copy-on-write layer (a tmpfs
	// mounted on this existing directory, in the container's mount
	// namespace only), so that it writes anywhere without changing the
	// machine, and mount targets need not exist on the machine.
	RootLayer string `json:"rootLayer,omitempty"`
	// Layers, with a RootLayer, make the container's root an image's
	// instead of the machine's: these directories (overlayfs lower
	// directories, bottom first, as the image store unpacks them) under
	// the copy-on-write layer, with /proc, /sys and a minimal /dev of
	// the container's own. Nothing else of the machine's is visible but
	// what Mounts bring.
	Layers []string `json:"layers,omitempty"`
	// OwnsRoot gives the user the root directory of its own root (with a
	// RootLayer): a container that runs as svcnet's user where an image's
	// would run as root writes new files in / (a working directory of /
	// is common) without owning anything else of the machine's.
	OwnsRoot bool `json:"ownsRoot,omitempty"`
}

// Mount shows a file or directory of the node inside the container.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Private are the writable places of a confined container: tmpfs of its
// own, where mount targets may also be created.
var Private = []string{"/tmp", "/run", "/dev/shm"}

func (s Security) encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ParseSecurity reads what encode wrote (the pod-exec helper's flag).
func ParseSecurity(s string) (Security, error) {
	var sec Security
	if s == "" {
		return sec, nil
	}
	if err := json.Unmarshal([]byte(s), &sec); err != nil {
		return sec, fmt.Errorf("security options: %w", err)
	}
	for _, c := range sec.Caps {
		if _, ok := CapNumber(c); !ok {
			return sec, fmt.Errorf("unknown capability %q", c)
		}
	}
	return sec, nil
}

// capNames are the kernel's capabilities by number.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
	"CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
	"CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN",
	"CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

func init() {
	if len(capNames) != unix.CAP_LAST_CAP+1 {
		panic("capability table out of date")
	}
}

// CapNumber is the number of a capability, named as in a securityContext
// (NET_BIND_SERVICE) or the kernel (CAP_NET_BIND_SERVICE), any case.
func CapNumber(name string) (int, bool) {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "CAP_") {
		n = "CAP_" + n
	}
	i := slices.Index(capNames, n)
	return i, i >= 0
}

// AllCaps are every capability's name (a privileged container's set).
func AllCaps() []string { return slices.Clone(capNames) }
