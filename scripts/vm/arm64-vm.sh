#!/bin/bash
# An aarch64 test VM (qemu-system-aarch64 -M virt, TCG) for the aarch64 `piconet`: the GPIO
# character device's ioctls, which qemu-user does not translate, run on a real arm64 kernel.
# - Debian's bookworm-backports 6.12 arm64 kernel, downloaded with a private apt config as
#   setup-host.sh does for x86 (the host's apt sources are not changed; the mirror is the one
#   they name), with linux-headers-*-arm64 + -common and the amd64 linux-kbuild (host tools);
# - gpio-sim.ko built out of tree for arm64 from the same linux-source as setup-host.sh
#   (irq_sim.c compiled into it), cross: make ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-
#   (gcc-12, as the kernel was built);
# - bookworm's busybox-static:arm64.
# All cached in VM_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/piconet-vm-arm64)/KVER; once a new
# KVER is complete, the other versions' folders there are removed (scripts/vm/lib.sh).
# Each run packs a fresh initramfs (cpio) with busybox, the modules gpio-sim needs, the given
# piconet with its libc/libm/libgcc_s, Boards/ and scripts/vm/arm64-init as /init, which makes a
# gpio-sim chip and runs the checks (GPIO, a loopback session); no 9p, no disk, no network device. The guest's output is printed; the last
# line is "N passed, N failed, N skipped"; exit status 0 only when that line says 0 failed.
# usage: arm64-vm.sh setup                 (download and build the cache only)
#        arm64-vm.sh run PICONET LIBC_ROOT [NODE HUB]
#          (LIBC_ROOT: bookworm arm64 libc6 + libgcc-s1 unpacked; NODE, HUB: the aarch64
#          piconet-node and piconet-hub, for a hub-and-node run in the guest too)
# env: PICONET_ARM64_VM_TIMEOUT (seconds for the boot and the checks, default 600; qemu is killed then)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
VM_DIR=$(realpath -m "${PICONET_ARM64_VM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/piconet-vm-arm64}")
mode=${1:-}; [ "$mode" = setup ] || [ "$mode" = run ] || { echo "usage: $0 setup | run PICONET LIBC_ROOT" >&2; exit 2; }
mkdir -p "$VM_DIR"
exec 9>"$VM_DIR/.lock"; flock 9   # one setup (and one VM) at a time
for t in qemu-system-aarch64 aarch64-linux-gnu-gcc-12 cpio depmod; do
  command -v "$t" >/dev/null || { echo "arm64-vm: $t is missing (scripts/bootstrap --vm installs it)" >&2; exit 2; }
done

# --- the Debian mirror the host already uses (scripts/vm/lib.sh, as setup-host.sh)
MIRROR=$(debian_mirror)
[ -n "$MIRROR" ] || { echo "arm64-vm: no Debian mirror found in the host's apt sources" >&2; exit 2; }

# --- private apt state: bookworm-backports (kernel) and bookworm (busybox), arm64 and amd64
A=$VM_DIR/apt
mkdir -p "$A/lists/partial" "$A/cache/archives/partial"
{ echo "deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${MIRROR%/} bookworm-backports main"
  echo "deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${MIRROR%/} bookworm main"; } > "$A/sources.list"
APTOPTS=(-o "Dir::Etc::SourceList=$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
         -o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache" -o Dir::State::status=/dev/null
         -o Dir::Etc::PreferencesParts=/dev/null -o APT::Sandbox::User=root
         -o APT::Default-Release=bookworm-backports -o APT::Architecture=amd64 -o APT::Architectures::=amd64 -o APT::Architectures::=arm64 -o Debug::NoLocking=1)
# The lists are refreshed once a day at most: a warm run asks the mirror nothing.
if [ -z "$(find "$A/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n1)" ]; then
  apt-get "${APTOPTS[@]}" update -qq
fi
# linux-image-arm64 (bpo) -> linux-image-6.12.NN+deb12-arm64
IMG=$(apt-cache "${APTOPTS[@]}" depends linux-image-arm64:arm64 | awk '/Depends: linux-image-[0-9]/ && !x {x=$2} END{print x}')
IMG=${IMG%:arm64}
[ -n "$IMG" ] || { echo "arm64-vm: no linux-image-arm64 in bookworm-backports" >&2; exit 2; }
KVER=${IMG#linux-image-}                # e.g. 6.12.95+deb12-arm64
KBASE=${KVER%-arm64}                    # e.g. 6.12.95+deb12
KMAJ=$(echo "$KVER" | cut -d. -f1-2)    # e.g. 6.12
C=$VM_DIR/$KVER
R=$C/root
if [ ! -f "$R/.complete" ]; then
  echo "arm64-vm: downloading $IMG (arm64) and its headers"
  rm -rf "$R" "$C/debs"; mkdir -p "$R" "$C/debs"
  (cd "$C/debs" && apt-get "${APTOPTS[@]}" download -q \
      "$IMG:arm64" "linux-headers-$KVER:arm64" "linux-headers-$KBASE-common" "linux-kbuild-$KBASE:amd64" \
      busybox-static:arm64)
  for d in "$C"/debs/*.deb; do dpkg -x "$d" "$R"; done
  rm -rf "$C/debs"; touch "$R/.complete"
  # A new kernel replaces the old ones: their roots (and gpio-sim builds) are never used again.
  prune_other_versions "$VM_DIR" "$KVER" '*-arm64'
fi
if [ -d "$R/usr/lib/modules/$KVER" ]; then MBASE=$R/usr; else MBASE=$R; fi
MDIR=$MBASE/lib/modules/$KVER

# --- gpio-sim.ko for arm64, as setup-host.sh builds it for x86 (same source package, same patch)
H=$R/usr/src/linux-headers-$KVER
sed -i "s#^include /usr/src/#include $R/usr/src/#" "$H/Makefile"
if [ ! -f "$MDIR/extra/gpio-sim.ko" ]; then
  echo "arm64-vm: building gpio-sim.ko for $KVER"
  B=$(mktemp -d); trap 'rm -rf "$B"' EXIT
  (cd "$B" && apt-get "${APTOPTS[@]}" download -q "linux-source-$KMAJ")
  dpkg -x "$B"/linux-source-*.deb "$B/src"
  tar -xJf "$B"/src/usr/src/linux-source-"$KMAJ".tar.xz -C "$B" \
      "linux-source-$KMAJ/drivers/gpio/gpio-sim.c" "linux-source-$KMAJ/kernel/irq/irq_sim.c"
  mkdir -p "$B/mod"
  cp "$B/linux-source-$KMAJ/drivers/gpio/gpio-sim.c" "$B/mod/gpio-sim-core.c"
  cp "$B/linux-source-$KMAJ/kernel/irq/irq_sim.c" "$B/mod/irq_sim.c"
  sed -i 's/handle_simple_irq(irq_to_desc(irqnum));/if (irqnum) generic_handle_irq(irqnum);/' "$B/mod/irq_sim.c"
  grep -q 'generic_handle_irq(irqnum)' "$B/mod/irq_sim.c" || { echo "arm64-vm: irq_sim.c patch did not apply" >&2; exit 2; }
  printf 'obj-m := gpio-sim.o\ngpio-sim-y := gpio-sim-core.o irq_sim.o\n' > "$B/mod/Makefile"
  make -s -C "$H" M="$B/mod" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- CC=aarch64-linux-gnu-gcc-12 \
    CONFIG_DEBUG_INFO_BTF_MODULES= modules
  mkdir -p "$MDIR/extra"; aarch64-linux-gnu-strip --strip-debug -o "$MDIR/extra/gpio-sim.ko" "$B/mod/gpio-sim.ko"
  rm -rf "$B"; trap - EXIT
  depmod -b "$MBASE" "$KVER"
fi
KERNEL=$R/boot/vmlinuz-$KVER
[ "$mode" = setup ] && { echo "arm64-vm: cached in $C (kernel $KVER)"; exit 0; }

# --- run: a fresh initramfs around the given piconet, then boot it (qemu killed at the timeout)
BIN=${2:?usage: $0 run PICONET LIBC_ROOT}; LIBC=${3:?usage: $0 run PICONET LIBC_ROOT}
if [ ! -f "$BIN" ] || [ ! -f "$LIBC/lib/ld-linux-aarch64.so.1" ]; then
  echo "arm64-vm: no $BIN or no $LIBC/lib/ld-linux-aarch64.so.1" >&2; exit 2
fi
T=$(mktemp -d); qpid=""
cleanup() { [ -z "$qpid" ] || { kill -KILL "$qpid" 2>/dev/null || true; wait "$qpid" 2>/dev/null || true; }; rm -rf "$T"; }
trap cleanup EXIT
I=$T/root
mkdir -p "$I"/{bin,usr/bin,dev,proc,sys,tmp,root,lib/modules,lib/aarch64-linux-gnu}
cp "$R/bin/busybox" "$I/bin/busybox"
cp "$HERE/arm64-init" "$I/init"; chmod +x "$I/init"
aarch64-linux-gnu-strip -o "$I/usr/bin/piconet" "$BIN"
# Optional: piconet-node and piconet-hub, for a hub-and-node run on the arm64 kernel.
for x in "${4:-}:piconet-node" "${5:-}:piconet-hub"; do
  [ -z "${x%%:*}" ] || aarch64-linux-gnu-strip -o "$I/usr/bin/${x##*:}" "${x%%:*}"
done
cp -L "$LIBC/lib/ld-linux-aarch64.so.1" "$I/lib/"
for l in libc.so.6 libm.so.6 libgcc_s.so.1; do cp -L "$LIBC/lib/aarch64-linux-gnu/$l" "$I/lib/aarch64-linux-gnu/"; done
# The hub's MQTT export links libmosquitto1 and its OpenSSL (the stage's run-time root has them).
for l in libmosquitto.so.1 libssl.so.3 libcrypto.so.3; do
  for d in "$LIBC/usr/lib/aarch64-linux-gnu" "$LIBC/lib/aarch64-linux-gnu"; do
    [ -e "$d/$l" ] && { cp -L "$d/$l" "$I/lib/aarch64-linux-gnu/"; break; }
  done
done
cp -r "$ROOT/Boards" "$I/Boards"
: > "$I/lib/modules/order"
modprobe -d "$MBASE" -S "$KVER" --show-depends gpio-sim | awk '$1=="insmod"{print $2}' | awk '!seen[$0]++' | while read -r f; do
  b=$(basename "$f"); b=${b%.xz}
  case "$f" in *.xz) xz -dc "$f" > "$I/lib/modules/$b" ;; *) cp "$f" "$I/lib/modules/$b" ;; esac
  echo "$b" >> "$I/lib/modules/order"
done
(cd "$I" && find . | cpio -o -H newc --quiet | gzip -1) > "$T/initrd.gz"
echo "arm64-vm: kernel $KVER, initramfs $(du -h "$T/initrd.gz" | cut -f1) (modules: $(tr '\n' ' ' < "$I/lib/modules/order"))"
t0=$(date +%s)
# cortex-a53: the Pi 3 / Zero 2 W core (Armv8.0: no LSE atomics), so an instruction a Pi lacks traps here.
timeout --kill-after=10 "${PICONET_ARM64_VM_TIMEOUT:-600}" qemu-system-aarch64 -M virt -cpu cortex-a53 -smp 2 -m 512 \
  -accel tcg,tb-size=64 \
  -nographic -monitor none -serial stdio -no-reboot -kernel "$KERNEL" -initrd "$T/initrd.gz" \
  -append "console=ttyAMA0 panic=-1 quiet loglevel=3" </dev/null >"$T/console.log" 2>&1 &
qpid=$!
rc=0; wait "$qpid" || rc=$?; qpid=""
tr -d '\r' < "$T/console.log" | grep -E '^(PASS|FAIL|SKIP|  \||arm64-init)' || true
summary=$(tr -d '\r' < "$T/console.log" | grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' | tail -n 1 || true)
echo "arm64-vm: qemu exit $rc after $(( $(date +%s) - t0 )) s"
if [ -z "$summary" ]; then
  echo "arm64-vm: no result from the guest (qemu exit $rc; 124 = timed out); console tail:"; tr -d '\r' < "$T/console.log" | tail -n 30
  echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
echo "$summary"
grep -q ' 0 failed' <<<"$summary"
