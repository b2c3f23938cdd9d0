# shellcheck shell=bash
# The "systemd board" of the flash-provision and packages stages: this machine's own Debian booted
# by systemd-nspawn (PID 1 systemd) on an overlay (lower = / read-only, upper = a directory of the
# stage; nothing of / changes) in a network namespace the stage made. Source after common.sh.
#
#   systemd_board_mask UPPER                      # this machine's own services off on the board
#   systemd_board_start UPPER WORK ROOT NS LOG    # boots it; writes WORK/nspawn.pid
#   systemd_board_stop WORK                       # powers it off (20 s at most), then kills it
#   systemd_board_sh WORK CMD...                  # runs CMD on the board (all its namespaces)

# They would only start inside the namespace, but cost boot time (and mosquitto a port).
systemd_board_mask() {
  local u
  mkdir -p "$1/etc/systemd/system"
  for u in mosquitto.service postgresql.service bluetooth.service systemd-timesyncd.service apt-daily.timer \
           apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer man-db.timer getty@tty1.service; do
    ln -sf /dev/null "$1/etc/systemd/system/$u"
  done
}

# The overlay lives in a private mount namespace that systemd-nspawn then runs in. nspawn keeps
# CAP_NET_ADMIN only for networks it makes itself; a real board has it, and a unit may grant it.
systemd_board_start() {
  local up=$1 work=$2 root=$3 ns=$4 log=$5
  mkdir -p "$work/sd-work" "$root"
  # shellcheck disable=SC2016
  unshare --mount --propagation private sh -c \
    'mount -t overlay overlay -o "lowerdir=/,upperdir=$1,workdir=$2" "$3" &&
     exec systemd-nspawn --quiet --keep-unit --register=no --link-journal=no --console=passive --capability=CAP_NET_ADMIN \
       --directory="$3" --network-namespace-path="/run/netns/$4" --machine="$4" -b' _ "$up" "$work/sd-work" "$root" "$ns" \
    </dev/null >"$log" 2>&1 &
  echo $! >"$work/nspawn.pid"
}

systemd_board_stop() {
  local n i
  n=$(cat "$1/nspawn.pid" 2>/dev/null) || return 0
  kill -TERM "$n" 2>/dev/null
  for ((i = 0; i < 200; i++)); do kill -0 "$n" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$n" 2>/dev/null
  rm -f "$1/nspawn.pid"
}

# The board's PID 1 is systemd-nspawn's only child.
systemd_board_sh() {
  local work=$1 init; shift
  init=$(ps --ppid "$(cat "$work/nspawn.pid" 2>/dev/null)" -o pid= 2>/dev/null | head -n1 | tr -d ' ')
  [ -n "$init" ] || { warn "systemd board: not running"; return 1; }
  nsenter -t "$init" -m -u -i -n -p -C -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive sh -c "$*" </dev/null
}
