#!/bin/sh
# Bluetooth in the test VM: two virtual controllers (hci_vhci + btvirt -l2: hci0, hci1 in one
# emulated piconet), then Piconet's Swift suites against them as root:
#   L2CAPScanVMTests      LE advertising (mgmt Add Advertising) on hci0 found by Piconet's
#                         scanner on hci1 with hash, PSM, name; lost after it stops
#   L2CAPVMTests          LE CoC + BR/EDR channels hci1 -> hci0 (MTUs, 1,000 mixed messages),
#                         deferred setup, adapter missing, peer gone mid-transfer, adapter down
#   L2CAPTests, BluetoothManagementTests   the unit suites, here with a Bluetooth kernel
#   piconet-l2cap-session  a Piconet session over LE and BR/EDR channels, one process per controller
# and BlueZ's l2cap-tester as a reference (its summary line is printed).
# Order matters (shared/vm/README lessons): scan before connecting; the "advertising"
# setting (needed for LE connects) overrides add-adv instances, so it is switched on after.
# Prints "N passed, N failed, N skipped" last.
PASS=0; FAIL=0; SKIP=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
ko() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }
up() { cut -d' ' -f1 /proc/uptime; }

[ -e /dev/vhci ] || modprobe hci_vhci || ko "modprobe hci_vhci"
btvirt -l2 > /tmp/btvirt.log 2>&1 &
BTVIRT=$!
for i in $(seq 50); do [ -e /sys/class/bluetooth/hci1 ] && break; sleep 0.1; done
if [ ! -e /sys/class/bluetooth/hci1 ]; then
  ko "btvirt made no hci0/hci1"; cat /tmp/btvirt.log
  echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1
fi
for i in 0 1; do
  for s in "le on" "bredr on" "connectable on" "power on"; do btmgmt --index $i $s >/dev/null 2>&1 || ko "btmgmt -i $i $s"; done
done
A0=$(hciconfig hci0 | awk '/BD Address/{print $3}'); A1=$(hciconfig hci1 | awk '/BD Address/{print $3}')
ok "two virtual controllers up: hci0=$A0 hci1=$A1"

# swift_suite FILTER LOGNAME: runs the test bundle, adds its passed/failed/skipped counts.
swift_suite() {
  PICONET_BT_VM=1 "$PICONET_TEST_BIN" --testing-library swift-testing --filter "$1" > "/tmp/swift-$2.log" 2>&1
  rc=$?
  grep -E '^. (Test|Suite) |^(l2cap|peer gone|adapter|deferred|scan|lost) ' "/tmp/swift-$2.log" | grep -vE ' started\.$'
  # One line per test: "✔ Test name() passed after", "✘ Test name() failed after", "➜ Test name() skipped"
  # (not the "Test run ..." totals, not the per-issue lines).
  p=$(grep -E '^✔ Test .* passed after' "/tmp/swift-$2.log" | grep -vc '^✔ Test run ')
  f=$(grep -E '^✘ Test .* failed after' "/tmp/swift-$2.log" | grep -vc '^✘ Test run ')
  s=$(grep -cE '^➜ Test .* skipped' "/tmp/swift-$2.log")
  PASS=$((PASS + p)); FAIL=$((FAIL + f)); SKIP=$((SKIP + s))
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then ko "swift test bundle exited $rc ($2)"; tail -n 30 "/tmp/swift-$2.log"; fi
  [ "$p" -gt 0 ] || { ko "no Swift test passed for '$1' (filter matched nothing?)"; tail -n 30 "/tmp/swift-$2.log"; }
}

t=$(up)
swift_suite 'L2CAPScanVMTests' scan
echo "  (scan suite: ${t}s -> $(up)s)"

btmgmt --index 0 advertising on >/dev/null 2>&1 || ko "btmgmt -i 0 advertising on"   # LE connects need an advertising target
t=$(up)
swift_suite 'L2CAPVMTests|L2CAPTests|BluetoothManagementTests' l2cap
echo "  (L2CAP suites: ${t}s -> $(up)s)"

# A Piconet session (invitation, Noise XX, 50 reliable echoed in order + 50 unreliable) over
# one L2CAP channel, one process per controller.
SESSION="$PICONET_BIN_DIR/piconet-l2cap-session"
if [ -x "$SESSION" ]; then
  btmgmt --index 0 advertising on >/dev/null 2>&1   # again: the peer-gone test power-cycled hci0
  for kind in le bredr; do
    if [ $kind = le ]; then psm=135; else psm=4109; fi
    "$SESSION" accept hci0 $psm $kind > /tmp/session-accept.log 2>&1 & S=$!
    for i in $(seq 100); do grep -q ready /tmp/session-accept.log && break; sleep 0.1; done
    t=$(up)
    out=$(timeout 150 "$SESSION" invite hci1 "$A0" $psm $kind 50 2>&1); rc=$?
    sleep 0.5; kill $S 2>/dev/null; wait $S 2>/dev/null
    grep SESSION /tmp/session-accept.log | sed 's/^/  accept| /'
    if [ $rc = 0 ]; then ok "session over L2CAP $kind, two processes (${t}s -> $(up)s): $out"
    else ko "session over L2CAP $kind (exit $rc): $out"; fi
  done
else
  SKIP=$((SKIP + 1)); echo "SKIP: session over L2CAP: $SESSION not built"
fi

# rfkill: a blocked adapter must give the one-line error naming `rfkill unblock bluetooth`.
# (No rfkill tool on the host root: the switches are set through sysfs.)
rfkill_bt() { for r in /sys/class/rfkill/rfkill*; do [ "$(cat "$r/type" 2>/dev/null)" = bluetooth ] && echo "$1" > "$r/soft"; done; }
PROBE="$PICONET_BIN_DIR/piconet-l2cap-probe"
if [ -x "$PROBE" ] && ls /sys/class/rfkill/rfkill* >/dev/null 2>&1; then
  rfkill_bt 1; sleep 0.5
  out=$("$PROBE" sink hci0 137 le 1 2>&1); rc=$?
  rfkill_bt 0; sleep 0.5
  echo "  | $out"
  [ $rc = 2 ] && echo "$out" | grep -q "blocked by rfkill: run \`rfkill unblock bluetooth\`" \
    && ok "rfkill-blocked adapter: one-line error naming rfkill unblock" || ko "rfkill error (exit $rc)"
else
  SKIP=$((SKIP + 1)); echo "SKIP: rfkill check (no rfkill switch in sysfs or no probe)"
fi

if [ "${PICONET_SKIP_L2CAP_TESTER:-0}" = 1 ]; then
  SKIP=$((SKIP + 1)); echo "SKIP: l2cap-tester (PICONET_SKIP_L2CAP_TESTER=1)"
elif command -v l2cap-tester >/dev/null; then
  # The reference suite makes its own emulated controllers; free ours first.
  kill $BTVIRT 2>/dev/null; wait $BTVIRT 2>/dev/null
  t=$(up)
  timeout 300 l2cap-tester > /tmp/l2cap-tester.log 2>&1
  summary=$(grep -a '^Total' /tmp/l2cap-tester.log | sed 's/\x1b\[[0-9;]*m//g' | tail -n1)
  echo "  l2cap-tester (BlueZ reference): ${summary:-no summary line} (${t}s -> $(up)s)"
  # A reference for the kernel and emulator, not a test of Piconet: it passes when it ran and
  # reported; its own failures are listed (on this VM "LE Client - Close socket 2" times out now and then).
  grep -aE 'Failed|Timed out|Not Run' /tmp/l2cap-tester.log | grep -v '^Total' | sed 's/\x1b\[[0-9;]*m//g; s/^/  reference: /'
  if [ -n "$summary" ]; then ok "l2cap-tester ran as a reference: $summary"; else ko "l2cap-tester printed no summary"; tail -n 20 /tmp/l2cap-tester.log; fi
else
  SKIP=$((SKIP + 1)); echo "SKIP: l2cap-tester not installed (bluez-test-tools)"
fi
kill $BTVIRT 2>/dev/null

echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
