package runtime

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// checks is what a confined process found it could and could not do.
type checks struct {
	UID, GID    int
	Groups      []int
	CapEff      string
	CapBnd      string
	NoNewPrivs  string
	ResolvConf  string
	WriteEtc    string   // error writing a new file in /etc
	WriteRoot   string   // error writing a new file in / (own roots only: args[3])
	WriteHost   string   // error writing a file of the machine's the test made
	WriteTmp    string   // error writing in /tmp
	WriteVolume string   // error writing in a writable mount
	ReadOnlyVol string   // error writing in a read-only mount
	LoadModule  string   // error of init_module with a bogus image
	ChangeNet   string   // error setting lo up
	Bind53      string   // error binding port 53
	SignalAgent string   // error of kill(parent, 0)
	RWMounts    []string // mount points writable in the container
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// confineCheck runs inside the confined process (the test binary again)
// and prints what it found as JSON. args: a machine file to try, a
// writable mount, a read-only mount.
func confineCheck(args []string) {
	var c checks
	c.UID, c.GID = os.Getuid(), os.Getgid()
	c.Groups, _ = os.Getgroups()
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			switch k {
			case "CapEff":
				c.CapEff = strings.TrimSpace(v)
			case "CapBnd":
				c.CapBnd = strings.TrimSpace(v)
			case "NoNewPrivs":
				c.NoNewPrivs = strings.TrimSpace(v)
			}
		}
		f.Close()
	}
	data, _ := os.ReadFile("/etc/resolv.conf")
	c.ResolvConf = string(data)
	write := func(path string) string { return errText(os.WriteFile(path, []byte("x"), 0o644)) }
	c.WriteEtc = write("/etc/svcnet-confine-test")
	if c.WriteEtc == "" {
		os.Remove("/etc/svcnet-confine-test")
	}
	c.WriteHost = write(args[0])
	if len(args) > 3 {
		c.WriteRoot = write(args[3])
	}
	c.WriteTmp = write("/tmp/svcnet-confine-test")
	c.WriteVolume = write(filepath.Join(args[1], "f"))
	c.ReadOnlyVol = write(filepath.Join(args[2], "f"))
	// Not an ELF image: even with the capability nothing is loaded.
	c.LoadModule = errText(unix.InitModule([]byte("not a module"), ""))
	if lo, err := netlink.LinkByName("lo"); err == nil {
		c.ChangeNet = errText(netlink.LinkSetUp(lo))
	} else {
		c.ChangeNet = errText(err)
	}
	if l, err := net.Listen("tcp", "127.0.0.1:53"); err == nil {
		l.Close()
	} else {
		c.Bind53 = errText(err)
	}
	c.SignalAgent = errText(unix.Kill(os.Getppid(), 0))
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && slices.Contains(strings.Split(f[5], ","), "rw") {
				c.RWMounts = append(c.RWMounts, unescapeMount(f[4]))
			}
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(c)
}

// confinedCommand starts o's process the way the runtime starts a
// container: through self's exec entry, with the runtime's SysProcAttr
// and a bare PATH.
func confinedCommand(self string, o ExecOptions) *exec.Cmd {
	cmd := exec.Command(self, o.Args()...)
	cmd.SysProcAttr = SysProcAttr(o)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd
}

// runConfineCheck runs self's confine-check as o's process and returns what
// it found it could and could not do.
func runConfineCheck(t *testing.T, self string, o ExecOptions) checks {
	t.Helper()
	out, err := confinedCommand(self, o).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var c checks
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return c
}

// TestConfinement runs the test binary confined as containers are, in a
// network namespace of its own, and checks from inside what it may do:
// the user, groups and capabilities asked for and no more; the machine's
// files read-only but /tmp and writable mounts writable; no module
// loading, no network changes, no signals to the node's processes —
// unless privileged.
func TestConfinement(t *testing.T) {
	ns, self := containerTest(t, "confine")
	dir := t.TempDir() // 0700 root: the confined user cannot reach the test binary's files by path
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 10.96.0.10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Outside /tmp, which a confined container has a private one of.
	hostDir, err := os.MkdirTemp("/var/tmp", "svcnet-confine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hostDir) })
	if err := os.Chmod(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(hostDir, "machine-file")
	if err := os.WriteFile(hostFile, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hostFile, 0o666); err != nil {
		t.Fatal(err)
	}
	vol, roVol := filepath.Join(dir, "vol"), filepath.Join(dir, "ro")
	for _, d := range []string{vol, roVol} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(d, 0o777)
	}
	mounts := []Mount{{Source: vol, Target: "/run/vol"}, {Source: roVol, Target: "/tmp/ro", ReadOnly: true}}
	const user = 201234
	cases := []struct {
		name string
		sec  Security
		want func(c checks) []string
	}{
		{"no capabilities", Security{ReadOnlyHost: true, UID: user, GID: user, Groups: []uint32{3000}, NoNewPrivs: true, Mounts: mounts},
			func(c checks) (bad []string) {
				if c.UID != user || c.GID != user || fmt.Sprint(c.Groups) != "[3000]" {
					bad = append(bad, fmt.Sprintf("ids %d %d %v", c.UID, c.GID, c.Groups))
				}
				if c.CapEff != "0000000000000000" || c.CapBnd != "0000000000000000" || c.NoNewPrivs != "1" {
					bad = append(bad, fmt.Sprintf("caps eff %s bnd %s nnp %s", c.CapEff, c.CapBnd, c.NoNewPrivs))
				}
				if c.Bind53 != "EACCES" {
					bad = append(bad, "bind 53 without the capability: "+c.Bind53)
				}
				return append(bad, confinedFiles(c)...)
			}},
		{"NET_BIND_SERVICE only", Security{ReadOnlyHost: true, UID: user, GID: user, Caps: []string{"CAP_NET_BIND_SERVICE"}, NoNewPrivs: true, Mounts: mounts},
			func(c checks) (bad []string) {
				if c.Bind53 != "" {
					bad = append(bad, "cannot bind 53: "+c.Bind53)
				}
				if c.CapEff != "0000000000000400" || c.CapBnd != "0000000000000400" {
					bad = append(bad, fmt.Sprintf("caps eff %s bnd %s, want only bit 10", c.CapEff, c.CapBnd))
				}
				return append(bad, confinedFiles(c)...)
			}},
		{"privileged", Security{UID: 0, GID: 0, Caps: AllCaps(), Mounts: mounts},
			func(c checks) (bad []string) {
				if c.UID != 0 || c.WriteHost != "" || c.ChangeNet != "" || c.Bind53 != "" || c.SignalAgent != "" {
					bad = append(bad, fmt.Sprintf("privileged is held back: %+v", c))
				}
				if c.LoadModule == "EPERM" {
					bad = append(bad, "privileged may not even try to load a module")
				}
				return bad
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(filepath.Join(vol, "f"))
			sec := tc.sec
			o := ExecOptions{Netns: ns, Hostname: "confined", ResolvConf: resolv, Security: &sec,
				Argv: []string{self, "confine-check", hostFile, "/run/vol", "/tmp/ro"}}
			c := runConfineCheck(t, self, o)
			if c.ResolvConf != "nameserver 10.96.0.10\n" {
				t.Errorf("resolv.conf %q", c.ResolvConf)
			}
			for _, b := range tc.want(c) {
				t.Error(b)
			}
			// Nothing leaked to the machine: its /tmp has no such file.
			if _, err := os.Stat("/tmp/svcnet-confine-test"); err == nil {
				os.Remove("/tmp/svcnet-confine-test")
				if sec.ReadOnlyHost {
					t.Error("the container's /tmp is the machine's")
				}
			}
		})
	}
	if data, _ := os.ReadFile(hostFile); len(data) > 0 && !t.Failed() {
		t.Log("the privileged case wrote the machine's file, as it may")
	}
}

// confinedFiles are the checks every confined case shares.
func confinedFiles(c checks) (bad []string) {
	expect := func(what, got, want string) {
		if got != want {
			bad = append(bad, fmt.Sprintf("%s: %q, want %q", what, got, want))
		}
	}
	expect("write /etc", c.WriteEtc, "EROFS")
	expect("write a machine file (mode 0666)", c.WriteHost, "EROFS")
	expect("write /tmp", c.WriteTmp, "")
	expect("write a writable mount", c.WriteVolume, "")
	expect("write a read-only mount", c.ReadOnlyVol, "EROFS")
	// A kernel built without modules answers ENOSYS before any check:
	// then the capability must be out of the bounding set.
	if _, err := os.Stat("/proc/modules"); err != nil && c.LoadModule == "ENOSYS" {
		if bnd, _ := strconv.ParseUint(c.CapBnd, 16, 64); bnd&(1<<unix.CAP_SYS_MODULE) != 0 {
			bad = append(bad, "CAP_SYS_MODULE is in the bounding set")
		}
	} else {
		expect("load a module", c.LoadModule, "EPERM")
	}
	expect("change the network", c.ChangeNet, "EPERM")
	expect("signal the node's process", c.SignalAgent, "EPERM")
	return bad
}

// TestOwnRoot: a container with a root layer writes anywhere in its own
// root — the machine's files do not change — mounts a volume where the
// machine has no such directory, keeps every machine filesystem read-only
// but its own places, and an exec that joins it sees what it wrote.
func TestOwnRoot(t *testing.T) {
	ns, self := containerTest(t, "ownroot")
	dir := t.TempDir()
	layer, vol := filepath.Join(dir, "layer"), filepath.Join(dir, "vol")
	for _, d := range []string{layer, vol} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(d, 0o777)
	}
	hostDir, err := os.MkdirTemp("/var/tmp", "svcnet-ownroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hostDir) })
	_ = os.Chmod(hostDir, 0o777)
	hostFile := filepath.Join(hostDir, "machine-file")
	if err := os.WriteFile(hostFile, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(hostFile, 0o666)
	// A target the machine does not have, as image paths (/results) are.
	target := "/svcnet-ownroot-" + strconv.Itoa(os.Getpid())
	if _, err := os.Stat(target); err == nil {
		t.Fatalf("%s exists on the machine", target)
	}
	const user = 201235
	sec := Security{ReadOnlyHost: true, UID: user, GID: user, NoNewPrivs: true, RootLayer: layer, OwnsRoot: true,
		Mounts: []Mount{{Source: vol, Target: target}, {Source: vol, Target: "/svcnet-ro", ReadOnly: true}}}
	o := ExecOptions{Netns: ns, Hostname: "own", Security: &sec,
		Argv: []string{self, "confine-check", hostFile, target, "/svcnet-ro", target + "-file"}}
	c := runConfineCheck(t, self, o)
	for what, got := range map[string]string{"a machine file (mode 0666)": c.WriteHost, "the mounted volume": c.WriteVolume, "/tmp": c.WriteTmp} {
		if got != "" {
			t.Errorf("write %s in its own root: %s", what, got)
		}
	}
	if c.WriteRoot != "" {
		t.Errorf("write a new file in / as the user owning its root: %q", c.WriteRoot)
	}
	if _, err := os.Stat(target + "-file"); err == nil {
		os.Remove(target + "-file")
		t.Errorf("the file written in the container's / is on the machine")
	}
	if c.WriteEtc != "EACCES" {
		t.Errorf("write /etc as a user: %q, want EACCES (the layer is writable, /etc is root's)", c.WriteEtc)
	}
	if c.ReadOnlyVol != "EROFS" {
		t.Errorf("write a read-only mount: %q", c.ReadOnlyVol)
	}
	slices.Sort(c.RWMounts)
	if want := []string{"/", "/dev/shm", "/run", target, "/tmp"}; !slices.Equal(c.RWMounts, want) {
		t.Errorf("writable mounts %q, want %q (the machine's filesystems read-only)", c.RWMounts, want)
	}
	if data, _ := os.ReadFile(hostFile); len(data) != 0 {
		t.Errorf("the machine's file changed: %q", data)
	}
	if _, err := os.Stat(target); err == nil {
		os.Remove(target)
		t.Errorf("the mount target %s was made on the machine", target)
	}
	if _, err := os.Stat(filepath.Join(vol, "f")); err != nil {
		t.Errorf("the volume did not get the file written through its mount: %v", err)
	}

	// A running container, and an exec joining its mounts.
	run := ExecOptions{Netns: ns, Hostname: "own", Security: &sec,
		Argv: []string{"sh", "-c", "echo layer > /tmp/written && echo ready && exec sleep 30"}}
	ctr := confinedCommand(self, run)
	stdout, err := ctr.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ctr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctr.Process.Kill(); _ = ctr.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("container: %q %v", line, err)
	}
	join := ExecOptions{Netns: ns, Hostname: "own", Security: &sec, Join: ctr.Process.Pid, Argv: []string{"cat", "/tmp/written"}}
	got, code, err := RunOnce(self, join, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, 10*time.Second)
	if err != nil || code != 0 || string(got) != "layer\n" {
		t.Errorf("exec joining the container: %q, exit %d, %v; want what it wrote to its /tmp", got, code, err)
	}
	fresh := join
	fresh.Join = 0
	if got, code, _ := RunOnce(self, fresh, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, 10*time.Second); code == 0 {
		t.Errorf("an exec that did not join sees the container's /tmp: %q", got)
	}
}
