#!/bin/sh
# Bluetooth in the test VM: two virtual controllers (hci_vhci + btvirt -l2: hci0, hci1 in one
# emulated piconet), then Piconet's Swift suites against them as root:
#   L2CAPScanVMTests      LE advertising (mgmt Add Advertising) on hci0 found by Piconet's
#                         scanner on hci1 with hash, PSM, name; lost after it stops
#   L2CAPVMTests          LE CoC + BR/EDR channels hci1 -> hci0 (MTUs, 1,000 mixed messages),
#                         deferred setup, adapter missing, peer gone mid-transfer, adapter down
#   L2CAPTests, BluetoothManagementTests   the unit suites, here with a Bluetooth kernel
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
