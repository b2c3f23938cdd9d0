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

# sample SECONDS: the status LED every 50 ms, one digit per sample.
sample() { n=$(($1 * 20)); s=""; while [ $n -gt 0 ]; do s="$s$(cat "$LED")"; sleep 0.05; n=$((n - 1)); done; echo "$s"; }
# edges STRING: number of level changes.
edges() { echo "$1" | fold -w1 | awk 'NR > 1 && $1 != p {c++} {p = $1} END {print c + 0}'; }
wait_log() { i=0; while [ $i -lt $(($2 * 10)) ]; do grep -q "$1" "$W/node.log" && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }

"$PICONET_BIN_DIR/piconet-node" --name vm-node --interface lo --board sim --boards-dir "$PICONET_ROOT/Boards" \
  --accept ask --identity "$W/node.key" >"$W/node.log" 2>&1 &
NODE=$!
sleep 1
s=$(sample 4); e=$(edges "$s")
echo "  | advertising: $s"
[ "$e" -ge 2 ] && [ "$e" -le 6 ] && ok "advertising: slow blink ($e edges in 4 s)" || ko "advertising pattern ($e edges in 4 s)"

"$PICONET_BIN_DIR/piconet-hub" --interface lo --http off --db off --identity "$W/hub.key" --plain >"$W/hub.log" 2>&1 &
HUB=$!
if wait_log "invitation from" 30; then
  ok "the hub's invitation reached the node (consent: ask)"
  s=$(sample 2); e=$(edges "$s")
  echo "  | pending: $s"
  [ "$e" -ge 10 ] && ok "invitation pending: fast blink ($e edges in 2 s)" || ko "pending pattern ($e edges in 2 s)"
  echo pull-down > "$BUTTON"; sleep 0.2; echo pull-up > "$BUTTON"
  if wait_log ": connected" 15; then
    ok "a button press accepted the invitation: connected"
    sleep 0.5; s=$(sample 2)
    echo "  | paired: $s"
    [ "$(edges "$s")" = 0 ] && [ "${s#1}" != "$s" ] && ok "paired: status LED solid" || ko "paired pattern ($s)"
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
