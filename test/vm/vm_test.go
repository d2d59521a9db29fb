package vm

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestScript(t *testing.T) {
	got := script(Config{Command: []string{"echo", "it's"}, Dir: "/tmp/a b", Env: []string{"X=1 2"}})
	for _, want := range []string{"export X='1 2'\n", "cd '/tmp/a b' || exit 125\n", `exec 'echo' 'it'\''s'` + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
}

func TestModulesOrder(t *testing.T) {
	dir := t.TempDir()
	dep := "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/netfs/netfs.ko\n" +
		"kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko\n" +
		"kernel/net/9p/9pnet.ko:\nkernel/fs/netfs/netfs.ko:\n"
	if err := os.WriteFile(dir+"/modules.dep", []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := readModulesDep(dir + "/modules.dep")
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.order([]string{"virtio_pci", "9pnet_virtio", "9p"}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "kernel/net/9p/9pnet.ko kernel/net/9p/9pnet_virtio.ko kernel/fs/netfs/netfs.ko kernel/fs/9p/9p.ko"
	if strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
	if _, err := m.order([]string{"ip_vs"}, false); err == nil {
		t.Error("a missing module that is asked for is not an error")
	}
}

func TestCpio(t *testing.T) {
	var b bytes.Buffer
	c := &cpioWriter{w: &b}
	c.dir("bin")
	c.file("init", []byte("#!/bin/sh\n"))
	c.char("dev/console", 5, 1)
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if b.Len()%4 != 0 || !bytes.HasPrefix(b.Bytes(), []byte("070701")) || !bytes.Contains(b.Bytes(), []byte("TRAILER!!!\x00")) {
		t.Errorf("not a newc archive: %q", b.Bytes()[:40])
	}
	// The console node: mode 020600, major 5 minor 1 in the rdev fields.
	if !bytes.Contains(b.Bytes(), []byte("00002180")) || !bytes.Contains(b.Bytes(), []byte("0000000500000001")) {
		t.Error("no character device entry for dev/console")
	}
}

// TestBoot boots the VM once: the command runs as root in the machine's
// own filesystem with the given directory and environment, modules load
// (IPVS, the dummy link: what this machine's kernel lacks), writes land
// in the overlay and not on the machine, and the exit code comes back.
func TestBoot(t *testing.T) {
	Later(t)
	if os.Geteuid() != 0 {
		t.Skip("the VM's 9p root share reads every file: root; CI runs as root")
	}
	probe := t.TempDir() + "/written-in-vm"
	res, err := Run(context.Background(), Config{
		Command: []string{"/bin/sh", "-c", `echo "dir=$PWD x=$X uid=$(id -u) kernel=$(uname -r)"; ` +
			`grep -q '^ip_vs ' /proc/modules && echo ipvs-loaded; ` +
			`ip link add svcnet-d0 type dummy && echo dummy-ok; ` +
			`touch ` + probe + ` && echo wrote; exit 7`},
		Dir: "/usr", Env: []string{"X=from host"}, Timeout: 5 * time.Minute, Modules: []string{"ip_vs"},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("boot to exit %.1fs; output:\n%s", res.Elapsed.Seconds(), out)
	if res.ExitCode != 7 {
		t.Errorf("exit code %d, want 7; console:\n%s", res.ExitCode, tail(res.Console, 30))
	}
	for _, want := range []string{"dir=/usr x=from host uid=0 kernel=", "ipvs-loaded", "dummy-ok", "wrote"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if _, err := os.Stat(probe); err == nil {
		t.Error("a file written in the VM appeared on the machine: the root share must be read-only")
	}
}

func TestFirstReport(t *testing.T) {
	tests := []struct{ console, want string }{
		{"[ 1.0] booting\n[ 2.0] ok\n", ""},
		{"[ 1.0] booting\n[ 73.1] watchdog: BUG: soft lockup - CPU#0 stuck for 22s!\n[ 73.1] Call Trace:\n[ 99.0] later\n",
			"BUG: soft lockup - CPU#0 stuck for 22s!\n[ 73.1] Call Trace:\n[ 99.0] later\n\n…\n"},
	}
	for _, tt := range tests {
		if got := firstReport([]byte(tt.console)); got != tt.want {
			t.Errorf("firstReport(%q) = %q, want %q", tt.console, got, tt.want)
		}
	}
}
