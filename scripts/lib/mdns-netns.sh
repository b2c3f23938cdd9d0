# Two network namespaces joined by one veth pair, for mDNS tests and benchmarks that
# must never touch the machine's own interfaces. Source after common.sh.
#   mdns_pair_up TAG        → namespaces $MDNS_P (10.78.0.1) and $MDNS_Z (10.78.0.2), interface mdns0 in each
#   mdns_pair_down          → deletes them
# IPv6 is off inside them so interface packet counters count only our IPv4 traffic.
mdns_pair_up() {
  MDNS_P="$1-p"; MDNS_Z="$1-z"
  ip netns add "$MDNS_P"; ip netns add "$MDNS_Z"
  ip -n "$MDNS_P" link add mdns0 type veth peer name mdns0 netns "$MDNS_Z"
  local ns
  for ns in "$MDNS_P" "$MDNS_Z"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
    ip -n "$ns" link set lo up; ip -n "$ns" link set mdns0 up
  done
  ip -n "$MDNS_P" addr add 10.78.0.1/24 dev mdns0
  ip -n "$MDNS_Z" addr add 10.78.0.2/24 dev mdns0
  sleep 1
}
mdns_pair_down() {
  [ -n "${MDNS_P:-}" ] && ip netns del "$MDNS_P" 2>/dev/null || true
  [ -n "${MDNS_Z:-}" ] && ip netns del "$MDNS_Z" 2>/dev/null || true
}
# mdns_can_netns: true if we may create namespaces here (root, iproute2, kernel support).
mdns_can_netns() {
  is_root || { MDNS_SKIP="needs root to create network namespaces"; return 1; }
  command -v ip >/dev/null || { MDNS_SKIP="iproute2 (ip) not installed; run scripts/bootstrap"; return 1; }
  ip netns add "pcn-probe-$$" 2>/dev/null || { MDNS_SKIP="cannot create network namespaces here"; return 1; }
  ip netns del "pcn-probe-$$"
}
# mdns_zeroconf_python: prints the venv python with python-zeroconf, installing it if needed.
mdns_zeroconf_python() {
  local venv=${PICONET_ZEROCONF_VENV:-$HOME/.cache/piconet/venv-zeroconf}
  if ! "$venv/bin/python" -c 'import zeroconf' 2>/dev/null; then
    { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q zeroconf; } >&2 || return 1
  fi
  echo "$venv/bin/python"
}
# wait_exit PID SECONDS: waits for a background child to exit, returns its exit code;
# after SECONDS it is killed (-9) and 124 is returned, so a stuck process cannot hang a stage.
wait_exit() {
  local i
  for ((i = 0; i < $2 * 20; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$1" 2>/dev/null; then kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; return 124; fi
  wait "$1"
}
