#!/bin/sh
# The main job over Bluetooth: a real piconet-hub (--transport bluetooth on hci0: LE scanning,
# invitations over L2CAP) and a real piconet-node (--transport bluetooth on hci1: LE
# advertising, L2CAP listener, --accept all) between the two virtual controllers. The hub's
# /api/nodes must show the node connected with a plausible bpm within a bounded time; then
# SIGTERM to both must end them with exit 0. Then both with --transport any (Wi-Fi = lo): one
# node, invited over Wi-Fi only. Also: --transport/--adapter misuse is exit 64, a missing adapter exit 1.
# Prints "N passed, N failed, N skipped" last.
PASS=0; FAIL=0; SKIP=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
ko() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }
up() { cut -d' ' -f1 /proc/uptime; }
# start_any TAG SEED: hub and node both with --transport any (Wi-Fi = lo, Bluetooth hci0/hci1),
# named TAG-hub / TAG-node, logs $W/hub-TAG.log / $W/node-TAG.log, HTTP on $PORT.
start_any() {
  "$HUB" --invite auto --transport any --adapter hci0 --interface lo --http 127.0.0.1:$PORT --db off --plain --name "$1-hub" \
    --identity "$W/hub.key" > "$W/hub-$1.log" 2>&1 &
  HUBPID=$!
  "$NODE" --transport any --adapter hci1 --interface lo --accept all --name "$1-node" --identity "$W/node.key" --seed "$2" \
    > "$W/node-$1.log" 2>&1 &
  NODEPID=$!
}
# wait_connected SECONDS: polls /api/nodes on $PORT until a connected node with a bpm shows;
# sets found=1 (or empty), i = seconds waited, json = the last answer.
wait_connected() {
  found=""; i=0
  while [ $i -lt "$1" ]; do
    json=$(curl -s --max-time 2 "http://127.0.0.1:$PORT/api/nodes")
    echo "$json" | grep -q '"state":"connected"' && echo "$json" | grep -qE '"bpm":[0-9]' && { found=1; break; }
    sleep 1; i=$((i + 1))
  done
}
W=/tmp/main-job-bt; rm -rf "$W"; mkdir -p "$W"
NODE="${PICONET_NODE_BIN:-$PICONET_BIN_DIR/piconet-node}"; HUB="$PICONET_BIN_DIR/piconet-hub"
if [ ! -x "$NODE" ] || [ ! -x "$HUB" ] || ! command -v curl >/dev/null; then
  SKIP=$((SKIP + 1)); echo "SKIP: needs piconet-node, piconet-hub in $PICONET_BIN_DIR and curl"
  echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 0
fi

# Misuse is a one-line error and exit 64, before any radio is touched.
"$NODE" --transport nfc > "$W/bad.log" 2>&1; rc=$?
[ $rc = 64 ] && grep -q "transport takes wifi, bluetooth or any" "$W/bad.log" && ok "piconet-node --transport nfc: exit 64, one line" \
  || { ko "piconet-node --transport nfc (exit $rc)"; cat "$W/bad.log"; }
"$NODE" --security medium > "$W/bad.log" 2>&1; rc=$?
[ $rc = 64 ] && grep -q "security and --pairing need --transport bluetooth or any" "$W/bad.log" && ok "piconet-node --security without Bluetooth: exit 64, one line" \
  || { ko "piconet-node --security without Bluetooth (exit $rc)"; cat "$W/bad.log"; }
"$HUB" --adapter hci0 --db off --http off > "$W/bad.log" 2>&1; rc=$?
[ $rc = 64 ] && grep -q "adapter needs --transport bluetooth or any" "$W/bad.log" && ok "piconet-hub --adapter without --transport: exit 64" \
  || { ko "piconet-hub --adapter without --transport (exit $rc)"; cat "$W/bad.log"; }

# Two virtual controllers (as in 20-bluetooth.sh; that suite frees its own at the end).
[ -e /dev/vhci ] || modprobe hci_vhci || ko "modprobe hci_vhci"
btvirt -l2 > "$W/btvirt.log" 2>&1 &
BTVIRT=$!
for i in $(seq 50); do [ -e /sys/class/bluetooth/hci1 ] && break; sleep 0.1; done
[ -e /sys/class/bluetooth/hci1 ] || { ko "btvirt made no hci0/hci1"; echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1; }
for i in 0 1; do
  for try in 1 2 3 4 5; do
    for s in "le on" "bredr on" "connectable on" "power on"; do btmgmt --index $i $s >/dev/null 2>&1; done
    btmgmt --index $i info 2>/dev/null | grep -m1 "current settings" | grep -qE "powered.* le( |$)" && break
    sleep 1
  done
done
ip link set lo up

# An adapter that does not exist: one line naming the adapters there are, exit 69 (unavailable).
"$NODE" --transport bluetooth --adapter hci7 --identity "$W/n.key" --accept all > "$W/bad.log" 2>&1; rc=$?
[ $rc = 69 ] && [ "$(wc -l < "$W/bad.log")" -le 2 ] && grep -qi "hci7" "$W/bad.log" && ok "piconet-node --adapter hci7: exit 69 (unavailable): $(tail -n1 "$W/bad.log")" \
  || { ko "piconet-node --adapter hci7 (exit $rc)"; cat "$W/bad.log"; }

PORT=18089
t=$(up)
"$HUB" --invite auto --transport bluetooth --adapter hci0 --http 127.0.0.1:$PORT --db off --plain --name bt-hub \
  --security medium --pairing piconet --identity "$W/hub.key" > "$W/hub.log" 2>&1 &
HUBPID=$!
"$NODE" --transport bluetooth --adapter hci1 --accept all --name bt-node --identity "$W/node.key" --seed 7 \
  --security medium --pairing piconet > "$W/node.log" 2>&1 &
NODEPID=$!
found=""
i=0
while [ $i -lt 90 ]; do
  json=$(curl -s --max-time 2 "http://127.0.0.1:$PORT/api/nodes")
  bpm=$(echo "$json" | grep -o '"state":"connected"[^}]*' | grep -oE '"bpm":[0-9.]+' | head -n1 | cut -d: -f2)
  [ -z "$bpm" ] && bpm=$(echo "$json" | grep -oE '"bpm":[0-9.]+[^}]*"state":"connected"' | grep -oE '"bpm":[0-9.]+' | head -n1 | cut -d: -f2)
  if [ -n "$bpm" ]; then found=$bpm; break; fi
  sleep 1; i=$((i + 1))
done
echo "  | /api/nodes: $(echo "$json" | cut -c1-300)"
if [ -n "$found" ] && awk "BEGIN{exit !($found >= 30 && $found <= 220)}"; then
  ok "hub over Bluetooth (hci0) shows node (hci1) connected with bpm $found after ${i}s (${t}s -> $(up)s)"
else
  ko "hub /api/nodes showed no connected node with a plausible bpm within 90 s (bpm '${found}')"
fi
grep -q "over Bluetooth LE on hci1" "$W/node.log" && ok "node advertised over LE on hci1" || ko "node: no LE advertising line"
# --security medium --pairing piconet on both: the channel is encrypted after Just Works pairing
# that each side confirmed itself (no bluetoothd in the VM).
grep -q "pairing with .* confirmed: Just Works" "$W/hub.log" && grep -q "pairing with .* confirmed: Just Works" "$W/node.log" \
  && grep -q "bluetooth channel .* opened: .*security medium" "$W/hub.log" \
  && ok "--security medium --pairing piconet: paired (hub and node confirmed Just Works), channel at security medium" \
  || ko "--security medium --pairing piconet: no pairing confirmed on both sides or channel not at medium"
grep -q "inviting 'bt-node' over Bluetooth" "$W/hub.log" && ok "hub invited the node over Bluetooth by its LE advertisement" \
  || ko "hub: no Bluetooth invitation line"

# The node dies (kill -9) and starts again with the same key: its channel closes, the hub's
# session marks it lost at once and its resume probe dials the new process, which does not know
# the old session; the hub sees that, ends it and invites again. Connected again within 20 s
# (instead of the 30 s resume window).
before=$(grep -c "bt-node connected" "$W/hub.log")
kill -KILL $NODEPID 2>/dev/null; wait $NODEPID 2>/dev/null
t=$(up)
"$NODE" --transport bluetooth --adapter hci1 --accept all --name bt-node --identity "$W/node.key" --seed 7 \
  --security medium --pairing piconet > "$W/node2.log" 2>&1 &
NODEPID=$!
i=0
while [ $i -lt 300 ] && [ "$(grep -c "bt-node connected" "$W/hub.log")" -le "$before" ]; do sleep 0.1; i=$((i + 1)); done
took=$(awk "BEGIN{print $(up) - $t}")
grep -E "restarted|bt-node (connecting|not connected|connected)|inviting" "$W/hub.log" | tail -n 6 | sed 's/^/  hub| /'
if [ "$(grep -c "bt-node connected" "$W/hub.log")" -gt "$before" ] && grep -q "bt-node is back at .* restarted; inviting it again" "$W/hub.log"; then
  ok "node restarted (kill -9) over Bluetooth: the hub saw the restart and had it connected again after ${took}s"
else
  ko "node restarted over Bluetooth: not connected again within 30 s"
fi

kill -TERM $NODEPID $HUBPID 2>/dev/null
wait $NODEPID; nrc=$?
wait $HUBPID; hrc=$?
[ $nrc = 0 ] && ok "piconet-node exits 0 on SIGTERM" || ko "piconet-node exit $nrc on SIGTERM"
[ $hrc = 0 ] && ok "piconet-hub exits 0 on SIGTERM" || ko "piconet-hub exit $hrc on SIGTERM"
if [ "$FAIL" != 0 ]; then
  echo "  --- hub log"; tail -n 40 "$W/hub.log"; echo "  --- node log"; tail -n 40 "$W/node.log"
fi

# --invite ask over Bluetooth only: the LE advertisement carries a 16-bit tag, so the hub invites,
# and once the handshake proved the node's full peer ID it asks before recording anything.
# Answer "y" on its stdin (a FIFO): the node's data then shows in /api/nodes.
F0=$FAIL; PORT=18091; mkfifo "$W/answers"
"$HUB" --transport bluetooth --adapter hci0 --http 127.0.0.1:$PORT --db off --plain --name ask-hub \
  --invite ask --identity "$W/hub.key" < "$W/answers" > "$W/hub-ask.log" 2>&1 &
HUBPID=$!
exec 7> "$W/answers"
"$NODE" --transport bluetooth --adapter hci1 --accept all --name ask-node --identity "$W/node.key" --seed 9 \
  > "$W/node-ask.log" 2>&1 &
NODEPID=$!
i=0; while [ $i -lt 600 ] && ! grep -q "record its data? \[y/n\]" "$W/hub-ask.log"; do sleep 0.1; i=$((i + 1)); done
asked=$(grep -o "node 'ask-node' ([0-9a-f]*) answered over Bluetooth" "$W/hub-ask.log" | head -n1 | grep -oE "[0-9a-f]{32}")
nodeid=$(grep -oE "identity [0-9a-f]{32}" "$W/node-ask.log" | head -n1 | cut -d' ' -f2)
json=$(curl -s --max-time 2 "http://127.0.0.1:$PORT/api/nodes")
if [ -n "$asked" ] && [ "$asked" = "$nodeid" ] && ! echo "$json" | grep -q '"bpm"'; then
  ok "--invite ask over Bluetooth: the hub asked with the node's full peer ID ($asked), nothing recorded before the answer"
else
  ko "--invite ask over Bluetooth: asked '$asked', node '$nodeid', /api/nodes before the answer: $(echo "$json" | cut -c1-120)"
fi
echo y >&7
wait_connected 30
grep -q "recording ask-node" "$W/hub-ask.log" && [ -n "$found" ] \
  && ok "--invite ask over Bluetooth: after 'y' the node is recorded ($(grep -o 'recording ask-node.*' "$W/hub-ask.log" | head -n1))" \
  || ko "--invite ask over Bluetooth: no data recorded after 'y'"
exec 7>&-
kill -TERM $NODEPID $HUBPID 2>/dev/null; wait $NODEPID; wait $HUBPID
if [ "$FAIL" != "$F0" ]; then
  echo "  --- hub log"; tail -n 30 "$W/hub-ask.log"; echo "  --- node log"; tail -n 20 "$W/node-ask.log"
fi

# --transport any on both, Wi-Fi being the guest's loopback: the node is heard over LE and
# mDNS, merged into one node (LE peer tag = the first bytes of the mDNS `peer` ID) and invited
# over Wi-Fi only: no Bluetooth invitation, no L2CAP channel.
ip link set lo multicast on
F0=$FAIL; PORT=18090; t=$(up)
start_any any 8
wait_connected 60
echo "  | /api/nodes: $(echo "$json" | cut -c1-200)"
n=$(echo "$json" | grep -o '"id":' | wc -l)
[ -n "$found" ] && [ "$n" = 1 ] && ok "--transport any: one node, connected with a bpm after ${i}s (${t}s -> $(up)s)" \
  || ko "--transport any: connected=${found:-no}, $n nodes in /api/nodes"
i=0; while [ $i -lt 200 ] && ! grep -q "heard over Wi-Fi and Bluetooth" "$W/hub-any.log"; do sleep 0.1; i=$((i + 1)); done
grep -q "'any-node' heard over Wi-Fi and Bluetooth" "$W/hub-any.log" && ok "--transport any: the hub heard the node on both radios as one node" \
  || ko "--transport any: the hub never merged the node's LE and mDNS routes"
grep -q "over Bluetooth LE on hci1" "$W/node-any.log" && grep -q "on UDP port" "$W/node-any.log" \
  && ok "--transport any: the node advertises over mDNS and LE" || ko "--transport any: node did not advertise on both"
if grep -q "over Bluetooth at\|bluetooth channel .* opened" "$W/hub-any.log"; then ko "--transport any: the hub used Bluetooth for a node it also heard over Wi-Fi"
else ok "--transport any: invited over Wi-Fi only (no Bluetooth invitation, no L2CAP channel)"; fi
kill -TERM $NODEPID $HUBPID 2>/dev/null
wait $NODEPID; nrc=$?
wait $HUBPID; hrc=$?
[ $nrc = 0 ] && [ $hrc = 0 ] && ok "--transport any: node and hub exit 0 on SIGTERM" || ko "--transport any: exits node $nrc hub $hrc"
if [ "$FAIL" != "$F0" ]; then
  echo "  --- hub log"; tail -n 40 "$W/hub-any.log"; echo "  --- node log"; tail -n 40 "$W/node-any.log"
fi
# A session moved from Bluetooth to Wi-Fi: both with --transport any, but mDNS dropped by nftables
# at first, so the hub hears the node over LE only and invites it over Bluetooth. Once mDNS
# flows, the hub's next query finds the node over Wi-Fi: it closes the Bluetooth session and
# invites the node over Wi-Fi, still one node.
if nft add table inet piconet_move 2>/dev/null \
   && nft add chain inet piconet_move input '{ type filter hook input priority 0; }' \
   && nft add rule inet piconet_move input udp dport 5353 drop; then
  F0=$FAIL; PORT=18092; t=$(up)
  start_any move 10
  wait_connected 60
  grep -q "inviting 'move-node' over Bluetooth" "$W/hub-move.log" && [ -n "$found" ] \
    && ok "--transport any with mDNS dropped: the node invited and connected over Bluetooth after ${i}s" \
    || ko "--transport any with mDNS dropped: not connected over Bluetooth (found=${found:-no})"
  before=$(grep -c "piconet-hub: move-node connected" "$W/hub-move.log")
  nft delete table inet piconet_move
  t=$(up)
  i=0; while [ $i -lt 600 ] && ! grep -q "move-node found over Wi-Fi: moving its session off Bluetooth" "$W/hub-move.log"; do sleep 0.1; i=$((i + 1)); done
  moved=$(awk "BEGIN{print $(up) - $t}")
  i=0; while [ $i -lt 200 ] && [ "$(grep -c "piconet-hub: move-node connected" "$W/hub-move.log")" -le "$before" ]; do sleep 0.1; i=$((i + 1)); done
  wait_connected 20
  n=$(echo "$json" | grep -o '"id":' | wc -l)
  grep -E "piconet-hub: .*(move-node|bluetooth channel .* closed)" "$W/hub-move.log" | tail -n 6 | sed 's/^/  hub| /'
  if grep -q "move-node found over Wi-Fi: moving its session off Bluetooth" "$W/hub-move.log" \
     && [ "$(grep -c "piconet-hub: move-node connected" "$W/hub-move.log")" -gt "$before" ] && [ -n "$found" ] && [ "$n" = 1 ]; then
    ok "session moved from Bluetooth to Wi-Fi ${moved}s after mDNS came back: connected again, one node with a bpm"
  else
    ko "session move Bluetooth -> Wi-Fi: moved=$(grep -c 'moving its session off Bluetooth' "$W/hub-move.log"), connected again=$(grep -c "piconet-hub: move-node connected" "$W/hub-move.log"), nodes $n"
  fi
  kill -TERM $NODEPID $HUBPID 2>/dev/null; wait $NODEPID; wait $HUBPID
  if [ "$FAIL" != "$F0" ]; then
    echo "  --- hub log"; grep "piconet-hub:" "$W/hub-move.log" | tail -n 30; echo "  --- node log"; tail -n 20 "$W/node-move.log"
  fi
else
  nft delete table inet piconet_move 2>/dev/null
  SKIP=$((SKIP + 1)); echo "SKIP: session move Bluetooth -> Wi-Fi: nftables does not work in this VM ($(nft list tables 2>&1 | head -n1))"
fi
kill $BTVIRT 2>/dev/null; wait $BTVIRT 2>/dev/null

echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
