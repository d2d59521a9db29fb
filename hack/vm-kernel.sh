#!/bin/bash
# vm-kernel.sh DIR: put a Debian 12 generic kernel (the ELF vmlinux) and its
# modules, with modules.dep, in DIR, for the QEMU virtual machine that the
# ipvs tests boot (this machine's own kernel has no IPVS and no dummy
# link). The package is downloaded with apt-get and unpacked, never
# installed. Runs once: an existing DIR/ready is kept.
set -euo pipefail
dir=${1:?usage: vm-kernel.sh DIR}
if [ -e "$dir/ready" ]; then exit 0; fi
mkdir -p "$dir"
work=$(mktemp -d "$dir/.svcnet-vm-XXXXXX")
chmod 755 "$work" # apt-get download drops to the _apt user
trap 'rm -rf "$work"' EXIT

# The generic flavour: the cloud one has no 9p, which mounts this machine's
# filesystem inside.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/.*Depends: \(linux-image-[0-9.]*-[0-9]*-amd64\)$/\1/p' | head -1)
if [ -z "$pkg" ]; then
	apt-get update -qq
	pkg=$(apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: \(linux-image-[0-9.]*-[0-9]*-amd64\)$/\1/p' | head -1)
fi
[ -n "$pkg" ] || { echo "vm-kernel: no linux-image-*-amd64 package known to apt" >&2; exit 1; }
echo "vm-kernel: downloading $pkg" >&2
(cd "$work" && apt-get download -qq "$pkg" >/dev/null) || {
	apt-get update -qq && (cd "$work" && apt-get download -qq "$pkg" >/dev/null)
}
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/root"
version=${pkg#linux-image-}
vmlinuz="$work/root/boot/vmlinuz-$version"

# The ELF vmlinux inside the bzImage boots several seconds faster under
# emulation than the bzImage (no decompression at 1/7 speed).
pos=$(LC_ALL=C grep -abo $'\xfd''7zXZ' "$vmlinuz" | head -1 | cut -d: -f1)
[ -n "$pos" ] || { echo "vm-kernel: no XZ stream in $vmlinuz" >&2; exit 1; }
tail -c +"$((pos + 1))" "$vmlinuz" | xz -dc --single-stream >"$work/vmlinux" 2>/dev/null || true
[ "$(head -c 4 "$work/vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] || { echo "vm-kernel: extracted kernel is not ELF" >&2; exit 1; }

busybox=$(command -v busybox) || { echo "vm-kernel: busybox (busybox-static) is needed" >&2; exit 1; }
"$busybox" depmod -b "$work/root" "$version"

rm -rf "$dir/modules" "$dir/vmlinux"
mv "$work/root/lib/modules/$version" "$dir/modules"
mv "$work/vmlinux" "$dir/vmlinux"
echo "$version" >"$dir/version"
touch "$dir/ready"
echo "vm-kernel: $version in $dir" >&2
