// Package vm boots a QEMU virtual machine with a stock Debian kernel and
// runs one command in it: how svcnet tests what this machine's kernel
// lacks (IPVS, the dummy link). The machine's own filesystem is the VM's
// root, read-only over 9p under a writable overlay in memory, so test
// binaries and svcnet run inside as they are; one more 9p share, a
// temporary directory, carries the command in and its output and exit
// code out. The VM has no network device: nothing it does reaches the
// host's network.
//
// The kernel comes from Debian's linux-image package, downloaded and
// unpacked (never installed) by hack/vm-kernel.sh into KernelDir; `make
// test` does that. Under TCG emulation (no KVM here) the VM reaches its
// command in about 6 s, and Go code runs about 7× slower than on the host.
package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultKernelDir is where `make test` puts the kernel.
const DefaultKernelDir = "/var/cache/svcnet/vm"

// KernelDir is $SVCNET_VM_KERNEL, else DefaultKernelDir.
func KernelDir() string {
	if d := os.Getenv("SVCNET_VM_KERNEL"); d != "" {
		return d
	}
	return DefaultKernelDir
}

// Config is one boot.
type Config struct {
	// Command runs inside as root, from Dir, with Env added to a plain
	// environment (PATH, HOME=/root, SVCNET_IN_VM=1).
	Command []string
	Dir     string
	Env     []string
	// Timeout bounds the whole boot; the VM is killed when it ends.
	Timeout time.Duration
	// MemoryMiB and CPUs of the VM: 2048 and 2 by default.
	MemoryMiB, CPUs int
	// Modules are loaded before Command, with their dependencies; others
	// load on demand (the kernel runs modprobe).
	Modules []string
}

// Result is what the command left.
type Result struct {
	// Output is the command's stdout and stderr.
	Output []byte
	// ExitCode is the command's, or -1 when it never finished.
	ExitCode int
	// Console is the VM's serial console: the kernel's and init's lines.
	Console []byte
	Elapsed time.Duration
}

// bootModules carry the root filesystem: 9p over virtio, and overlayfs.
var bootModules = []string{"virtio_pci", "9pnet_virtio", "9p", "overlay"}

// Run boots the VM, runs cfg.Command and returns its result. An error
// means the VM could not run the command at all (no kernel, no QEMU, a
// timeout); a failing command is a Result with its exit code.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if len(cfg.Command) == 0 {
		return nil, errors.New("vm: no command")
	}
	kdir := KernelDir()
	version, err := os.ReadFile(filepath.Join(kdir, "version"))
	if err != nil {
		return nil, fmt.Errorf("vm: no kernel in %s (make test runs hack/vm-kernel.sh %s): %w", kdir, kdir, err)
	}
	ver := strings.TrimSpace(string(version))
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, errors.New("vm: qemu-system-x86_64 not found (Debian package qemu-system-x86; make test installs it)")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return nil, errors.New("vm: busybox not found (Debian package busybox-static; make test installs it)")
	}
	work, err := os.MkdirTemp("", "svcnet-vm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	out := filepath.Join(work, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "run.sh"), []byte(script(cfg)), 0o755); err != nil {
		return nil, err
	}
	deps, err := readModulesDep(filepath.Join(kdir, "modules", "modules.dep"))
	if err != nil {
		return nil, err
	}
	boot, err := deps.order(bootModules, true)
	if err != nil {
		return nil, err
	}
	for _, m := range cfg.Modules {
		if _, ok := deps[modName(m)]; !ok {
			return nil, fmt.Errorf("vm: no module %s in kernel %s", m, ver)
		}
	}
	initrd := filepath.Join(work, "initramfs.cpio")
	if err := writeInitramfs(initrd, busybox, kdir, ver, out, boot, cfg.Modules); err != nil {
		return nil, err
	}

	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mem, cpus := cfg.MemoryMiB, cfg.CPUs
	if mem <= 0 {
		mem = 2048
	}
	if cpus <= 0 {
		cpus = 2
	}
	console := filepath.Join(work, "console.log")
	args := []string{
		"-M", "q35", "-accel", "tcg", "-cpu", "max", "-smp", strconv.Itoa(cpus), "-m", strconv.Itoa(mem),
		"-display", "none", "-monitor", "none", "-serial", "file:" + console, "-no-reboot",
		// No network device at all: QEMU's default user-mode NIC would
		// give the VM a way out through the host.
		"-nic", "none",
		"-kernel", filepath.Join(kdir, "vmlinux"), "-initrd", initrd,
		// loglevel=5 prints the stacks of a kernel report (a soft
		// lockup's, say), which the kernel writes at the default level.
		"-append", "console=ttyS0 panic=-1 quiet loglevel=5 softlockup_all_cpu_backtrace=1 rdinit=/init",
		"-virtfs", "local,path=/,mount_tag=root,readonly=on,security_model=none,multidevs=remap",
		"-virtfs", "local,path=" + out + ",mount_tag=out,security_model=none",
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.WaitDelay = 5 * time.Second
	qout, qerr := cmd.CombinedOutput()
	res := &Result{ExitCode: -1, Elapsed: time.Since(start)}
	res.Console, _ = os.ReadFile(console)
	res.Output, _ = os.ReadFile(filepath.Join(out, "output"))
	if b, err := os.ReadFile(filepath.Join(out, "exit")); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			res.ExitCode = n
		}
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("vm: no end within %s; console:\n%s", timeout, firstReport(res.Console)+tail(res.Console, 40))
	}
	if qerr != nil && res.ExitCode < 0 {
		return res, fmt.Errorf("vm: qemu: %v: %s; console:\n%s", qerr, qout, tail(res.Console, 40))
	}
	if res.ExitCode < 0 {
		return res, fmt.Errorf("vm: the command did not finish; console:\n%s", tail(res.Console, 40))
	}
	return res, nil
}

// script is run.sh: the command with its directory and environment.
func script(cfg Config) string {
	var b strings.Builder
	// /run/vm has busybox's modprobe (the machine has no kmod).
	b.WriteString("#!/bin/sh\nexport PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/run/vm HOME=/root SVCNET_IN_VM=1\n")
	for _, e := range cfg.Env {
		k, v, _ := strings.Cut(e, "=")
		fmt.Fprintf(&b, "export %s=%s\n", k, quote(v))
	}
	if cfg.Dir != "" {
		fmt.Fprintf(&b, "cd %s || exit 125\n", quote(cfg.Dir))
	}
	b.WriteString("exec")
	for _, a := range cfg.Command {
		b.WriteString(" " + quote(a))
	}
	b.WriteString("\n")
	return b.String()
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// firstReport is the console's first kernel BUG report (up to 80 lines,
// its stacks with it), which the tail of a long hang no longer holds; ""
// for none.
func firstReport(b []byte) string {
	i := bytes.Index(b, []byte("BUG: "))
	if i < 0 {
		return ""
	}
	lines := strings.SplitN(string(b[i:]), "\n", 81)
	return strings.Join(lines[:min(len(lines), 80)], "\n") + "\n…\n"
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// modulesDep is modules.dep: a module's path and the paths it needs, by
// module name.
type modulesDep map[string]struct {
	path string
	deps []string
}

func modName(path string) string {
	n := filepath.Base(path)
	n = n[:strings.Index(n+".ko", ".ko")]
	return strings.ReplaceAll(n, "-", "_")
}

func readModulesDep(path string) (modulesDep, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	defer f.Close()
	m := modulesDep{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mod, deps, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		m[modName(mod)] = struct {
			path string
			deps []string
		}{mod, strings.Fields(deps)}
	}
	return m, sc.Err()
}

// order lists the module files to load for names, dependencies first.
// Names that are built into the kernel (absent from modules.dep) are
// skipped when optional. Only the boot modules need it: busybox's
// modprobe loads the rest.
func (m modulesDep) order(names []string, optional bool) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	var visit func(name string) error
	visit = func(name string) error {
		e, ok := m[modName(name)]
		if !ok {
			if optional {
				return nil
			}
			return fmt.Errorf("vm: no module %s in modules.dep", name)
		}
		if seen[e.path] {
			return nil
		}
		seen[e.path] = true
		// modules.dep lists every dependency, transitive ones included,
		// nearest last: load from the end.
		for i := len(e.deps) - 1; i >= 0; i-- {
			if err := visit(e.deps[i]); err != nil {
				return err
			}
		}
		out = append(out, e.path)
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// writeInitramfs writes the initramfs: busybox, the boot modules, and an
// init that mounts the machine's filesystem as the root and runs
// out/run.sh in it.
func writeInitramfs(path, busybox, kdir, ver, out string, boot, extra []string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	for _, d := range []string{"bin", "dev", "proc", "sys", "mods", "lower", "rw", "newroot", "run", "run/vm", "lib", "lib/modules", "lib/modules/" + ver} {
		c.dir(d)
	}
	c.char("dev/console", 5, 1)
	c.file("bin/busybox", bb)
	var insmod []string
	for _, p := range boot {
		b, err := os.ReadFile(filepath.Join(kdir, "modules", p))
		if err != nil {
			return err
		}
		name := "mods/" + filepath.Base(p)
		c.file(name, b)
		insmod = append(insmod, "insmod /"+name)
	}
	var load []string
	for _, m := range extra {
		load = append(load, "modprobe "+quote(m))
	}
	c.file("init", []byte(initScript(kdir, ver, out, insmod, load)))
	if err := c.close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// initScript is PID 1: root over 9p under an overlay, the kernel's
// modules where modprobe looks, a modprobe for the kernel to call, then
// the command, its output and exit code written to the out share, and
// power off. PID 1 itself stays in the initramfs and runs the command
// chrooted: the kernel runs its modprobe (module autoloading) from PID
// 1's root, so busybox's modprobe and the modules are mounted in both.
func initScript(kdir, ver, out string, insmod, load []string) string {
	return `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
` + strings.Join(insmod, "\n") + `
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 root /lower || poweroff -f
mount -t tmpfs -o size=1g tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || poweroff -f
R=/newroot
for d in proc sys dev; do mount --move /$d $R/$d; done
mount -t tmpfs tmpfs $R/run
mount -t tmpfs tmpfs $R/dev/shm 2>/dev/null
mount -t devpts devpts $R/dev/pts 2>/dev/null
mkdir -p $R` + quote(out) + ` $R/lib/modules/` + ver + `
mount -t 9p -o trans=virtio,version=9p2000.L out $R` + quote(out) + `
mount --bind $R` + quote(kdir+"/modules") + ` $R/lib/modules/` + ver + `
mount --bind $R` + quote(kdir+"/modules") + ` /lib/modules/` + ver + `
ln -s /bin/busybox /run/vm/modprobe
mkdir -p $R/run/vm
cp /bin/busybox $R/run/vm/busybox
ln -s busybox $R/run/vm/modprobe
echo /run/vm/modprobe > $R/proc/sys/kernel/modprobe
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup 2>/dev/null
` + strings.Join(load, "\n") + `
chroot $R /run/vm/busybox ip link set lo up
chroot $R /bin/sh ` + quote(out+"/run.sh") + ` >$R` + quote(out+"/output") + ` 2>&1 </dev/null
echo $? >$R` + quote(out+"/exit") + `
sync
poweroff -f
`
}
