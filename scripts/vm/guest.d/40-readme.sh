#!/bin/sh
# README.md's and docs/*.md's Bluetooth examples, run as written in the test VM (the blocks marked
# `<!-- readme-test: vm … -->`; the readme stage runs the others on the host): two virtual
# controllers (hci_vhci + btvirt -l2: hci0 = 00:AA:01:00:00:00, hci1) and a dummy `wlan0`
# for the examples that name one. scripts/lib/readme_examples.py --vm does the running.
# Prints "N passed, N failed, N skipped" last.
PASS=0; FAIL=0; SKIP=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
ko() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }

[ -e /dev/vhci ] || modprobe hci_vhci || ko "modprobe hci_vhci"
btvirt -l2 > /tmp/btvirt-readme.log 2>&1 &
BTVIRT=$!
for i in $(seq 50); do [ -e /sys/class/bluetooth/hci1 ] && break; sleep 0.1; done
if [ ! -e /sys/class/bluetooth/hci1 ]; then
  ko "btvirt made no hci0/hci1"; cat /tmp/btvirt-readme.log
  echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1
fi
for i in 0 1; do
  for try in 1 2 3 4 5; do
    for s in "le on" "bredr on" "connectable on" "power on"; do btmgmt --index $i $s >/dev/null 2>&1; done
    btmgmt --index $i info 2>/dev/null | grep -m1 "current settings" | grep -qE "powered.* le( |$)" && break
    sleep 1
  done
done
ok "controllers up: hci0=$(hciconfig hci0 | awk '/BD Address/{print $3}') hci1=$(hciconfig hci1 | awk '/BD Address/{print $3}')"
ip link set lo up   # the hub example serves HTTP on 127.0.0.1 (run alone, no other guest script did this)
if ip link add wlan0 type dummy 2>/dev/null && ip link set wlan0 multicast on up && ip addr add 10.79.9.1/24 dev wlan0; then
  ok "dummy wlan0 (10.79.9.1/24) for the examples that name it"
else
  ko "cannot make a dummy wlan0 (modprobe dummy?)"
fi

python3 "$PICONET_ROOT/scripts/lib/readme_examples.py" --vm --readme "$PICONET_ROOT/README.md" \
  --docs "$PICONET_ROOT/docs" --root "$PICONET_ROOT" --bin "$PICONET_BIN_DIR" 2>&1 | tee /tmp/readme-vm.log
line=$(grep -E '^readme-vm: [0-9]+ passed, [0-9]+ failed' /tmp/readme-vm.log | tail -n1)
if [ -n "$line" ]; then
  PASS=$((PASS + $(echo "$line" | sed -E 's/^readme-vm: ([0-9]+) passed.*/\1/')))
  FAIL=$((FAIL + $(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')))
  SKIP=$((SKIP + $(echo "$line" | sed -E 's/.* ([0-9]+) skipped.*/\1/')))
else
  ko "readme_examples.py --vm printed no summary"
fi
ip link del wlan0 2>/dev/null
kill $BTVIRT 2>/dev/null; wait $BTVIRT 2>/dev/null
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
