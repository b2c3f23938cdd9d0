#!/bin/bash
# Adapted from the shared recipe (../shared/vm/); packed by setup-host.sh.
# usage: mkinitramfs.sh KERNEL_ROOT KVER OUT.cpio.gz [extra modules...]
# KERNEL_ROOT: where the kernel .deb was dpkg -x'ed (has lib/modules/KVER or usr/lib/modules/KVER)
set -euo pipefail
KROOT=$1 KVER=$2 OUT=$3; shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
MODS="virtio_pci 9pnet_virtio 9p overlay configfs $*"
if [ -d "$KROOT/usr/lib/modules/$KVER" ]; then MBASE=$KROOT/usr; else MBASE=$KROOT; fi
MDIR=$MBASE/lib/modules/$KVER
[ -f "$MDIR/modules.dep" ] || depmod -b "$MBASE" "$KVER"
T=$(mktemp -d)
mkdir -p "$T"/{bin,dev,proc,sys,lib/modules,newroot}
cp /bin/busybox "$T/bin/busybox"        # from busybox-static
cp "$HERE/init" "$T/init"; chmod +x "$T/init"
: > "$T/lib/modules/order"
for m in $MODS; do
  modprobe -d "$MBASE" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}' \
    || echo "mkinitramfs: $m not found as a module (built in?), skipped" >&2
done | awk '!seen[$0]++' | while read -r f; do
  b=$(basename "$f"); b=${b%.xz}; b=${b%.zst}
  case "$f" in
    *.xz)  xz -dc "$f" > "$T/lib/modules/$b" ;;
    *.zst) zstd -dc "$f" > "$T/lib/modules/$b" ;;
    *)     cp "$f" "$T/lib/modules/$b" ;;
  esac
  echo "$b" >> "$T/lib/modules/order"
done
(cd "$T" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT"
echo "initramfs $OUT: $(du -h "$OUT" | cut -f1), modules: $(tr '\n' ' ' < "$T/lib/modules/order")"
rm -rf "$T"
