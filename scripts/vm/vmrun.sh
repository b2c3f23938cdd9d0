#!/bin/bash
# Adapted from the shared recipe (../shared/vm/); the qemu command line of scripts/vm-test.
# Boot a throw-away VM whose root is this host's root (9p, read-only, with a
# tmpfs overlay on top) and run one script inside it as root; exit with that
# script's exit status (125 = the guest never reported one: panic, timeout...).
#
# usage: vmrun.sh WORKDIR SCRIPT [CWD]
#   WORKDIR  host dir shared read-write at the same path in the guest
#            (the guest writes WORKDIR/.vmtest/exit-status)
#   SCRIPT   absolute path of a sh script, run with /bin/sh in the guest
#   CWD      directory to cd into first (default WORKDIR)
# env: VM_KERNEL VM_INITRD (required; setup-host.sh writes them to vm.env)
#      VM_KROOT  dir where the kernel .deb was dpkg -x'ed: its modules appear at
#                /lib/modules/$(uname -r) in the guest (optional)
#      VM_MEM (default 512M), VM_SMP (2), VM_TIMEOUT (s, default 300),
#      VM_ACCEL (kvm|tcg; default kvm only if /dev/kvm AND vmx/svm exist), VM_CPU (tcg cpu model, max)
#      VM_TB_SIZE (MiB, TCG translation cache; 64 cuts qemu RSS from ~500 to ~270 MB)
#      VM_TIMESTAMPS=1  prefix every console line with seconds since qemu start
set -uo pipefail
WORK=$(realpath "$1"); SCRIPT=$2; CWD=${3:-$WORK}
: "${VM_KERNEL:?}" "${VM_INITRD:?}"
MEM=${VM_MEM:-512M}; SMP=${VM_SMP:-2}; TMO=${VM_TIMEOUT:-300}
if [ -z "${VM_ACCEL:-}" ]; then
  # /dev/kvm alone is not enough: on PVM hosts (kvm_pvm, no vmx/svm flag)
  # stock kernels hang in early boot. Use KVM only with real VT-x/AMD-V.
  if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then VM_ACCEL=kvm; else VM_ACCEL=tcg; fi
fi
if [ "$VM_ACCEL" = kvm ]; then ACC=(-accel kvm -cpu host); else ACC=(-accel "tcg,thread=multi${VM_TB_SIZE:+,tb-size=$VM_TB_SIZE}" -cpu "${VM_CPU:-max}"); fi
mkdir -p "$WORK/.vmtest"; rm -f "$WORK/.vmtest/exit-status"
stamp() {
  if [ "${VM_TIMESTAMPS:-0}" = 1 ]; then
    local t0=${EPOCHREALTIME/./} now e line
    while IFS= read -r line; do
      now=${EPOCHREALTIME/./}; e=$((now - t0))
      printf '[%3d.%02d] %s\n' $((e / 1000000)) $((e % 1000000 / 10000)) "$line"
    done
  else cat; fi
}
timeout --foreground -k 5 "$TMO" qemu-system-x86_64 "${ACC[@]}" -m "$MEM" -smp "$SMP" \
  -machine q35 -nodefaults -no-user-config -display none -no-reboot \
  -serial stdio -monitor none \
  -kernel "$VM_KERNEL" -initrd "$VM_INITRD" \
  -append "console=ttyS0 panic=-1 oops=panic quiet loglevel=4 rdinit=/init vmtest_work=$WORK vmtest_script=$SCRIPT vmtest_cwd=$CWD vmtest_kroot=${VM_KROOT:-}" \
  -fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap \
  -device virtio-9p-pci,fsdev=r,mount_tag=hostroot \
  -fsdev local,id=w,path="$WORK",security_model=none,multidevs=remap \
  -device virtio-9p-pci,fsdev=w,mount_tag=work \
  </dev/null 2>&1 | stamp
qrc=${PIPESTATUS[0]}
if [ -f "$WORK/.vmtest/exit-status" ]; then exit "$(cat "$WORK/.vmtest/exit-status")"; fi
echo "vmrun: no exit status from guest (qemu/timeout rc=$qrc)" >&2
exit 125
