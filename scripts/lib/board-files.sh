# shellcheck shell=bash
# What scripts/flash-sd and scripts/provision install on a board, rendered in one place
# so an SD card and a provisioned board get byte-identical files. Source after common.sh.
#
# The contract with the binaries (their flags are not final; this file is the contract):
#   /usr/local/bin/piconet-<role>          the node or hub binary, 0755 root:root
#   /etc/piconet/<role>.json               its config (render_config), 0644 root:root
#   /etc/piconet/board.json                the board profile, copied from Boards/<id>.json, 0644
#   /etc/piconet/boards/<id>.json          the same profile where `piconet led test` looks, 0644
#   /etc/systemd/system/piconet-<role>.service   runs
#                                          `/usr/local/bin/piconet-<role> --config /etc/piconet/<role>.json`
#                                          as user piconet (groups gpio, bluetooth), Restart=on-failure
#   /var/lib/piconet                       the service's state (identity keys), 0750 piconet:piconet
# On demand (scripts/provision --on-demand SECONDS; PICONET_ON_DEMAND=SECONDS here), a node also gets
#   /etc/systemd/system/piconet-node.socket   systemd holds UDP PICONET_ON_DEMAND_PORT (default 7070);
#                                          the first datagram starts the service, which takes the socket
#                                          (LISTEN_FDS) and exits after SECONDS with no peer
#   /etc/avahi/services/piconet-node.service  written by the node (0644 piconet:piconet): Avahi
#                                          advertises the node from it while it is not running
# Config JSON: only keys piconet-node and piconet-hub accept (they refuse unknown keys, so no
# "schema" key; stage 50-flash-provision starts the real node on a provisioned config):
# The keys are the binaries' long flag names (as README's config section promises):
#   {"name":NAME, "role":"node"|"hub", "service":"hr-sensor", "board":ID,
#    "gpio-chip":LABEL|null, "interface":[IFACE]  (the discovery interface, wlan0 by default),
#    "state-dir":"/var/lib/piconet", "boards-dir":"/etc/piconet/boards",
#    "allow-list":[PEER_ID]   (a node: only with --hub-key, 32 hex digits as piconet-hub prints it;
#                              a hub: the --node-key IDs; without any a hub admits no node),
#    "update-key":"RW..."     (a node: only with --update-key FILE, the release key's line from the
#                              minisign .pub: the node then takes signed updates, docs/updates.md)}
# With scripts/provision --prefix P, state-dir and boards-dir start with P, so the
# binary started from the prefix keeps its identity and finds its board there.

PICONET_SERVICE_TYPE=hr-sensor
PICONET_USER=piconet
PICONET_ON_DEMAND=${PICONET_ON_DEMAND:-}
PICONET_ON_DEMAND_PORT=${PICONET_ON_DEMAND_PORT:-7070}
PICONET_AVAHI_SERVICE=/etc/avahi/services/piconet-node.service

# ELF constants (System V gABI / ARM ELF ABI): e_machine values and the ARM hard-float flag.
ELF_EM_ARM=40 ELF_EM_X86_64=62 ELF_EM_AARCH64=183 ELF_EM_386=3 ELF_EM_RISCV=243
ELF_ARM_ABI_FLOAT_SOFT=0x200

# elf_machine FILE: prints the architecture of a little-endian ELF file (aarch64, armhf,
# armel, x86_64, i386, riscv64, or "e_machine N"), or says why it is not one and returns 1.
# Reads only the header: magic, EI_CLASS, EI_DATA, e_machine and (32-bit ARM) e_flags.
elf_machine() {
  local f=$1 bytes
  [ -f "$f" ] || { warn "binary $f: no such file"; return 1; }
  [ -r "$f" ] || { warn "binary $f: not readable"; return 1; }
  # One decimal per byte; a short file gives fewer fields, which the checks below catch.
  read -r -a bytes < <(od -An -v -tu1 -N64 "$f" | tr -s ' \n' '  ')
  if [ "${#bytes[@]}" -lt 52 ] || [ "${bytes[0]}" != 127 ] || [ "${bytes[1]}" != 69 ] \
     || [ "${bytes[2]}" != 76 ] || [ "${bytes[3]}" != 70 ]; then
    warn "binary $f: not an ELF file (no 0x7f 'ELF' header); give the piconet binary built for the board"
    return 1
  fi
  local class=${bytes[4]} data=${bytes[5]} machine=$(( bytes[18] + 256 * bytes[19] ))
  [ "$data" = 1 ] || { warn "binary $f: big-endian ELF; these boards run little-endian"; return 1; }
  case "$class:$machine" in
    2:"$ELF_EM_AARCH64") echo aarch64 ;;
    1:"$ELF_EM_ARM")
      # e_flags sits at offset 36 in a 32-bit header; soft-float is Debian's armel.
      local flags=$(( bytes[36] + 256 * bytes[37] + 65536 * bytes[38] + 16777216 * bytes[39] ))
      if (( flags & ELF_ARM_ABI_FLOAT_SOFT )); then echo armel; else echo armhf; fi ;;
    2:"$ELF_EM_X86_64") echo x86_64 ;;
    1:"$ELF_EM_386") echo i386 ;;
    2:"$ELF_EM_RISCV") echo riscv64 ;;
    *) echo "e_machine $machine ($((class * 32))-bit)" ;;
  esac
}

# elf_arch FILE: like elf_machine, but only "aarch64" or "armhf" (what Pi OS runs) succeed.
elf_arch() {
  local a
  a=$(elf_machine "$1") || return 1
  case "$a" in
    aarch64|armhf) echo "$a" ;;
    armel) warn "binary $1: 32-bit ARM soft-float (armel); Pi OS needs armhf (hard-float) or aarch64"; return 1 ;;
    *) warn "binary $1: built for $a; the board needs aarch64 or armhf"; return 1 ;;
  esac
}

# build_arch FILE: the build a binary is: aarch64, armv7 or armv6 (the names of
# scripts/build-release --arch and of a profile's "arch"), else what elf_machine says (x86_64 ...).
# For 32-bit ARM the ELF header cannot tell: the Tag_CPU_arch attribute (readelf -A) does, and
# ARMv7 code traps on a Pi 1 / Zero (ARMv6). Soft-float (armel) is refused as elf_arch does.
build_arch() {
  local a cpu
  a=$(elf_machine "$1") || return 1
  case "$a" in
    armel) elf_arch "$1"; return 1 ;;
    armhf) ;;
    *) echo "$a"; return 0 ;;
  esac
  command -v readelf >/dev/null || { warn "binary $1: readelf (binutils) is needed to tell armv6 from armv7"; return 1; }
  cpu=$(readelf -A "$1" 2>/dev/null | awk -F': *' '/Tag_CPU_arch:/ {print $2; exit}')
  case "$cpu" in
    v4*|v5*|v6*) echo armv6 ;;
    v7*|v8*) echo armv7 ;;
    *) warn "binary $1: 32-bit ARM without a Tag_CPU_arch attribute (readelf -A): cannot tell armv6 from armv7"; return 1 ;;
  esac
}

# check_board_arch FILE PROFILE-FILE: fails, saying so on one line, when the profile's "arch"
# (the builds the board's Pi OS runs) does not list the binary's build_arch. No "arch": no check.
check_board_arch() {
  local b allowed id
  b=$(build_arch "$1") || return 1
  allowed=$(jq -r '(.arch // []) | join(" ")' "$2") || { warn "board profile $2: not readable JSON"; return 1; }
  [ -n "$allowed" ] || return 0
  case " $allowed " in *" $b "*) return 0 ;; esac
  id=$(jq -r .id "$2")
  warn "binary $1 is $b, but board $id runs ${allowed// /, } (its profile's \"arch\"): build it with scripts/build-release --arch ${allowed%% *}"
  return 1
}

# uname_arch MACHINE: the binary architecture a `uname -m` answer runs natively.
uname_arch() {
  case "$1" in
    aarch64|arm64) echo aarch64 ;;
    armv6l|armv7l|armv8l) echo armhf ;;
    x86_64|amd64) echo x86_64 ;;
    i?86) echo i386 ;;
    *) echo "$1" ;;
  esac
}

# board_profile_file ID: path of Boards/ID.json after checking it exists and names itself ID.
board_profile_file() {
  local id=$1 dir=${PICONET_BOARDS:-$PICONET_ROOT/Boards}
  if ! [[ "$id" =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] || [ ! -f "$dir/$id.json" ]; then
    local known
    known=$(find "$dir" -maxdepth 1 -name '*.json' -printf '%f\n' 2>/dev/null | sed 's/\.json$//' | sort | tr '\n' ' ')
    warn "unknown board '$id' (boards in $dir: ${known:-none})"
    return 1
  fi
  if ! jq -e --arg id "$id" '.schema == 1 and .id == $id' "$dir/$id.json" >/dev/null 2>&1; then
    warn "board profile $dir/$id.json is not a schema 1 profile with id \"$id\""
    return 1
  fi
  echo "$dir/$id.json"
}

# check_role ROLE / check_name NAME / check_key KEY: argument shapes, message on stderr.
check_role() { case "$1" in node|hub) ;; *) warn "role must be node or hub, not '$1'"; return 1 ;; esac; }
check_name() {
  [[ "$1" =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ ]] && return 0
  warn "name '$1' is not a valid hostname (1-63 of a-z 0-9 -, not starting or ending with -)"
  return 1
}
# release_key_line FILE: the key line of a minisign public key file (what `minisign -G` writes:
# a comment, then "RW" and 54 more base64 characters), or a message and 1.
release_key_line() {
  local line
  [ -r "$1" ] || { warn "release key $1: not readable (make one with: minisign -G -p release.pub -s release.key)"; return 1; }
  line=$(grep -v '^untrusted comment:' "$1" | head -n1 | tr -d '\r')
  [[ "$line" =~ ^RW[A-Za-z0-9+/]{54}$ ]] || { warn "release key $1: not a minisign public key (no RW... key line)"; return 1; }
  printf '%s\n' "$line"
}
check_key() {
  [[ "$1" =~ ^[0-9a-fA-F]{32}$ ]] && return 0
  warn "hub key must be the hub's peer ID: 32 hex digits, as piconet-hub prints it at start (got '$1')"
  return 1
}

# render_config ROLE NAME BOARD_FILE [KEYS] [IFACE] [PREFIX] [RELEASE_KEY]: the config JSON on stdout.
# KEYS: a node's hub peer ID, or a hub's node peer IDs comma-separated (its allow-list: the nodes it
# invites). IFACE "" leaves "interface" out (the binary then uses every up multicast interface).
# RELEASE_KEY: the minisign public key line a node takes updates signed with (release_key_line).
render_config() {
  local role=$1 name=$2 board=$3 key=${4:-} iface=${5-wlan0} prefix=${6:-} release=${7:-}
  local idle=''; [ "$role" = node ] && idle=$PICONET_ON_DEMAND
  jq -n --arg role "$role" --arg name "$name" --arg service "$PICONET_SERVICE_TYPE" \
        --arg key "$key" --arg iface "$iface" --arg p "$prefix" --arg release "$release" --slurpfile b "$board" \
        --arg idle "$idle" --arg port "$PICONET_ON_DEMAND_PORT" --arg avahi "$PICONET_AVAHI_SERVICE" '
    {name: $name, role: $role, service: $service, board: $b[0].id, "gpio-chip": $b[0].gpioChip,
     "state-dir": ($p + "/var/lib/piconet"), "boards-dir": ($p + "/etc/piconet/boards")}
    + (if $iface == "" then {} else {interface: [$iface]} end)
    + (if $key == "" then {} else {"allow-list": ($key | ascii_downcase | split(","))} end)
    + (if $release == "" then {} else {"update-key": $release} end)
    + (if $idle == "" then {} else {port: ($port | tonumber), "idle-exit": ($idle | tonumber), "avahi-service": $avahi} end)'
}

# start_command ROLE [PREFIX]: the command line that runs the binary on its config: the unit's
# ExecStart, and what scripts/provision --no-systemd starts (with PICONET_BOARDS as the unit sets).
start_command() { printf '%s/usr/local/bin/piconet-%s --config %s/etc/piconet/%s.json' "${2:-}" "$1" "${2:-}" "$1"; }

# render_unit ROLE BOARD_FILE: the systemd service on stdout.
render_unit() {
  local role=$1 board=$2 bt
  bt=$(jq -r '.bluetoothAdapter // empty' "$board")
  # Capabilities only serve Bluetooth sockets: a board without an adapter gets an empty set.
  local caps='' capnote='# No Bluetooth adapter in the board profile: no capabilities at all.'
  if [ -n "$bt" ]; then
    caps='CAP_NET_RAW CAP_NET_ADMIN'
    capnote="# Raw HCI and L2CAP sockets ($bt) need these; ambient so the binary keeps them without root."
  fi
  # On demand: started by its socket (never at boot), with no start limit: a node that crashed
  # must not leave the socket failed for good (systemd's service-start-limit-hit); Restart's
  # 2 s pace the starts instead. It writes the Avahi file Avahi advertises it from.
  local demand='' install='WantedBy=multi-user.target' limit='' writable=''
  if [ "$role" = node ] && [ -n "$PICONET_ON_DEMAND" ]; then
    demand=" on demand (piconet-node.socket)" install='Also=piconet-node.socket' limit=$'\nStartLimitIntervalSec=0'
    writable=$'\n'"ReadWritePaths=$PICONET_AVAHI_SERVICE"
  fi
  cat <<EOF
# Written by Piconet's scripts/flash-sd or scripts/provision; rewritten on every run.
[Unit]
Description=Piconet $role ($(jq -r .id "$board"))$demand
Documentation=https://github.com/piconet/piconet
Wants=network-online.target
After=network-online.target${bt:+ bluetooth.target}$limit

[Service]
Type=simple
User=$PICONET_USER
Group=$PICONET_USER
# gpio: /dev/gpiochip* for the LEDs and button; bluetooth: BlueZ's D-Bus policy.
SupplementaryGroups=gpio bluetooth
$capnote
${caps:+AmbientCapabilities=$caps
}CapabilityBoundingSet=$caps
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
StateDirectory=piconet
StateDirectoryMode=0750$writable
Environment=PICONET_BOARDS=/etc/piconet/boards
ExecStart=$(start_command "$role")
Restart=on-failure
RestartSec=2

[Install]
$install
EOF
}

# render_socket_unit BOARD_FILE: piconet-node.socket on stdout (PICONET_ON_DEMAND set).
render_socket_unit() {
  cat <<EOF
# Written by Piconet's scripts/provision --on-demand; rewritten on every run.
[Unit]
Description=Piconet node ($(jq -r .id "$1")): the first datagram starts piconet-node.service
Documentation=https://github.com/piconet/piconet

[Socket]
ListenDatagram=0.0.0.0:$PICONET_ON_DEMAND_PORT
ReceiveBuffer=1M
# One node for every peer (Accept=no): a burst while it is down starts it once, and while it
# runs systemd does not look at the socket; the node drops what it does not admit, and counts it.

[Install]
WantedBy=sockets.target
EOF
}

# The commands a non-root login may run through `sudo -n` (render_sudoers), with the exact
# paths scripts/provision calls them by: sudo matches a rule's words one for one.
PICONET_SUDO_INSTALL='/usr/bin/install -D -m'
PICONET_SUDO_SYSTEMCTL=/usr/bin/systemctl

# sudo_install_words PATH MODE: the install command that writes stdin to /PATH, root-owned.
# Content comes from stdin (not a file the login could point elsewhere with a symlink).
sudo_install_words() { printf '%s %s -o 0 -g 0 /dev/stdin /%s' "$PICONET_SUDO_INSTALL" "$2" "$1"; }

# render_sudoers LOGIN ROLE BOARD_ID: the sudoers drop-in on stdout. Not `NOPASSWD: ALL`: only
# writing the binary, the CLI, the config and the board profile into their places and stopping,
# starting or restarting the unit. The unit itself (which names the command systemd runs as
# whom) is not among them: flash-sd writes it, and a changed one needs root.
render_sudoers() {
  local login=$1 role=$2 id=$3 path mode verb sep='' unit=piconet-$2.service
  printf '# Written by Piconet flash-sd: what scripts/provision runs through sudo -n as %s, nothing more.\n' "$login"
  printf 'Cmnd_Alias PICONET_PROVISION = '
  while read -r path mode; do
    case "$path" in etc/systemd/*) continue ;; esac
    printf '%s%s' "$sep" "$(sudo_install_words "$path" "$mode")"; sep=$', \\\n    '
  done < <(board_file_modes "$role" "$id"; echo "usr/local/bin/piconet 0755")
  for verb in stop start restart; do printf '%s%s %s %s' "$sep" "$PICONET_SUDO_SYSTEMCTL" "$verb" "$unit"; done
  printf '\n%s ALL=(root) NOPASSWD: PICONET_PROVISION\n' "$login"
}

# known_hosts_file [FILE]: where flash-sd records each board's SSH host key and provision
# looks it up (one "NAME ssh-ed25519 KEY" line per board; provision pins it by HostKeyAlias=NAME).
known_hosts_file() { printf '%s' "${1:-${PICONET_KNOWN_HOSTS:-${XDG_STATE_HOME:-$HOME/.local/state}/piconet/known_hosts}}"; }

# read_psk FILE: the Wi-Fi passphrase (first line), checked for WPA2-PSK's shape.
read_psk() {
  local f=$1 psk
  [ -f "$f" ] || { warn "PSK file $f: no such file"; return 1; }
  [ -r "$f" ] || { warn "PSK file $f: not readable"; return 1; }
  IFS= read -r psk <"$f" || [ -n "$psk" ] || { warn "PSK file $f: empty"; return 1; }
  psk=${psk%$'\r'}
  if [[ "$psk" =~ ^[0-9A-Fa-f]{64}$ ]] || { [ ${#psk} -ge 8 ] && [ ${#psk} -le 63 ] && [[ "$psk" =~ ^[[:print:]]+$ ]]; }; then
    printf '%s' "$psk"
  else
    warn "PSK file $f: a WPA passphrase is 8-63 printable characters or 64 hex digits (got ${#psk} characters)"
    return 1
  fi
}

# check_ssid SSID: 1-32 bytes, no control characters (the keyfile is line-based).
check_ssid() {
  local n
  n=$(printf '%s' "$1" | wc -c)
  if [ "$n" -lt 1 ] || [ "$n" -gt 32 ] || [[ "$1" =~ [[:cntrl:]] ]]; then
    warn "SSID must be 1-32 bytes without control characters"
    return 1
  fi
}

# render_nmconnection SSID PSK NAME [IFACE]: NetworkManager keyfile on stdout. The uuid is
# derived from name and SSID so re-flashing rewrites the same connection, not a new one.
render_nmconnection() {
  local ssid=$1 psk=$2 name=$3 iface=${4:-wlan0} h
  h=$(printf 'piconet-wifi\n%s\n%s' "$name" "$ssid" | sha256sum | cut -c1-32)
  # Keyfile values are backslash-escaped; SSIDs rarely have one, but one must not break the file.
  ssid=${ssid//\\/\\\\}; psk=${psk//\\/\\\\}
  cat <<EOF
[connection]
id=piconet-wifi
uuid=${h:0:8}-${h:8:4}-4${h:13:3}-a${h:17:3}-${h:20:12}
type=wifi
interface-name=$iface
autoconnect=true

[wifi]
mode=infrastructure
ssid=$ssid

[wifi-security]
key-mgmt=wpa-psk
psk=$psk

[ipv4]
method=auto

[ipv6]
addr-gen-mode=default
method=auto
EOF
}

# check_pubkey FILE: an OpenSSH public key file, not a private key.
check_pubkey() {
  local f=$1
  if [ ! -f "$f" ] || [ ! -r "$f" ]; then warn "SSH key $f: no such readable file"; return 1; fi
  if grep -q 'PRIVATE KEY' "$f"; then warn "SSH key $f is a PRIVATE key; give the .pub file"; return 1; fi
  grep -qE '^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-[a-z0-9]+|sk-[a-z0-9@.-]+) [A-Za-z0-9+/=]+' "$f" \
    || { warn "SSH key $f: not an OpenSSH public key line (ssh-ed25519 AAAA...)"; return 1; }
}

# stage_board_files DIR ROLE NAME BOARD_FILE BINARY [HUB_KEY] [WIFI_IFACE] [PREFIX]: lays out,
# under DIR, the files both scripts install, with their final modes (the config's paths under
# PREFIX, the unit's never: systemd does not look in a prefix). Prints nothing.
stage_board_files() {
  local dir=$1 role=$2 name=$3 board=$4 bin=$5 key=${6:-} wifi=${7-wlan0} prefix=${8:-} release=${9:-} id
  id=$(jq -r .id "$board")
  install -d -m 0755 "$dir/usr/local/bin" "$dir/etc/piconet/boards" "$dir/etc/systemd/system"
  install -m 0755 "$bin" "$dir/usr/local/bin/piconet-$role"
  render_config "$role" "$name" "$board" "$key" "$wifi" "$prefix" "$release" >"$dir/etc/piconet/$role.json"
  install -m 0644 "$board" "$dir/etc/piconet/board.json"
  install -m 0644 "$board" "$dir/etc/piconet/boards/$id.json"
  render_unit "$role" "$board" >"$dir/etc/systemd/system/piconet-$role.service"
  chmod 0644 "$dir/etc/piconet/$role.json" "$dir/etc/systemd/system/piconet-$role.service"
  if [ "$role" = node ] && [ -n "$PICONET_ON_DEMAND" ]; then
    render_socket_unit "$board" >"$dir/etc/systemd/system/piconet-node.socket"
    chmod 0644 "$dir/etc/systemd/system/piconet-node.socket"
  fi
}

# board_file_modes ROLE ID: "path mode" for every staged file, for installing and verifying.
board_file_modes() {
  printf '%s\n' "usr/local/bin/piconet-$1 0755" "etc/piconet/$1.json 0644" \
    "etc/piconet/board.json 0644" "etc/piconet/boards/$2.json 0644" \
    "etc/systemd/system/piconet-$1.service 0644"
  if [ "$1" = node ] && [ -n "$PICONET_ON_DEMAND" ]; then echo "etc/systemd/system/piconet-node.socket 0644"; fi
}

# browse_claims: reads `piconet browse --json` output (one {"event":"found","name":..,"info":{..}}
# per line, or an array) on stdin and prints, per "found" record, its claimed peer ID (info.peer,
# else info.id; "-" when it has none), a tab, and its name as a JSON string (control characters
# escaped: it came from the network). Claims only: the key is proved by a handshake, not here.
browse_claims() {
  jq -rs '.. | objects | select(has("name") and (.event? // "found") == "found")
    | "\((.info.peer // .info.id // .peerID // "-") | tostring | gsub("[\t\n]"; " "))\t\(.name | tojson)"' 2>/dev/null || true
}
