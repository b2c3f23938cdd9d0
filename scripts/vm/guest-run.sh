#!/bin/sh
# PID 1's script inside the test VM (as root): runs every scripts/vm/guest.d/*.sh in
# name order and adds up their closing "N passed, N failed[, N skipped]" lines.
# Adding a suite to the VM stage is dropping a file into guest.d/.
# Environment: $VMTEST_WORK/vm-test.env (written by scripts/vm-test) sets
#   PICONET_ROOT       the checkout (read-only in the guest, writes go to a tmpfs overlay)
#   PICONET_TEST_BIN   the Swift test bundle (.build/debug/PiconetPackageTests.xctest)
#   PICONET_BIN_DIR    where the built executables are (piconet, ...)
#   PICONET_NODE_BIN   piconet-node as a board gets it (the Embedded Swift build)
#   PICONET_VM_ONLY    optional: run only guest.d scripts whose name contains this
. "$VMTEST_WORK/vm-test.env"
export PICONET_ROOT PICONET_TEST_BIN PICONET_BIN_DIR PICONET_NODE_BIN
P=0; F=0; S=0
echo "guest: kernel $(uname -r), $(nproc) cpus, uptime $(cut -d' ' -f1 /proc/uptime)s"
for t in "$PICONET_ROOT"/scripts/vm/guest.d/*.sh; do
  [ -f "$t" ] || continue
  n=$(basename "$t")
  case "$n" in *"${PICONET_VM_ONLY:-}"*) ;; *) continue ;; esac
  echo "guest: ==> $n"
  log=/tmp/guest-$n.log
  sh "$t" 2>&1 | tee "$log"
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
  if [ -z "$line" ]; then
    echo "guest: $n printed no 'N passed, N failed' line: counted as 1 failure"
    F=$((F + 1)); continue
  fi
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  s=$(echo "$line" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || true)
  P=$((P + p)); F=$((F + f)); S=$((S + ${s:-0}))
  echo "guest: <== $n: $line"
done
echo "guest: done at uptime $(cut -d' ' -f1 /proc/uptime)s"
echo "vm: $P passed, $F failed, $S skipped"
[ "$F" = 0 ] && [ "$P" -gt 0 ]
