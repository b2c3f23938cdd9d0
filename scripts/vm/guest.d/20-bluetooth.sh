#!/bin/sh
# Bluetooth in the test VM: two virtual controllers (hci_vhci + btvirt -l2: hci0, hci1 in one
# emulated piconet), then Piconet's Swift suites against them as root:
#   L2CAPScanVMTests      LE advertising (mgmt Add Advertising) on hci0 found by Piconet's
#                         scanner on hci1 with hash, PSM, name; lost after it stops
#   L2CAPVMTests          LE CoC + BR/EDR channels hci1 -> hci0 (MTUs, 1,000 mixed messages),
#                         deferred setup, adapter missing, peer gone mid-transfer, adapter down
#   L2CAPTests, ManagementPacketTests      the unit suites, here with a Bluetooth kernel
#   piconet-l2cap-session  a Piconet session over LE and BR/EDR channels, one process per controller
#   piconet CLI           advertise/browse --transport bluetooth (found with name/PSM/peer tag, lost
#                         after it stops), listen/send --transport bluetooth (by name and by ADDR/PSM),
#                         BT_SECURITY medium/high/fips (set, read back, connection attempted), and the
#                         no-permission errors as an unprivileged user
# and BlueZ's l2cap-tester as a reference (its summary line is printed).
# Order matters (shared/vm/README lessons): scan before connecting; the "advertising"
# setting (needed for LE connects) overrides add-adv instances, so it is switched on after.
# Prints "N passed, N failed, N skipped" last.
PASS=0; FAIL=0; SKIP=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
ko() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }
up() { cut -d' ' -f1 /proc/uptime; }
# BlueZ's tester summary (src/shared/tester.c), colours removed:
#   "Total: 33, Passed: 33 (100.0%), Failed: 0, Not Run: 0"  (a timed-out test counts as failed)
tester_summary() { sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -a '^Total: ' | tail -n1; }
# tester_all_passed SUMMARY: true only when the counts say every test ran and passed.
tester_all_passed() {
  echo "$1" | awk '{ if (match($0, /^Total: [0-9]+, Passed: [0-9]+ \([0-9.]+%\), Failed: [0-9]+, Not Run: [0-9]+/) == 0) exit 1
    gsub(/[^0-9]+/, " ")   # total, passed, the percentage (two numbers), failed, not run
    exit !($1 > 0 && $2 == $1 && $(NF - 1) == 0 && $NF == 0) }'
}
# tester_not_passed LOG: the names the summary lists as Failed, Timed out or Not Run.
tester_not_passed() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" | awk '/^Test Summary/ {s = 1; next} /^Total: / {s = 0}
    s && match($0, / +(Failed|Timed out|Not Run) *( +[0-9.]+ seconds)?$/) { print substr($0, 1, RSTART - 1) }'
}

[ -e /dev/vhci ] || modprobe hci_vhci || ko "modprobe hci_vhci"
# bt_start: two fresh emulated controllers (btvirt -l2: hci0, hci1), LE + BR/EDR, powered.
# Also used after the channel-drop test: powering a controller off mid-connection can leave the
# kernel with a stale LE connection ("Ignoring HCI_Connection_Complete for existing connection",
# "ACL packet for unknown connection handle"), after which every LE connect times out; new
# controllers start clean.
bt_start() {
  btvirt -l2 > /tmp/btvirt.log 2>&1 &
  BTVIRT=$!
  for i in $(seq 50); do [ -e /sys/class/bluetooth/hci1 ] && break; sleep 0.1; done
  if [ ! -e /sys/class/bluetooth/hci1 ]; then
    ko "btvirt made no hci0/hci1"; cat /tmp/btvirt.log
    echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1
  fi
  # A controller still initialising can drop a setting without btmgmt failing (seen once: LE off,
  # so every Add Advertising was "Rejected"): check "current settings" and set again until they hold.
  for i in 0 1; do
    for try in 1 2 3 4 5; do
      for s in "le on" "bredr on" "connectable on" "power on"; do btmgmt --index $i $s >/dev/null 2>&1; done
      settings=$(btmgmt --index $i info 2>/dev/null | grep -m1 "current settings")
      echo "$settings" | grep -qE "powered.* le( |$)" && break
      sleep 1
    done
    echo "$settings" | grep -qE "powered.* le( |$)" || ko "hci$i settings after 5 tries: $settings"
  done
  A0=$(hciconfig hci0 | awk '/BD Address/{print $3}'); A1=$(hciconfig hci1 | awk '/BD Address/{print $3}')
}
# bt_restart: ends btvirt (its controllers go away) and starts two new ones.
bt_restart() {
  kill $BTVIRT 2>/dev/null; wait $BTVIRT 2>/dev/null
  for i in $(seq 50); do [ -e /sys/class/bluetooth/hci0 ] || [ -e /sys/class/bluetooth/hci1 ] || break; sleep 0.1; done
  bt_start
}
bt_start
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

PICONET="$PICONET_BIN_DIR/piconet"
PEER_ID=1a2b3c4d5e6f708192a3b4c5d6e7f809
# wait_for FILE PATTERN TENTHS: polls FILE for PATTERN; 0 when seen.
wait_for() { i=0; while [ $i -lt "$3" ]; do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }
# send_to VAR ARGS...: runs `piconet send` with ARGS (150 s at most), output in $VAR, exit status in $VAR_rc.
send_to() { v=$1; shift; o=$(timeout 150 "$PICONET" send --key /tmp/bt-send.key --timeout 120 "$@" 2>&1); r=$?; eval "$v=\$o; ${v}_rc=$r"; }
# finish_listener PID: lets a `listen --exit-after` end by itself (10 s at most), then its exit status.
finish_listener() { i=0; while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; kill -INT "$1" 2>/dev/null; wait "$1"; }

# CLI: LE advertising on hci0 found by `piconet browse --transport bluetooth` on hci1 (JSON),
# with name, PSM and peer tag; `lost` after the advertiser stops (Ctrl-C removes the instance).
if [ -x "$PICONET" ]; then
  t=$(up)
  "$PICONET" advertise --transport bluetooth --adapter hci0 --service hr-sensor --name vm-node-A --psm 131 \
    --info peer=$PEER_ID > /tmp/cli-adv.log 2>&1 & ADV=$!
  wait_for /tmp/cli-adv.log "advertising" 100 || { ko "advertise --transport bluetooth did not start"; cat /tmp/cli-adv.log; }
  "$PICONET" browse --transport bluetooth --adapter hci1 --service hr-sensor --json --lost-after 6 --timeout 90 \
    > /tmp/cli-browse.log 2>&1 & BR=$!
  if wait_for /tmp/cli-browse.log '"event":"found".*vm-node-A' 400; then
    found_at=$(up)
    kill -INT $ADV; wait $ADV; arc=$?
    stopped_at=$(up)
    if wait_for /tmp/cli-browse.log '"event":"lost"' 400; then lost=1; else lost=0; fi
    lost_at=$(up)
  else
    kill -INT $ADV; wait $ADV; arc=$?; lost=0; found_at=none; stopped_at=none; lost_at=none
  fi
  kill -INT $BR 2>/dev/null; wait $BR 2>/dev/null
  sed 's/^/  browse| /' /tmp/cli-browse.log | head -n 8; sed 's/^/  advertise| /' /tmp/cli-adv.log
  line=$(grep -m1 '"event":"found"' /tmp/cli-browse.log)
  echo "$line" | grep -q '"name":"vm-node-A"' && echo "$line" | grep -q '"psm":131' \
    && echo "$line" | grep -q '"peerTag":"1a2b"' && echo "$line" | grep -q '"transport":"bluetooth"' \
    && ok "piconet browse --transport bluetooth found vm-node-A with PSM 131 and peer tag 1a2b (${t}s -> ${found_at}s)" \
    || ko "piconet browse --transport bluetooth: no found line with name, PSM 131, peer tag"
  [ $arc = 0 ] && grep -q "stopped; advertising removed" /tmp/cli-adv.log \
    && ok "piconet advertise --transport bluetooth: Ctrl-C removed the advertising instance" || ko "advertise stop (exit $arc)"
  [ $lost = 1 ] && ok "piconet browse --transport bluetooth: lost after the advertiser stopped (stopped ${stopped_at}s, lost ${lost_at}s, --lost-after 6)" \
    || ko "piconet browse: no lost event after the advertiser stopped"
else
  SKIP=$((SKIP + 1)); echo "SKIP: piconet CLI browse/advertise over Bluetooth: $PICONET not built"
fi

# --transport any: one node advertised over mDNS (on the guest's own loopback, multicast
# switched on: nothing leaves the VM) and over LE, with the same peer ID, is ONE peer with two
# routes in `browse --transport any`; after it stops: the Wi-Fi goodbye leaves one route, then
# LE silence makes it lost.
if [ -x "$PICONET" ] && ip link set lo up 2>/dev/null && ip link set lo multicast on 2>/dev/null; then
  "$PICONET" browse --transport any --adapter hci1 --interface lo --service hr-sensor --json --lost-after 6 --timeout 120 \
    > /tmp/cli-any.log 2>&1 & BR=$!
  "$PICONET" advertise --transport any --adapter hci0 --interface lo --service hr-sensor --name vm-both --port 5000 \
    --psm 143 --info peer=$PEER_ID > /tmp/cli-any-adv.log 2>&1 & ADV=$!
  if wait_for /tmp/cli-any.log '"name":"vm-both".*"transport":"wifi".*"transport":"bluetooth"' 450; then two=1; else two=0; fi
  kill -INT $ADV; wait $ADV
  if wait_for /tmp/cli-any.log '"event":"lost".*"name":"vm-both"' 400; then gone=1; else gone=0; fi
  kill -INT $BR 2>/dev/null; wait $BR 2>/dev/null
  sed 's/^/  browse any| /' /tmp/cli-any.log | head -n 8; sed 's/^/  advertise any| /' /tmp/cli-any-adv.log
  n=$(grep -c '"name":"vm-both"' /tmp/cli-any.log)
  found=$(grep -c '"event":"found".*"name":"vm-both"' /tmp/cli-any.log)
  [ $two = 1 ] && [ "$found" = 1 ] && grep -q "\"peer\":\"$PEER_ID\"" /tmp/cli-any.log \
    && ok "piconet browse --transport any: vm-both found once, then one peer with two routes (wifi + bluetooth, peer $PEER_ID)" \
    || ko "browse --transport any: no single peer with both routes (found events: $found)"
  # After the goodbye: an update down to one route (bluetooth), then lost.
  one=$(grep '"event":"updated".*"name":"vm-both"' /tmp/cli-any.log | tail -n1 | grep -c '"transport":"wifi"')
  [ $gone = 1 ] && [ "$one" = 0 ] \
    && ok "piconet browse --transport any: Wi-Fi route gone first (still found over Bluetooth), then lost ($n events)" \
    || ko "browse --transport any: route loss sequence (lost=$gone)"
else
  SKIP=$((SKIP + 2)); echo "SKIP: browse --transport any (no piconet binary, or lo cannot be made multicast in the guest)"
fi

btmgmt --index 0 advertising on >/dev/null 2>&1 || ko "btmgmt -i 0 advertising on"   # LE connects need an advertising target
t=$(up)
swift_suite 'L2CAPVMTests|L2CAPTests|ManagementPacketTests' l2cap
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
  # The session sizes its datagrams from each channel's negotiated MTU: the listener asks
  # for 256-byte SDUs, so the inviter sends nothing larger (3,000-byte messages fragmented to
  # fit, the unreliable limit shrinks) while the listener keeps sending 1472-byte datagrams.
  for kind in le bredr; do
    if [ $kind = le ]; then psm=137; else psm=4111; fi
    "$SESSION" accept hci0 $psm $kind 256 > /tmp/session-mtu.log 2>&1 & S=$!
    for i in $(seq 100); do grep -q ready /tmp/session-mtu.log && break; sleep 0.1; done
    out=$(timeout 150 "$SESSION" invite hci1 "$A0" $psm $kind 50 2>&1); rc=$?
    sleep 0.5
    grep SESSION /tmp/session-mtu.log | sed 's/^/  accept| /'
    case "$out" in
      *"MTU 256, session datagrams 256, unreliable limit "*" refused), "*)
        if [ $rc = 0 ] && grep -q "receive MTU 256" /tmp/session-mtu.log && grep -q "session datagrams 1472" /tmp/session-mtu.log; then
          ok "session over L2CAP $kind sized from a 256-byte channel MTU, 1472 the other way: $out"
        else ko "session over L2CAP $kind at MTU 256 (exit $rc): accept side did not show receive MTU 256 / datagrams 1472: $out"; fi ;;
      *) ko "session over L2CAP $kind at MTU 256 (exit $rc): $out" ;;
    esac
    if [ $kind = le ]; then
      # An invitation whose context cannot fit one 256-byte datagram fails, saying so.
      out=$(timeout 60 "$SESSION" invite hci1 "$A0" $psm $kind 1 600 2>&1); rc=$?
      case "$out" in
        *"does not fit this path's 256-byte datagrams"*) [ $rc = 1 ] && ok "600-byte invitation context over a 256-byte MTU refused: $out" \
                                                          || ko "context over MTU: exit $rc: $out" ;;
        *) ko "600-byte invitation context over a 256-byte MTU (exit $rc): $out" ;;
      esac
    fi
    kill $S 2>/dev/null; wait $S 2>/dev/null
  done
  # A channel drop mid-session (the listener's controller powered off for 2 s): both sides see
  # the peer lost at once (the endpoint reports the broken path), the inviter's resume probe
  # dials a new channel, and the session resumes: every reliable message echoed exactly once,
  # in order, none lost.
  btmgmt --index 0 advertising on >/dev/null 2>&1
  "$SESSION" accept hci0 145 le > /tmp/session-drop-accept.log 2>&1 & S=$!
  for i in $(seq 100); do grep -q ready /tmp/session-drop-accept.log && break; sleep 0.1; done
  timeout 150 "$SESSION" stream hci1 "$A0" 145 le 12 > /tmp/session-drop.log 2>&1 & R=$!
  for i in $(seq 300); do grep -q "STREAM streaming" /tmp/session-drop.log && break; sleep 0.1; done
  sleep 3
  t=$(up)
  btmgmt --index 0 power off >/dev/null 2>&1; sleep 2; btmgmt --index 0 power on >/dev/null 2>&1
  btmgmt --index 0 advertising on >/dev/null 2>&1
  wait $R; rc=$?
  kill $S 2>/dev/null; wait $S 2>/dev/null
  sed 's/^/  stream| /' /tmp/session-drop.log; grep SESSION /tmp/session-drop-accept.log | sed 's/^/  accept| /'
  out=$(grep -E "^(OK|piconet-l2cap-session)" /tmp/session-drop.log | tail -n1)
  if [ $rc = 0 ] && echo "$out" | grep -qE "across [1-9][0-9]* channel drops \(lost [1-9][0-9]* times, resumed [1-9][0-9]* times\)"; then
    ok "session over L2CAP survives a channel drop (hci0 off 2 s at ${t}s): $out"
  else
    ko "session over L2CAP across a channel drop (exit $rc): $out"
  fi
  bt_restart
  [ -n "$A0" ] && [ -n "$A1" ] && ok "fresh controllers after the channel-drop test: hci0=$A0 hci1=$A1" || ko "no fresh controllers after the channel-drop test"
else
  SKIP=$((SKIP + 1)); echo "SKIP: session over L2CAP: $SESSION not built"
fi

# CLI sessions over L2CAP LE, one process per controller. The kernel's "advertising" setting
# would hide our own advertising instance from scanners, so it goes off: `listen --service`
# advertises (connectable) itself, which is also what an LE connect needs.
if [ -x "$PICONET" ]; then
  btmgmt --index 0 advertising off >/dev/null 2>&1
  t=$(up)
  "$PICONET" listen --transport bluetooth --adapter hci0 --psm 133 --service hr-sensor --name vm-listener \
    --key /tmp/bt-listen.key --exit-after 20 > /tmp/cli-listen.log 2>&1 & L=$!
  wait_for /tmp/cli-listen.log "listening on" 100 || ko "listen --transport bluetooth did not start"
  send_to out1 --transport bluetooth --adapter hci1 --service hr-sensor --to vm-listener --message by-name --count 10; rc1=$out1_rc
  send_to out2 --transport bluetooth --adapter hci1 --to "$A0/133" --message by-address --count 10; rc2=$out2_rc
  finish_listener $L; lrc=$?
  echo "$out1" | sed 's/^/  send by name| /'; echo "$out2" | sed 's/^/  send by address| /'
  grep -vE ' (by-name|by-address) [2-9]$' /tmp/cli-listen.log | sed 's/^/  listen| /'
  [ $rc1 = 0 ] && grep -q " by-name 10$" /tmp/cli-listen.log \
    && ok "piconet send --transport bluetooth --to NAME (LE scan, then L2CAP): 10 reliable messages acknowledged and printed by listen" \
    || ko "piconet send --transport bluetooth by name (exit $rc1)"
  [ $rc2 = 0 ] && grep -q " by-address 10$" /tmp/cli-listen.log \
    && ok "piconet send --transport bluetooth --to $A0/133: 10 reliable messages acknowledged and printed by listen" \
    || ko "piconet send --transport bluetooth by address (exit $rc2)"
  [ $lrc = 0 ] && grep -q "opened: MTU 1472" /tmp/cli-listen.log \
    && ok "piconet listen --transport bluetooth: exit 0 after 20 messages (${t}s -> $(up)s), channels at MTU 1472" \
    || ko "piconet listen --transport bluetooth (exit $lrc)"

  # --transport any: one session over UDP and L2CAP at once (RoutedDatagramEndpoint). By name the
  # sender prefers Wi-Fi (waiting 1.5 s for it when LE answered first); by ADDR/PSM it must go over
  # Bluetooth, by A.B.C.D:PORT over UDP.
  if ip link set lo up 2>/dev/null && ip link set lo multicast on 2>/dev/null; then
    "$PICONET" listen --transport any --adapter hci0 --interface lo --psm 145 --service hr-sensor --name vm-any \
      --key /tmp/bt-listen.key --exit-after 15 > /tmp/cli-listen-any.log 2>&1 & L=$!
    wait_for /tmp/cli-listen-any.log "listening on" 100
    udp=$(sed -n 's/^listening on 0\.0\.0\.0:\([0-9]*\) and .*/\1/p' /tmp/cli-listen-any.log)
    send_to out1 --transport any --adapter hci1 --interface lo --service hr-sensor --to vm-any --message any-name --count 5
    send_to out2 --transport any --adapter hci1 --to "$A0/145" --message any-bt --count 5
    send_to out3 --transport any --adapter hci1 --address "127.0.0.1:$udp" --message any-udp --count 5
    finish_listener $L; lrc=$?
    echo "$out1" | sed 's/^/  send any by name| /'; echo "$out2" | sed 's/^/  send any by address| /'
    echo "$out3" | sed 's/^/  send any over UDP| /'
    grep -vE ' any-(name|bt|udp) [2-4]$' /tmp/cli-listen-any.log | sed 's/^/  listen any| /'
    [ $out1_rc = 0 ] && [ $out2_rc = 0 ] && [ $out3_rc = 0 ] && [ $lrc = 0 ] && grep -q " any-name 5$" /tmp/cli-listen-any.log \
      && grep -q " any-bt 5$" /tmp/cli-listen-any.log && grep -q " any-udp 5$" /tmp/cli-listen-any.log \
      && echo "$out1" | grep -q 'over Wi-Fi' \
      && ok "listen/send --transport any: one listener took 5 messages by name (Wi-Fi route preferred), 5 by $A0/145 (L2CAP) and 5 by 127.0.0.1:$udp (UDP)" \
      || ko "listen/send --transport any (send exits $out1_rc/$out2_rc/$out3_rc, listen $lrc)"
  else
    SKIP=$((SKIP + 1)); echo "SKIP: listen/send --transport any: lo cannot be made multicast in the guest"
  fi

  # A BR/EDR PSM: advertised over LE with the BR/EDR flag, so the sender finds it by name and
  # opens a BR/EDR channel. Then --accept none: the channel is refused at the link (BT_DEFER_SETUP).
  "$PICONET" listen --transport bluetooth --adapter hci0 --psm 4111 --service hr-sensor --name vm-bredr \
    --key /tmp/bt-listen.key --exit-after 5 > /tmp/cli-listen-bredr.log 2>&1 & L=$!
  wait_for /tmp/cli-listen-bredr.log "listening on" 100
  send_to out --transport bluetooth --adapter hci1 --service hr-sensor --to vm-bredr --message bredr --count 5
  finish_listener $L; lrc=$?
  echo "$out" | sed 's/^/  send bredr| /'
  grep -E "channel|listening| bredr 5$" /tmp/cli-listen-bredr.log | sed 's/^/  listen bredr| /'
  [ $out_rc = 0 ] && [ $lrc = 0 ] && echo "$out" | grep -q "/bredr/psm 4111 opened" && grep -q " bredr 5$" /tmp/cli-listen-bredr.log \
    && ok "listen --psm 4111 (BR/EDR) found by name over LE, 5 messages over a BR/EDR channel" \
    || ko "BR/EDR listen/send by name (send $out_rc, listen $lrc)"

  "$PICONET" listen --transport bluetooth --adapter hci0 --psm 147 --service hr-sensor --name vm-closed \
    --accept none --key /tmp/bt-listen.key > /tmp/cli-listen-none.log 2>&1 & L=$!
  wait_for /tmp/cli-listen-none.log "listening on" 100
  send_to out --transport bluetooth --adapter hci1 --to "$A0/147" --message nope
  kill -INT $L 2>/dev/null; wait $L
  echo "$out" | sed 's/^/  send to --accept none| /'
  grep "refused" /tmp/cli-listen-none.log | sed 's/^/  listen --accept none| /'
  [ $out_rc = 1 ] && echo "$out" | grep -q "^piconet send: Bluetooth channel to .* failed: connection refused" \
    && grep -q "refused at the link: not admitted" /tmp/cli-listen-none.log \
    && ok "listen --accept none: the L2CAP channel refused at the link, send says 'connection refused'" \
    || ko "--accept none over Bluetooth (send exit $out_rc)"

  # BT_SECURITY: set on both ends and read back; a connection attempted. The two controllers
  # share no key, so the kernel pairs them and asks user space to confirm. With --pairing piconet
  # both processes answer Just Works themselves: medium (encrypted, unauthenticated) must then
  # deliver. Without an agent (no bluetoothd here) medium must fail with the documented timeout;
  # high and fips need an authenticated key, which Just Works cannot give: the documented
  # "link security X not reached" or timeout, in time.
  psm=135
  for variant in "medium piconet" "medium system" "high piconet" "fips piconet"; do
    set -- $variant; sec=$1; pairing=$2
    psm=$((psm + 2))
    "$PICONET" listen --transport bluetooth --adapter hci0 --psm $psm --service hr-sensor --name "sec-$sec" \
      --security $sec --pairing $pairing --key /tmp/bt-listen.key --exit-after 1 > /tmp/cli-sec.log 2>&1 & L=$!
    wait_for /tmp/cli-sec.log "listening on" 100
    readback=$(grep -o "security $sec (read back: [a-z0-9 ]*)" /tmp/cli-sec.log)
    t=$(up)
    send_to out --transport bluetooth --adapter hci1 --to "$A0/$psm" --security $sec --pairing $pairing --message "secure-$sec"; rc=$out_rc
    took="${t}s -> $(up)s"
    if [ $rc = 0 ]; then finish_listener $L; else kill -INT $L 2>/dev/null; wait $L 2>/dev/null; fi
    grep -E "channel|pairing" /tmp/cli-sec.log | sed "s/^/  listen $sec $pairing| /"
    echo "$out" | sed "s/^/  send $sec $pairing| /"
    [ "$readback" = "security $sec (read back: $sec)" ] && ok "BT_SECURITY $sec set on the listener and read back" \
      || ko "BT_SECURITY $sec read back: '$readback'"
    if [ "$variant" = "medium piconet" ]; then
      if [ $rc = 0 ] && echo "$out" | grep -q "opened: .*security medium" && echo "$out" | grep -q "pairing with .* confirmed: Just Works" \
         && grep -q "pairing with .* confirmed: Just Works" /tmp/cli-sec.log && grep -q "secure-medium" /tmp/cli-sec.log; then
        ok "BT_SECURITY medium with --pairing piconet: paired (Just Works confirmed on both sides), encrypted channel, message acknowledged ($took)"
      else
        ko "BT_SECURITY medium with --pairing piconet: not delivered over a medium link (exit $rc, $took)"
      fi
    elif [ $rc = 1 ] && echo "$out" | grep -qE "^piconet send: Bluetooth channel to .* failed: (link security $sec not reached|timed out \(security $sec)"; then
      ok "BT_SECURITY $sec with --pairing $pairing: refused, one-line typed error ($took): $(echo "$out" | grep '^piconet send: Bluetooth' | head -n1)"
    else
      ko "BT_SECURITY $sec with --pairing $pairing: not the documented error (exit $rc, $took)"
    fi
  done
  btmgmt --index 0 advertising on >/dev/null 2>&1

  # No permission: mgmt commands that change the controller need CAP_NET_ADMIN; an
  # unprivileged user gets one line that says what to do, and exit 77 (EX_NOPERM; no hang, no crash).
  for cmd in advertise browse; do
    if [ $cmd = advertise ]; then args="--service hr-sensor --name nobody-node --adapter hci0"
    else args="--service hr-sensor --adapter hci1 --timeout 20"; fi
    out=$(timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups "$PICONET" $cmd --transport bluetooth $args 2>&1); rc=$?
    echo "  nobody $cmd| $out"
    [ $rc = 77 ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "Permission Denied: run as root or give the binary CAP_NET_ADMIN" \
      && ok "piconet $cmd --transport bluetooth as nobody: one-line permission error naming CAP_NET_ADMIN, exit 77" \
      || ko "piconet $cmd --transport bluetooth as nobody (exit $rc)"
  done
else
  SKIP=$((SKIP + 5)); echo "SKIP: piconet CLI listen/send/security/permission over Bluetooth: $PICONET not built"
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
  summary=$(tester_summary /tmp/l2cap-tester.log)
  echo "  l2cap-tester (BlueZ reference): ${summary:-no summary line} (${t}s -> $(up)s)"
  grep -aE 'Failed|Timed out|Not Run' /tmp/l2cap-tester.log | grep -v '^Total' | sed 's/\x1b\[[0-9;]*m//g; s/^/  reference: /'
  if tester_all_passed "$summary"; then ok "l2cap-tester: every test passed: $summary"
  elif [ -z "$summary" ]; then ko "l2cap-tester printed no summary"; tail -n 20 /tmp/l2cap-tester.log
  else
    # On this VM "LE Client - Close socket 2" times out now and then under TCG (more often on a
    # loaded host: HCI command timeouts in the kernel log): each test that did not pass runs on
    # its own (-s NAME) up to three more times, and every one of those must pass once.
    retried=0 again=0
    while IFS= read -r name; do
      [ -n "$name" ] || continue
      retried=$((retried + 1))
      for attempt in 1 2 3; do
        timeout 120 l2cap-tester -s "$name" > /tmp/l2cap-tester-retry.log 2>&1
        s2=$(tester_summary /tmp/l2cap-tester-retry.log)
        echo "  retry $attempt '$name': ${s2:-no summary line}"
        if tester_all_passed "$s2"; then again=$((again + 1)); break; fi
      done
    done <<NAMES
$(tester_not_passed /tmp/l2cap-tester.log)
NAMES
    if [ "$retried" -gt 0 ] && [ "$again" = "$retried" ]; then ok "l2cap-tester: $summary; the $retried that did not pass passed on a retry"
    else ko "l2cap-tester: $summary ($again of $retried passed on a retry)"; fi
  fi
else
  SKIP=$((SKIP + 1)); echo "SKIP: l2cap-tester not installed (bluez-test-tools)"
fi
kill $BTVIRT 2>/dev/null

echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
