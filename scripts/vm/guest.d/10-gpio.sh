#!/bin/sh
# GPIO in the test VM: gpio-sim chips labelled like a board's, the Swift GPIOSim
# suite against them (LED states read back from sysfs, the button pressed by
# flipping a pull), then the `piconet` CLI's errors as a person would see them.
# Prints "N passed, N failed, N skipped" last.
PASS=0; FAIL=0; SKIP=0
ok() { PASS=$((PASS + 1)); echo "PASS: $*"; }
ko() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }
PICONET="$PICONET_BIN_DIR/piconet"
BOARDS="--boards-dir $PICONET_ROOT/Boards"

# mkchip NAME LABEL LINES: a gpio-sim chip through configfs; prints its sysfs dir.
mkchip() {
  C=/sys/kernel/config/gpio-sim/$1
  mkdir "$C" "$C/bank0" && echo "$3" > "$C/bank0/num_lines" && echo "$2" > "$C/bank0/label" \
    && echo 1 > "$C/live" || return 1
  echo "/sys/devices/platform/$(cat "$C/dev_name")/$(cat "$C/bank0/chip_name")"
}
[ -d /sys/kernel/config/gpio-sim ] || modprobe gpio-sim
SIM=$(mkchip piconet piconet-sim 32) && ok "gpio-sim chip 'piconet-sim' at $SIM" || { ko "make gpio-sim chip"; echo "$PASS passed, $FAIL failed, $SKIP skipped"; exit 1; }
PI4=$(mkchip pi4 pinctrl-bcm2711 58) && ok "gpio-sim chip labelled like a Pi 4's ('pinctrl-bcm2711') at $PI4" || ko "make Pi-4-like chip"

# --- the Swift suite (GPIOSimTests: LEDs, button, busy, missing chip, release; EpollIdleTests)
export PICONET_GPIO_SIM="$SIM"
"$PICONET_TEST_BIN" --testing-library swift-testing --filter 'GPIOSimTests|EpollIdleTests' > /tmp/swift-gpio.log 2>&1
rc=$?
grep -E '^. (Test|Suite) ' /tmp/swift-gpio.log | grep -vE ' started\.$'
p=$(grep -cE '^✔ Test .*passed' /tmp/swift-gpio.log); f=$(grep -cE '^✘ Test .*failed' /tmp/swift-gpio.log); s=$(grep -cE '^➜ Test .*skipped' /tmp/swift-gpio.log)
PASS=$((PASS + p)); FAIL=$((FAIL + f)); SKIP=$((SKIP + s))
if [ "$rc" != 0 ] && [ "$f" = 0 ]; then ko "swift test bundle exited $rc"; tail -n 20 /tmp/swift-gpio.log; fi
[ "$p" -gt 0 ] || ko "no Swift GPIO test ran (filter matched nothing?)"

# --- the CLI, as a person on a board would run it
out=$("$PICONET" boards check $BOARDS --board sim 2>&1); rc=$?
echo "$out" | sed 's/^/  | /'
[ $rc = 0 ] && echo "$out" | grep -q "GPIO chip 'piconet-sim' is gpiochip" && ok "boards check --board sim: clean" || ko "boards check --board sim (exit $rc)"

out=$("$PICONET" boards check $BOARDS --board pi4b 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "GPIO chip 'pinctrl-bcm2711' is" && ok "boards check --board pi4b finds the Pi-4-labelled chip" || { ko "boards check --board pi4b (exit $rc)"; echo "$out"; }

out=$("$PICONET" boards check $BOARDS --board pi5 2>&1); rc=$?
echo "  | $out"
[ $rc = 1 ] && echo "$out" | grep -q "^error: no GPIO chip labelled 'pinctrl-rp1'; chips here: .*'piconet-sim' (32 lines)" \
  && ok "chip missing: one line listing the chips here, exit 1" || ko "chip-missing error (exit $rc)"

gpioset --mode=signal "$(basename "$SIM")" 17=1 & G=$!
for i in $(seq 50); do gpioinfo "$(basename "$SIM")" | grep -q 'line  17:.*"gpioset"' && break; sleep 0.1; done
out=$("$PICONET" boards check $BOARDS --board sim 2>&1); rc=$?
echo "$out" | grep busy | sed 's/^/  | /'
[ $rc = 1 ] && echo "$out" | grep -q "status LED: line 17 of .* is busy: held by consumer 'gpioset'" \
  && ok "line busy: names the consumer 'gpioset', exit 1" || { ko "line-busy error (exit $rc)"; echo "$out"; }
out=$("$PICONET" led test $BOARDS --board sim --step-ms 100 2>&1); rc=$?
echo "  | $(echo "$out" | tail -n1)"
[ $rc = 1 ] && echo "$out" | grep -q "is busy: held by consumer 'gpioset'" && ok "led test on a busy line: one-line error, exit 1" || ko "led test busy (exit $rc)"
kill $G; wait $G 2>/dev/null

if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$PICONET" boards check $BOARDS --board sim 2>&1); rc=$?
  echo "  | $out" | grep -i permission
  [ $rc = 77 ] && echo "$out" | grep -q "permission denied opening /dev/gpiochip.*'gpio' group" \
    && ok "permission denied: names the gpio group / udev rule, exit 77" || { ko "permission-denied error (exit $rc)"; echo "$out"; }
else
  SKIP=$((SKIP + 1)); echo "SKIP: permission-denied check (no 'nobody' user or setpriv)"
fi

out=$("$PICONET" led test $BOARDS --board sim --step-ms 150 2>&1); rc=$?
echo "$out" | tail -n1 | sed 's/^/  | /'
v=$(cat "$SIM/sim_gpio17/value")
[ $rc = 0 ] && [ "$v" = 0 ] && ok "led test --board sim: every pattern, LEDs off after (line 17 = $v)" || ko "led test (exit $rc, line 17 = $v)"

echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
