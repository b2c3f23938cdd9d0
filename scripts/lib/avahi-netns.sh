# shellcheck shell=bash disable=SC2034  # AVAHI_SKIP, AVAHI_CMD, AVAHI_ROOT are for the caller
# Avahi (Debian's avahi-daemon + avahi-utils) inside a network namespace the caller created,
# for benchmarks that compare Piconet's discovery with the daemon most Linux boards run.
# Source after common.sh. Nothing touches this machine's own interfaces, /run or D-Bus:
#   - the Debian packages are unpacked (dpkg-deb -x) into a cache, never installed, so no
#     maintainer script starts a daemon on the host (unless avahi-daemon is installed already,
#     whose binaries are then used as they are);
#   - each daemon runs in its own mount namespace (tmpfs over /run for its pid file and socket),
#     with its own dbus-daemon on a socket in the caller's work directory, a private config that
#     allows one interface only (allow-interfaces), IPv4 only, no chroot, no privilege drop, and
#     its user avahi added to bind-mounted copies of passwd/group in that mount namespace only.
#   avahi_available              → 0 and $AVAHI_ROOT set, or 1 and $AVAHI_SKIP says why
#   avahi_start NS IFACE HOST DIR → starts bus + daemon in NS, DIR/bus is the bus socket;
#                                   waits until the daemon is up (10 s), else 1 with $AVAHI_SKIP
#   avahi_cmd DIR TOOL            → AVAHI_CMD=(env ... TOOL): run `ip netns exec NS "${AVAHI_CMD[@]}"
#                                   ARGS` to talk to DIR's daemon (a D-Bus client; in the daemon's
#                                   namespace, or interface indexes print as another one's names);
#                                   in the background, $! is the tool itself (ip and env exec it)
#   avahi_stop DIR                → stops that daemon and its bus
#   avahi_version                 → the daemon's version, e.g. 0.8

# Where the unpacked packages live (PICONET_AVAHI_DIR; default ~/.cache/piconet/avahi).
avahi_available() {
  if [ -x /usr/sbin/avahi-daemon ] && [ -x /usr/bin/avahi-browse ] && [ -x /usr/bin/avahi-publish ]; then
    AVAHI_ROOT=''; return 0
  fi
  AVAHI_ROOT=${PICONET_AVAHI_DIR:-$HOME/.cache/piconet/avahi}
  if [ ! -x "$AVAHI_ROOT/usr/sbin/avahi-daemon" ] || [ ! -x "$AVAHI_ROOT/usr/bin/avahi-publish" ]; then
    if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
      AVAHI_SKIP="avahi-daemon is not installed and there is no apt-get/dpkg-deb to unpack it"; return 1
    fi
    command -v dbus-daemon >/dev/null || { AVAHI_SKIP="no dbus-daemon (Debian package dbus-daemon)"; return 1; }
    local debs
    debs=$(mktemp -d /tmp/piconet-avahi-debs.XXXXXX) && chmod 0755 "$debs"
    # apt-get download: the ordinary client, a handful of named packages (and the two libraries
    # a bare Debian lacks); dpkg-deb -x only unpacks.
    if ! (cd "$debs" && apt-get download -q avahi-daemon avahi-utils libavahi-core7 libdaemon0 >/dev/null 2>&1); then
      rm -rf "$debs"; AVAHI_SKIP="apt-get download avahi-daemon avahi-utils failed (no Debian mirror?)"; return 1
    fi
    mkdir -p "$AVAHI_ROOT"
    local d; for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$AVAHI_ROOT" || { rm -rf "$debs"; AVAHI_SKIP="dpkg-deb -x $d failed"; return 1; }; done
    rm -rf "$debs"
  fi
  command -v dbus-daemon >/dev/null || { AVAHI_SKIP="no dbus-daemon (Debian package dbus-daemon)"; return 1; }
}

# avahi_env: the library path for the unpacked copy.
avahi_env() { [ -z "$AVAHI_ROOT" ] || printf 'LD_LIBRARY_PATH=%s/usr/lib/%s-linux-gnu' "$AVAHI_ROOT" "$(uname -m)"; }

# avahi_version: "0.8" (the daemon's --version), or nothing.
avahi_version() {
  local e; e=$(avahi_env)
  env ${e:+"$e"} "$AVAHI_ROOT/usr/sbin/avahi-daemon" --version 2>/dev/null | awk '{print $2}' || true
}

avahi_start() {
  local ns=$1 iface=$2 host=$3 dir=$4 i
  mkdir -p "$dir"
  cat >"$dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$dir/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/> <allow send_destination="*"/> <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
  cat >"$dir/avahi-daemon.conf" <<EOF
[server]
host-name=$host
use-ipv4=yes
use-ipv6=no
allow-interfaces=$iface
enable-dbus=yes
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
EOF
  # The wrapper owns both daemons: TERM to it stops them (avahi first, it says goodbye).
  # shellcheck disable=SC2016
  ip netns exec "$ns" unshare --mount --propagation private sh -c '
    dir=$1 root=$2 libenv=$3
    mount -t tmpfs tmpfs /run && mkdir -p /run/avahi-daemon /run/dbus || exit 1
    # avahi-daemon chowns its runtime directory to user avahi even when it keeps root: that
    # user exists only in this mount namespace (copies of passwd/group bind-mounted here).
    for f in passwd group; do
      if ! grep -q "^avahi:" "/etc/$f"; then
        cp "/etc/$f" "$dir/$f" && echo "avahi:x:4243:4243::/nonexistent:/usr/sbin/nologin" | cut -d: -f"$([ $f = passwd ] && echo 1-7 || echo 1-3)" >>"$dir/$f" &&
          mount --bind "$dir/$f" "/etc/$f" || exit 1
      fi
    done
    dbus-daemon --config-file="$dir/bus.conf" --nofork --nopidfile & b=$!
    i=0; while [ ! -S "$dir/bus" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$dir/bus"
    env $libenv "$root/usr/sbin/avahi-daemon" -f "$dir/avahi-daemon.conf" --no-drop-root --no-chroot --no-rlimits & a=$!
    trap "kill $a 2>/dev/null; wait $a; kill $b 2>/dev/null; wait $b; exit 0" TERM INT
    wait $a; kill $b 2>/dev/null; wait $b' _ "$dir" "$AVAHI_ROOT" "$(avahi_env)" >"$dir/daemon.log" 2>&1 &
  echo $! >"$dir/wrapper.pid"
  for ((i = 0; i < 100; i++)); do
    grep -q "Server startup complete" "$dir/daemon.log" 2>/dev/null && return 0
    kill -0 "$(cat "$dir/wrapper.pid")" 2>/dev/null || break
    sleep 0.1
  done
  AVAHI_SKIP="avahi-daemon did not come up in $ns within 10 s: $(tail -n 3 "$dir/daemon.log" | tr '\n' ' ')"
  avahi_stop "$dir"; return 1
}

avahi_cmd() {
  AVAHI_CMD=(env "DBUS_SYSTEM_BUS_ADDRESS=unix:path=$1/bus")
  [ -z "$AVAHI_ROOT" ] || AVAHI_CMD+=("$(avahi_env)")
  AVAHI_CMD+=("$AVAHI_ROOT/usr/bin/$2")
}

avahi_stop() {
  local dir=$1 p i
  p=$(cat "$dir/wrapper.pid" 2>/dev/null) || return 0
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
  rm -f "$dir/wrapper.pid"
}
