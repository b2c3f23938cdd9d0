#!/bin/bash
# One-time (cacheable) host setup for the Bluetooth/GPIO test VM.
# Adapted from the shared recipe (../shared/vm/setup-host.sh); scripts/vm-test runs it.
# A second run is a no-op while the cache is complete (VM_REFRESH=1 rebuilds).
#   - installs qemu, busybox-static, BlueZ tools, libbluetooth/libgpiod dev + tools
#   - downloads Debian's bookworm-backports 6.12 kernel + headers + kernel source
#     with a private apt config (the host's apt sources are NOT changed, nothing
#     goes to /boot); the mirror is the one the host's own apt sources name
#   - builds gpio-sim.ko out of tree from the kernel source package
#     (Debian does not build CONFIG_GPIO_SIM), and likewise iio_dummy.ko with
#     industrialio-sw-device.ko (no CONFIG_IIO_SW_DEVICE / IIO_SIMPLE_DUMMY either;
#     its buffer part on, events off; the IIO core, buffers and triggers are Debian's modules)
#   - builds the initramfs
# usage: setup-host.sh [VM_DIR]      (default ${XDG_CACHE_HOME:-$HOME/.cache}/piconet-vm)
# result: VM_DIR/vm.env with VM_KERNEL, VM_INITRD, VM_KROOT for vmrun.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
VM_DIR=$(realpath -m "${1:-${XDG_CACHE_HOME:-$HOME/.cache}/piconet-vm}")
mkdir -p "$VM_DIR"
export DEBIAN_FRONTEND=noninteractive

# --- cached? (kernel, gpio-sim and iio_dummy modules and an initramfs newer than the scripts that make it)
if [ -z "${VM_REFRESH:-}" ] && [ -f "$VM_DIR/vm.env" ]; then
  ( set -a; . "$VM_DIR/vm.env"
    [ -f "$VM_KERNEL" ] && [ -f "$VM_INITRD" ] && [ -n "$(find "$VM_KROOT/lib/modules" -name gpio-sim.ko 2>/dev/null)" ] \
      && [ -n "$(find "$VM_KROOT/lib/modules" -name iio_dummy.ko 2>/dev/null)" ] \
      && [ "$VM_INITRD" -nt "$HERE/init" ] && [ "$VM_INITRD" -nt "$HERE/mkinitramfs.sh" ] ) \
    && { echo "setup-host: cached in $VM_DIR"; exit 0; }
fi

if [ "${SKIP_APT_INSTALL:-0}" != 1 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends \
    qemu-system-x86 busybox-static cpio xz-utils kmod \
    bluez bluez-test-tools bluez-test-scripts python3-dbus python3-gi dbus-daemon libbluetooth-dev libgpiod-dev gpiod \
    gcc gcc-12 make libc6-dev binutils libelf-dev >/dev/null
fi

# --- the Debian mirror the host already uses (deb822 or one-line format)
MIRROR=$(debian_mirror)
[ -n "$MIRROR" ] || { echo "setup-host: no Debian mirror found in the host's apt sources" >&2; exit 2; }

# --- private apt state for bookworm-backports (only used for apt-get download)
A=$VM_DIR/apt
mkdir -p "$A/lists/partial" "$A/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${MIRROR%/} bookworm-backports main" > "$A/sources.list"
APTOPTS=(-o "Dir::Etc::SourceList=$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
         -o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache"
         -o Dir::Etc::PreferencesParts=/dev/null -o APT::Sandbox::User=root)
apt-get "${APTOPTS[@]}" update -qq
# linux-image-amd64 (bpo) -> linux-image-6.12.NN+deb12-amd64
IMG=$(apt-cache "${APTOPTS[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ && !x {x=$2} END{print x}')
KVER=${IMG#linux-image-}                # e.g. 6.12.95+deb12-amd64
KBASE=${KVER%-amd64}                    # e.g. 6.12.95+deb12
KMAJ=$(echo "$KVER" | cut -d. -f1-2)    # e.g. 6.12
echo "kernel: $IMG"

R=$VM_DIR/root
if [ ! -f "$R/boot/vmlinuz-$KVER" ]; then
  rm -rf "$R" "$VM_DIR/debs"; mkdir -p "$R" "$VM_DIR/debs"
  (cd "$VM_DIR/debs" && apt-get "${APTOPTS[@]}" download -q \
      "$IMG" "linux-headers-$KVER" "linux-headers-$KBASE-common" "linux-kbuild-$KBASE")
  for d in "$VM_DIR"/debs/*.deb; do dpkg -x "$d" "$R"; done
  rm -rf "$VM_DIR/debs"
fi

# --- gpio-sim.ko from the kernel source package, built against the extracted headers
H=$R/usr/src/linux-headers-$KVER
sed -i "s#^include /usr/src/#include $R/usr/src/#" "$H/Makefile"   # headers' absolute include -> our copy
MDIR=$R/lib/modules/$KVER
if [ ! -f "$MDIR/extra/gpio-sim.ko" ]; then
  B=$(mktemp -d)
  (cd "$B" && apt-get "${APTOPTS[@]}" download -q "linux-source-$KMAJ")
  dpkg -x "$B"/linux-source-*.deb "$B/src"
  tar -xJf "$B"/src/usr/src/linux-source-"$KMAJ".tar.xz -C "$B" \
      "linux-source-$KMAJ/drivers/gpio/gpio-sim.c" "linux-source-$KMAJ/kernel/irq/irq_sim.c"
  mkdir -p "$B/mod"
  cp "$B/linux-source-$KMAJ/drivers/gpio/gpio-sim.c" "$B/mod/gpio-sim-core.c"
  cp "$B/linux-source-$KMAJ/kernel/irq/irq_sim.c" "$B/mod/irq_sim.c"
  # irq_to_desc() is not exported to modules: dispatch through generic_handle_irq()
  sed -i 's/handle_simple_irq(irq_to_desc(irqnum));/if (irqnum) generic_handle_irq(irqnum);/' "$B/mod/irq_sim.c"
  grep -q 'generic_handle_irq(irqnum)' "$B/mod/irq_sim.c" || { echo "setup-host: irq_sim.c patch did not apply" >&2; exit 2; }
  printf 'obj-m := gpio-sim.o\ngpio-sim-y := gpio-sim-core.o irq_sim.o\n' > "$B/mod/Makefile"
  make -s -C "$H" M="$B/mod" CONFIG_DEBUG_INFO_BTF_MODULES= modules
  mkdir -p "$MDIR/extra"; strip --strip-debug -o "$MDIR/extra/gpio-sim.ko" "$B/mod/gpio-sim.ko"
  rm -rf "$B"
fi
# --- iio_dummy.ko (drivers/iio/dummy: a configfs-made IIO device with an accel axis and a
# triggered buffer) and industrialio-sw-device.ko (the configfs 'devices' type it registers with)
if [ ! -f "$MDIR/extra/iio_dummy.ko" ]; then
  B=$(mktemp -d)
  (cd "$B" && apt-get "${APTOPTS[@]}" download -q "linux-source-$KMAJ")
  dpkg -x "$B"/linux-source-*.deb "$B/src"
  tar -xJf "$B"/src/usr/src/linux-source-"$KMAJ".tar.xz -C "$B" \
      "linux-source-$KMAJ/drivers/iio/dummy" "linux-source-$KMAJ/drivers/iio/industrialio-sw-device.c"
  mkdir -p "$B/mod"
  cp "$B/linux-source-$KMAJ"/drivers/iio/dummy/iio_simple_dummy{.c,.h,_buffer.c} "$B/linux-source-$KMAJ/drivers/iio/industrialio-sw-device.c" "$B/mod/"
  printf '%s\n' 'ccflags-y := -DCONFIG_IIO_SIMPLE_DUMMY_BUFFER' 'obj-m := iio_dummy.o industrialio-sw-device.o' \
    'iio_dummy-y := iio_simple_dummy.o iio_simple_dummy_buffer.o' > "$B/mod/Makefile"
  make -s -C "$H" M="$B/mod" CONFIG_DEBUG_INFO_BTF_MODULES= modules
  mkdir -p "$MDIR/extra"
  strip --strip-debug -o "$MDIR/extra/industrialio-sw-device.ko" "$B/mod/industrialio-sw-device.ko"
  strip --strip-debug -o "$MDIR/extra/iio_dummy.ko" "$B/mod/iio_dummy.ko"
  rm -rf "$B"
fi
depmod -b "$R" "$KVER"

# --- initramfs: 9p/overlay root + everything the tests need, preloaded
"$HERE/mkinitramfs.sh" "$R" "$KVER" "$VM_DIR/initrd.gz" \
   hci_vhci gpio-sim af_alg algif_hash algif_skcipher cmac ecb

cat > "$VM_DIR/vm.env" <<EOV
VM_KERNEL=$R/boot/vmlinuz-$KVER
VM_INITRD=$VM_DIR/initrd.gz
VM_KROOT=$R
EOV
echo "wrote $VM_DIR/vm.env:"; cat "$VM_DIR/vm.env"
