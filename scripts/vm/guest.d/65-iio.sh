#!/bin/sh
# A real kernel IIO accelerometer, as far as a VM can have one: the kernel's iio_dummy device
# (drivers/iio/dummy, built out of tree by setup-host.sh with industrialio-sw-device; Debian
# builds neither) made through configfs, paced by an hrtimer trigger piconet-node makes itself.
# piconet-node --motion iio:piconet_imu reads /dev/iio:deviceN on its epoll loop and streams to
# a piconet-hub over loopback. The dummy's one buffered axis, in_accel_x, is the constant 344
# with no scale: 344 m/s² = 35078 mg, saturated to 32767 mg, so the hub's activity (mean
# deviation from 1 g) is ~31767 mg, far above anything the simulated wearable makes (< 3000):
# the hub shows the kernel's values. Also: a wrong name (exit 69, the names there are), no
# permission (exit 1, the udev hint), and the device removed and made again while streaming.
# Prints "N passed, N failed, N skipped" last.
PASS=0; FAIL=0; SKIP=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
ko() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }
wait_for() { i=0; while [ $i -lt "$3" ]; do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }
W=/tmp/iio; rm -rf "$W"; mkdir -p "$W"
NODE=${PICONET_NODE_BIN:-$PICONET_BIN_DIR/piconet-node}; [ -x "$NODE" ] || NODE=$PICONET_BIN_DIR/piconet-node
HUB="$PICONET_BIN_DIR/piconet-hub"
# The VM stage builds both binaries and installs curl: one missing is a broken setup, a failure.
for need in "$NODE" "$HUB"; do [ -x "$need" ] || ko "$need not built (the VM stage builds it: scripts/vm-test)"; done
command -v curl >/dev/null || ko "curl is not installed (scripts/bootstrap installs it)"
[ "$FAIL" = 0 ] || { echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1; }

ip link set lo up; ip link set lo multicast on
[ -d /sys/kernel/config/iio ] || { modprobe configfs; mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; }
for m in industrialio industrialio-configfs industrialio-sw-trigger iio-trig-hrtimer industrialio-sw-device iio_dummy; do
  modprobe "$m" 2>"$W/modprobe.err" || { ko "modprobe $m: $(cat "$W/modprobe.err")"; }
done
DUMMY=/sys/kernel/config/iio/devices/dummy/piconet_imu
timeout 20 mkdir "$DUMMY" 2>"$W/mkdir.err" || ko "mkdir $DUMMY: $(cat "$W/mkdir.err")"
dev=$(grep -lx piconet_imu /sys/bus/iio/devices/iio:device*/name 2>/dev/null | head -n1)
if [ -n "$dev" ]; then
  d=$(dirname "$dev"); ok "iio_dummy 'piconet_imu' is $(basename "$d"): $(ls "$d/scan_elements" | grep -c _en) scan elements, /dev/$(basename "$d") $( [ -c "/dev/$(basename "$d")" ] && echo present || echo MISSING)"
else
  ko "no IIO device named piconet_imu after mkdir $DUMMY"; echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1
fi

# --- one-line errors
out=$("$NODE" --interface lo --accept all --identity "$W/e.key" --motion iio:nope --duration 2 2>&1); rc=$?
echo "  | $(echo "$out" | tail -n1)"
[ $rc = 69 ] && echo "$out" | grep -q "no IIO device named 'nope' (devices here: .*'piconet_imu'" \
  && ok "--motion iio:nope: names the devices there are, exit 69" || ko "wrong name: exit $rc"
if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  mkdir -p "$W/nobody"; chown nobody "$W/nobody"
  out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$NODE" --interface lo --accept all --identity "$W/nobody/e.key" \
        --motion iio:piconet_imu --duration 2 2>&1); rc=$?
  echo "  | $(echo "$out" | grep -i permission | tail -n1)"
  echo "$out" | grep -q "permission denied on /sys/bus/iio/devices/iio:device[0-9]*/.*udev rule" \
    && [ $rc = 77 ] && ok "as nobody: permission denied names the file and the udev rule, exit 77 (EX_NOPERM)" \
    || { ko "as nobody: exit $rc (want 77 and the udev rule)"; echo "$out" | tail -n 3; }
else SKIP=$((SKIP + 1)); echo "SKIP: no user nobody / setpriv for the permission check"; fi

# --- node + hub: the hub shows the kernel's values
PORT=18096
"$HUB" --invite auto --transport wifi --interface lo --http 127.0.0.1:$PORT --db off --plain --name iio-hub \
  --identity "$W/hub.key" > "$W/hub.log" 2>&1 &
HUBPID=$!
"$NODE" --transport wifi --interface lo --accept all --name imu-node --identity "$W/node.key" \
  --motion iio:piconet_imu --motion-hz 50 > "$W/node.log" 2>&1 &
NODEPID=$!
wait_for "$W/node.log" "motion from iio:piconet_imu" 100 \
  && ok "node: $(grep -m1 -o 'motion from iio:.*' "$W/node.log")" || ko "node: no 'motion from iio:piconet_imu'"
if ! grep -q "motion from iio:piconet_imu" "$W/node.log"; then
  echo "  --- node log"; tail -n 20 "$W/node.log"; echo "  --- hub log"; tail -n 5 "$W/hub.log"
  kill -TERM $NODEPID $HUBPID 2>/dev/null; wait $NODEPID $HUBPID 2>/dev/null; timeout 20 rmdir "$DUMMY" 2>/dev/null
  echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1
fi
T=$(grep -lx piconet-piconet_imu /sys/bus/iio/devices/trigger*/name 2>/dev/null | head -n1)
[ -n "$T" ] && ok "hrtimer trigger made by the node: $(dirname "$T" | xargs basename) at $(cat "$(dirname "$T")/sampling_frequency") Hz" \
  || ko "no hrtimer trigger piconet-piconet_imu"
activity=""; i=0
while [ $i -lt 60 ]; do
  json=$(curl -s --max-time 2 "http://127.0.0.1:$PORT/api/nodes")
  activity=$(echo "$json" | grep -oE '"activity":[0-9.]+' | head -n1 | cut -d: -f2 | cut -d. -f1)
  [ -n "$activity" ] && [ "$activity" -gt 30000 ] && break
  sleep 1; i=$((i + 1))
done
echo "  | /api/nodes: $(echo "$json" | cut -c1-240)"
[ -n "$activity" ] && [ "$activity" -gt 30000 ] && [ "$activity" -lt 32000 ] \
  && ok "hub /api/nodes: imu-node activity $activity mg, the dummy's saturated 344 m/s² (not simulated motion)" \
  || ko "hub activity '$activity' is not the dummy's ~31767 mg"

# --- the device removed while streaming, then made again: lost, looked up by name, streaming again
timeout 20 rmdir "$DUMMY" || ko "rmdir $DUMMY (exit $?)"
wait_for "$W/node.log" "piconet_imu went away" 100 && ok "node: $(grep -m1 -o 'motion: iio:piconet_imu went away.*' "$W/node.log")" \
  || ko "node did not notice the device removed"
sleep 2
timeout 20 mkdir "$DUMMY" || ko "mkdir $DUMMY again (exit $?)"
i=0; while [ $i -lt 80 ] && [ "$(grep -c 'motion from iio:piconet_imu' "$W/node.log")" -lt 2 ]; do sleep 0.5; i=$((i + 1)); done
[ "$(grep -c 'motion from iio:piconet_imu' "$W/node.log")" -ge 2 ] \
  && ok "node streams again after the device came back: $(grep 'motion from iio' "$W/node.log" | tail -n1 | grep -o 'iio:device[0-9]*')" \
  || ko "node did not stream again within 40 s"
grep "motion" "$W/node.log" | sed 's/^/  node| /' | head -n 8

kill -TERM $NODEPID $HUBPID 2>/dev/null
wait $NODEPID; nrc=$?
wait $HUBPID
[ $nrc = 0 ] && ok "piconet-node --motion iio exits 0 on SIGTERM" || ko "piconet-node exit $nrc on SIGTERM"
[ "$FAIL" != 0 ] && { echo "  --- node log"; tail -n 20 "$W/node.log"; echo "  --- hub log"; tail -n 10 "$W/hub.log"; }
timeout 20 rmdir "$DUMMY" 2>/dev/null
rmdir /sys/kernel/config/iio/triggers/hrtimer/piconet-piconet_imu 2>/dev/null
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
