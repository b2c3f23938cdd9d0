#!/bin/sh
# Runs INSIDE the test VM for scripts/bench.d/70-l2cap (as root): L2CAP LE CoC and BR/EDR
# between btvirt's two emulated controllers (hci1 -> hci0), Piconet's L2CAPChannel on the
# EpollLoop (piconet-l2cap-probe) beside BlueZ's l2test (throughput) and a blocking C
# ping-pong (round trips), in the same VM run. Prints BENCH rows (tab-separated, as
# scripts/bench documents). Emulated controllers: the figures say how Piconet's endpoint
# compares with BlueZ's own tools on the same kernel path, not what a radio does.
. "$VMTEST_WORK/bench.env"
COUNT=${L2CAP_BENCH_COUNT:-1000}; SIZE=${L2CAP_BENCH_SIZE:-600}; PINGS=${L2CAP_BENCH_PINGS:-300}
[ -e /dev/vhci ] || modprobe hci_vhci
btvirt -l2 > /tmp/btvirt.log 2>&1 &
for i in $(seq 50); do [ -e /sys/class/bluetooth/hci1 ] && break; sleep 0.1; done
for i in 0 1; do for s in "le on" "bredr on" "connectable on" "power on"; do btmgmt --index $i $s >/dev/null 2>&1; done; done
btmgmt --index 0 advertising on >/dev/null 2>&1
A0=$(hciconfig hci0 | awk '/BD Address/{print $3}')
echo "bench: hci0=$A0, $COUNT x $SIZE-byte messages, $PINGS round trips of 64 bytes, $(nproc) vCPUs (TCG)"

# wait_ready LOG: until a server printed "ready" (or 10 s).
wait_ready() { for i in $(seq 100); do grep -q ready "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0 || a == "") print "n/a"; else printf "%.2f", a / b }'; }
row() { printf 'BENCH\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "${2:-n/a}" "$3" "$4" "${5:-n/a}" "$(ratio "$2" "$5")"; }

# l2test_tput KIND PSM: KB/s at the l2test receiver (sum of its per-chunk lines).
l2test_tput() {
  v=""; [ "$1" = le ] && v="-V le_public"
  l2test -r -i hci0 $v -P "$2" -b 60000 > /tmp/l2r.log 2>&1 & R=$!
  sleep 0.5
  timeout 120 l2test -s -i hci1 $v -P "$2" -N "$COUNT" -b "$SIZE" "$A0" > /tmp/l2s.log 2>&1
  sleep 1; kill $R 2>/dev/null; wait $R 2>/dev/null
  awk '/bytes in .* sec/ { for (i = 1; i <= NF; i++) { if ($(i+1) == "bytes") b += $i; if ($(i+1) == "sec,") s += $i } }
       END { if (s > 0) printf "%.1f", b / s / 1024 }' /tmp/l2r.log
}

# piconet_tput KIND PSM: KB/s at the Piconet sink.
piconet_tput() {
  "$PROBE" sink hci0 "$2" "$1" "$COUNT" > /tmp/ps.log 2>&1 & S=$!
  wait_ready /tmp/ps.log
  timeout 120 "$PROBE" source hci1 "$A0" "$2" "$1" "$COUNT" "$SIZE" > /tmp/pc.log 2>&1 || cat /tmp/pc.log >&2
  sleep 0.5; kill $S 2>/dev/null; wait $S 2>/dev/null
  awk '/^RECV/ { printf "%.1f", $4 }' /tmp/ps.log
}

# rtt TOOL KIND PSM: "P50 P99" microseconds.
rtt() {
  if [ "$1" = c ]; then "$PINGPONG" echo "$A0" "$3" "$2" > /tmp/e.log 2>&1 & E=$!
  else "$PROBE" echo hci0 "$3" "$2" > /tmp/e.log 2>&1 & E=$!; fi
  wait_ready /tmp/e.log
  A1=$(hciconfig hci1 | awk '/BD Address/{print $3}')
  if [ "$1" = c ]; then timeout 120 "$PINGPONG" ping "$A1" "$A0" "$3" "$2" "$PINGS" 64
  else timeout 120 "$PROBE" ping hci1 "$A0" "$3" "$2" "$PINGS" 64; fi
  kill $E 2>/dev/null; wait $E 2>/dev/null
}

for kind in le bredr; do
  if [ $kind = le ]; then p1=131; p2=133; p3=135; p4=137; else p1=4101; p2=4103; p3=4105; p4=4107; fi
  base=$(l2test_tput $kind $p1); pic=$(piconet_tput $kind $p2)
  row "l2cap-$kind-tput(emu)" "$pic" "KB/s" "l2test-$kind" "$base"
  set -- $(rtt c $kind $p3); c50=${1:-}; c99=${2:-}
  set -- $(rtt piconet $kind $p4); p50=${1:-}; p99=${2:-}
  row "l2cap-$kind-rtt-p50(emu)" "$p50" "us" "c-blocking-$kind" "$c50"
  row "l2cap-$kind-rtt-p99(emu)" "$p99" "us" "c-blocking-$kind" "$c99"
done
echo "bench: done"
