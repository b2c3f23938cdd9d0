#!/bin/sh
# A real node's LEDs and consent button, end to end: piconet-node --board sim --accept ask
# on a gpio-sim chip, a real piconet-hub on the guest's loopback (mDNS + Noise invitation).
# The status LED is read back from gpio-sim's sysfs: slow blink while advertising, fast
# blink while the invitation waits, solid once the button (a pull flip) accepted it, off
# after the node exits. Prints "N passed, N failed, N skipped" last.
PASS=0; FAIL=0; SKIP=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
ko() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }
W=/tmp/node-leds; rm -rf "$W"; mkdir -p "$W"

# The chip labelled piconet-sim (made by 10-gpio.sh, or here if that did not run).
[ -d /sys/kernel/config/gpio-sim ] || modprobe gpio-sim
SIM=""
for c in /sys/kernel/config/gpio-sim/*/; do
  [ "$(cat "$c/bank0/label" 2>/dev/null)" = piconet-sim ] && [ "$(cat "$c/live")" = 1 ] || continue
  SIM="/sys/devices/platform/$(cat "$c/dev_name")/$(cat "$c/bank0/chip_name")"
done
if [ -z "$SIM" ]; then
  C=/sys/kernel/config/gpio-sim/nodeleds
  mkdir "$C" "$C/bank0" && echo 32 > "$C/bank0/num_lines" && echo piconet-sim > "$C/bank0/label" && echo 1 > "$C/live" \
    && SIM="/sys/devices/platform/$(cat "$C/dev_name")/$(cat "$C/bank0/chip_name")"
fi
[ -n "$SIM" ] && ok "gpio-sim chip piconet-sim at $SIM" || { ko "no gpio-sim chip"; echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1; }
LED=$SIM/sim_gpio17/value; BUTTON=$SIM/sim_gpio27/pull
echo pull-up > "$BUTTON"

ip link set lo up; ip link set lo multicast on

# sample SECONDS: reads the status LED in a tight loop of shell builtins (no fork per
# sample: in an emulated VM a fork costs more than a blink) for SECONDS of /proc/uptime,
# and prints "edges-per-second duty-percent samples".
sample() {
  read t0 _ < /proc/uptime; t0=${t0%.*}${t0#*.}; end=$((t0 + $1 * 100))
  n=0; on=0; e=0; prev=""
  while :; do
    read now _ < /proc/uptime; now=${now%.*}${now#*.}
    [ "$now" -ge "$end" ] && break
    read v < "$LED"; n=$((n + 1)); [ "$v" = 1 ] && on=$((on + 1))
    [ -n "$prev" ] && [ "$v" != "$prev" ] && e=$((e + 1)); prev=$v
  done
  echo "$((e * 100 / $1)) $((on * 100 / (n > 0 ? n : 1))) $n"
}
wait_log() { i=0; while [ $i -lt $(($2 * 10)) ]; do grep -q "$1" "$W/node.log" && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }

"${PICONET_NODE_BIN:-$PICONET_BIN_DIR/piconet-node}" --name vm-node --interface lo --board sim --boards-dir "$PICONET_ROOT/Boards" \
  --accept ask --identity "$W/node.key" >"$W/node.log" 2>&1 &
NODE=$!
sleep 1
set -- $(sample 6); echo "  | advertising: $(($1 / 100)).$(($1 % 100)) edges/s, on ${2}% of $3 samples"
# 0.5 s on every 2 s: 1 edge/s, on 25 % of the time.
[ "$1" -ge 50 ] && [ "$1" -le 200 ] && [ "$2" -ge 12 ] && [ "$2" -le 40 ] \
  && ok "advertising: slow blink ($1/100 edges/s, on $2%)" || ko "advertising pattern ($1/100 edges/s, on $2%)"

"$PICONET_BIN_DIR/piconet-hub" --invite auto --interface lo --http off --db off --identity "$W/hub.key" --plain >"$W/hub.log" 2>&1 &
HUB=$!
if wait_log "invitation from" 30; then
  ok "the hub's invitation reached the node (consent: ask)"
  set -- $(sample 3); echo "  | pending: $(($1 / 100)).$(($1 % 100)) edges/s, on ${2}% of $3 samples"
  # 125 ms on, 125 ms off: 8 edges/s, on half the time.
  [ "$1" -ge 400 ] && [ "$2" -ge 30 ] && [ "$2" -le 70 ] \
    && ok "invitation pending: fast blink ($1/100 edges/s, on $2%)" || ko "pending pattern ($1/100 edges/s, on $2%)"
  echo pull-down > "$BUTTON"; sleep 0.2; echo pull-up > "$BUTTON"
  if wait_log ": connected" 15; then
    ok "a button press accepted the invitation: connected"
    sleep 0.5; set -- $(sample 2); echo "  | paired: $(($1 / 100)).$(($1 % 100)) edges/s, on ${2}% of $3 samples"
    [ "$1" = 0 ] && [ "$2" = 100 ] && ok "paired: status LED solid (on 100% of $3 samples)" || ko "paired pattern ($1/100 edges/s, on $2%)"
  else
    ko "no connection after the button press"; tail -n 15 "$W/node.log"
  fi
else
  ko "no invitation reached the node"; tail -n 15 "$W/node.log"; tail -n 15 "$W/hub.log"
fi
kill -TERM "$NODE"; wait "$NODE"; rc=$?
[ "$rc" = 0 ] && [ "$(cat "$LED")" = 0 ] && ok "node exits 0 on SIGTERM and leaves the LED off" || ko "node exit $rc, LED $(cat "$LED")"
kill -TERM "$HUB"; wait "$HUB"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
