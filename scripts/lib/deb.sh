# shellcheck shell=bash
# Debian packages of Piconet's binaries, made with dpkg-deb alone (no debhelper, no source
# package): what `scripts/build-release --deb` writes. Source after common.sh.
#
#   deb_package PRODUCT BINARY DEBARCH OUTDIR [RUNNER]   # prints the .deb's path
#
# PRODUCT: piconet-node, piconet-hub or piconet. BINARY: the stripped release binary. RUNNER: a
# command prefix that runs BINARY on this machine (qemu-user for another architecture); the
# version (`--version`) and the man page (help2man over `--help`) come from the binary itself.
# What each package holds and why is in docs/packages.md.
PICONET_DEB_MAINTAINER='Piconet developers <piconet@lists.piconet.invalid>'
PICONET_DEB_HOMEPAGE=https://github.com/piconet/piconet

# deb_summary PRODUCT: the one-line description (Description's synopsis, the man page's NAME).
deb_summary() {
  case "$1" in
    piconet-node) echo "Piconet sensor node: advertise, pair with a hub, stream samples" ;;
    piconet-hub) echo "Piconet aggregator hub: find nodes, aggregate and serve samples" ;;
    piconet) echo "command line for Piconet boards: browse, pair, send, update" ;;
  esac
}

deb_long_description() {
  case "$1" in
    piconet-node) cat <<'EOF'
 A Piconet node advertises itself over mDNS/DNS-SD (and Bluetooth LE when
 configured), accepts a hub's invitation with consent, and streams heart-rate
 and motion samples over an encrypted session. It runs as the systemd service
 piconet-node.service, as its own system user, configured in
 /etc/piconet/node.json; its identity key is made at first start in
 /var/lib/piconet. Over-the-air updates go to /var/lib/piconet/update.
EOF
    ;;
    piconet-hub) cat <<'EOF'
 The Piconet hub browses for nodes, invites them, aggregates heart-rate and
 motion per node and per group, keeps a history in SQLite and serves it over
 HTTP (live page, JSON API, metrics). It runs as the systemd service
 piconet-hub.service, as its own system user, configured in
 /etc/piconet/hub.json, with its state in /var/lib/piconet.
EOF
    ;;
    piconet) cat <<'EOF'
 The piconet command browses and advertises services over mDNS/DNS-SD and
 Bluetooth LE, invites peers and exchanges messages with them, sends signed
 updates to boards and checks board profiles. No service is installed.
EOF
    ;;
  esac
}

# deb_version BINARY [RUNNER]: the binary's own version (`piconet-node 1.2.3` -> 1.2.3).
deb_version() {
  local bin=$1; shift
  "$@" "$bin" --version 2>/dev/null | awk 'NR == 1 {print $NF}' | grep -E '^[0-9]+(\.[0-9]+)*$'
}

# deb_unit PRODUCT: the systemd unit. The defaults need no capability: the node's default
# transport is Wi-Fi (mDNS and UDP), as a board profile without Bluetooth gets from flash-sd;
# Bluetooth takes CAP_NET_RAW/CAP_NET_ADMIN, which a drop-in adds (docs/packages.md).
deb_unit() {
  local p=$1 what=node
  [ "$p" = piconet-hub ] && what=hub
  cat <<EOF
[Unit]
Description=$(deb_summary "$p")
Documentation=man:$p(1) $PICONET_DEB_HOMEPAGE
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
User=piconet
Group=piconet
# gpio: /dev/gpiochip* for the LEDs and button; bluetooth: BlueZ's D-Bus policy.
SupplementaryGroups=gpio bluetooth
# Wi-Fi needs no capability; for Bluetooth see /usr/share/doc/$p/README.Debian.
CapabilityBoundingSet=
AmbientCapabilities=
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK AF_BLUETOOTH
RestrictNamespaces=yes
LockPersonality=yes
StateDirectory=piconet
StateDirectoryMode=0750
ExecStart=/usr/bin/$p --config /etc/piconet/$what.json
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
EOF
}

# deb_config PRODUCT: the shipped /etc/piconet/ROLE.json (a conffile: an edit survives upgrades).
deb_config() {
  case "$1" in
    piconet-node) jq -n '{role: "node", service: "hr-sensor", board: "none", accept: "ask",
      "state-dir": "/var/lib/piconet", "boards-dir": "/usr/share/piconet/boards"}' ;;
    piconet-hub) jq -n '{role: "hub", service: "hr-sensor", board: "none", invite: "none",
      http: "127.0.0.1:8080", "state-dir": "/var/lib/piconet", "boards-dir": "/usr/share/piconet/boards"}' ;;
  esac
}

# Maintainer scripts, as debhelper writes them for a service: enabled and started on install,
# restarted on upgrade, stopped on remove; the user and the state go on purge only.
deb_postinst() {
  cat <<EOF
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
  # Groups the unit names: gpio and bluetooth exist on Raspberry Pi OS; made here elsewhere.
  getent group gpio >/dev/null || addgroup --quiet --system gpio
  getent group bluetooth >/dev/null || addgroup --quiet --system bluetooth
  getent passwd piconet >/dev/null || adduser --quiet --system --group --home /var/lib/piconet \\
    --no-create-home --shell /usr/sbin/nologin --gecos "Piconet services" piconet
  adduser --quiet piconet gpio
  adduser --quiet piconet bluetooth
fi
if [ "\$1" = configure ] || [ "\$1" = abort-upgrade ] || [ "\$1" = abort-deconfigure ] || [ "\$1" = abort-remove ]; then
  deb-systemd-helper unmask $1.service >/dev/null || true
  if deb-systemd-helper --quiet was-enabled $1.service; then
    deb-systemd-helper enable $1.service >/dev/null || true
  else
    deb-systemd-helper update-state $1.service >/dev/null || true
  fi
  if [ -z "\${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
    if [ -n "\$2" ]; then
      deb-systemd-invoke restart $1.service >/dev/null || true
    else
      deb-systemd-invoke start $1.service >/dev/null || true
    fi
  fi
fi
exit 0
EOF
}

deb_prerm() {
  cat <<EOF
#!/bin/sh
set -e
if [ -z "\${DPKG_ROOT:-}" ] && [ "\$1" = remove ] && [ -d /run/systemd/system ]; then
  deb-systemd-invoke stop $1.service >/dev/null || true
fi
exit 0
EOF
}

# The state directory is shared by the node and the hub (one user, StateDirectory=piconet): each
# purge removes its own files, and the last one the directory and the user.
deb_postrm() {
  local p=$1 other=piconet-hub files='identity.key trust.json update'
  [ "$p" = piconet-hub ] && other=piconet-node files='hub-identity.key hub.sqlite hub.sqlite-wal hub.sqlite-shm hub.sqlite-journal'
  cat <<EOF
#!/bin/sh
set -e
if [ -z "\${DPKG_ROOT:-}" ] && [ "\$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null || true
fi
if [ "\$1" = remove ]; then
  deb-systemd-helper mask $p.service >/dev/null || true
fi
if [ "\$1" = purge ]; then
  deb-systemd-helper purge $p.service >/dev/null || true
  deb-systemd-helper unmask $p.service >/dev/null || true
  for f in $files; do rm -rf "/var/lib/piconet/\$f"; done
  if ! dpkg-query -W -f='\${Status}' $other 2>/dev/null | grep -q 'ok installed'; then
    rm -rf /var/lib/piconet /var/lib/private/piconet
    if getent passwd piconet >/dev/null; then deluser --quiet --system piconet >/dev/null || true; fi
    if getent group piconet >/dev/null; then delgroup --quiet --system piconet >/dev/null || true; fi
  fi
fi
exit 0
EOF
}

# deb_manpage PRODUCT BINARY OUT [RUNNER...]: section 1 from --help and --version (help2man).
deb_manpage() {
  local p=$1 bin=$2 out=$3; shift 3
  local wrap; wrap=$(mktemp -d)
  # help2man names the page after the program it runs: a wrapper of the same name.
  printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$*" "$bin" >"$wrap/$p"; chmod 755 "$wrap/$p"
  help2man --no-info --no-discard-stderr --section 1 --name "$(deb_summary "$p")" \
    --source Piconet "$wrap/$p" >"$out.tmp" || { rm -rf "$wrap" "$out.tmp"; return 1; }
  rm -rf "$wrap"
  gzip -9n <"$out.tmp" >"$out" && rm -f "$out.tmp"
}

deb_copyright() {
  cat <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: Piconet
Source: $PICONET_DEB_HOMEPAGE

Files: *
Copyright: Piconet developers
License: Apache-2.0

Files: usr/bin/piconet-node
Copyright: 2013-2024 Frank Denis (libsodium, linked statically)
 2017-2023 Bartosz Golaszewski (libgpiod, linked statically)
License: ISC and LGPL-2.1+
 libsodium is under the ISC license; libgpiod under the LGPL 2.1 or later:
 see /usr/share/common-licenses/LGPL-2.1.

License: Apache-2.0
 On Debian systems the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF
}

# deb_depends PRODUCT BINARY: the shared libraries BINARY needs, as Debian package names.
deb_depends() {
  local deps='libc6 (>= 2.36)' lib
  for lib in $(readelf -d "$2" | awk '/NEEDED/ {gsub(/[\[\]]/, "", $5); print $5}'); do
    case "$lib" in
      libc.so.6|libm.so.6|ld-linux*|libpthread.so.0|libdl.so.2|librt.so.1|libutil.so.1) ;;
      libstdc++.so.6) deps+=', libstdc++6 (>= 12)' ;;
      libgcc_s.so.1) deps+=', libgcc-s1 (>= 3.0)' ;;
      libmosquitto.so.1) deps+=', libmosquitto1 (>= 2.0)' ;;
      libsqlite3.so.0) deps+=', libsqlite3-0 (>= 3.40)' ;;
      libz.so.1) deps+=', zlib1g (>= 1:1.2.13)' ;;
      *) warn "deb: $2 needs $lib, which no package rule names"; return 1 ;;
    esac
  done
  [ "$1" = piconet ] || deps+=', adduser, init-system-helpers (>= 1.54)'
  printf '%s\n' "$deps"
}

deb_package() {
  local p=$1 bin=$2 arch=$3 outdir=$4; shift 4
  local version; version=$(deb_version "$bin" "$@") || { warn "deb: $bin --version printed no version"; return 1; }
  local v="$version-1" root; root=$(mktemp -d)
  local doc="$root/usr/share/doc/$p"
  mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" "$doc" "$root/usr/share/lintian/overrides"
  # What dh_strip removes beyond a plain strip (the toolchain's llvm-objcopy reads every arch).
  "${PICONET_SWIFT:-/opt/swift/usr}/bin/llvm-objcopy" --strip-all --remove-section=.comment --remove-section=.note \
    "$bin" "$root/usr/bin/$p" || { rm -rf "$root"; return 1; }
  chmod 0755 "$root/usr/bin/$p"
  deb_manpage "$p" "$bin" "$root/usr/share/man/man1/$p.1.gz" "$@" || { rm -rf "$root"; warn "deb: help2man failed for $p"; return 1; }
  deb_copyright >"$doc/copyright"
  printf '%s (%s) stable; urgency=medium\n\n  * Release %s, built by scripts/build-release --deb.\n\n -- %s  %s\n' \
    "$p" "$v" "$version" "$PICONET_DEB_MAINTAINER" "$(date -R -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$PICONET_ROOT" log -1 --format=%ct 2>/dev/null || date +%s)}")" \
    | gzip -9n >"$doc/changelog.Debian.gz"
  if [ "$p" != piconet ]; then
    local role=${p#piconet-}
    mkdir -p "$root/etc/piconet" "$root/lib/systemd/system" "$root/usr/share/piconet/boards"
    deb_config "$p" >"$root/etc/piconet/$role.json"
    deb_unit "$p" >"$root/lib/systemd/system/$p.service"
    install -m 0644 "$PICONET_ROOT"/Boards/*.json "$root/usr/share/piconet/boards/"
    echo "/etc/piconet/$role.json" >"$root/DEBIAN/conffiles"
    deb_postinst "$p" >"$root/DEBIAN/postinst"; deb_prerm "$p" >"$root/DEBIAN/prerm"; deb_postrm "$p" >"$root/DEBIAN/postrm"
    chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
    deb_readme "$p" >"$doc/README.Debian"
  fi
  deb_overrides "$p" "$arch" >"$root/usr/share/lintian/overrides/$p"
  [ -s "$root/usr/share/lintian/overrides/$p" ] || rm -f "$root/usr/share/lintian/overrides/$p"
  find "$root" -type d -exec chmod 0755 {} +
  find "$root" -type f ! -path "$root/DEBIAN/*" ! -path "$root/usr/bin/*" -exec chmod 0644 {} +
  (cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
  cat >"$root/DEBIAN/control" <<EOF
Package: $p
Version: $v
Architecture: $arch
Maintainer: $PICONET_DEB_MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $(deb_depends "$p" "$bin")
Section: net
Priority: optional
Homepage: $PICONET_DEB_HOMEPAGE
Description: $(deb_summary "$p")
$(deb_long_description "$p")
EOF
  local deb="$outdir/${p}_${v}_$arch.deb"
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null || { rm -rf "$root"; return 1; }
  rm -rf "$root"
  printf '%s\n' "$deb"
}

deb_readme() {
  cat <<EOF
$1 for Debian and Raspberry Pi OS
$(printf '%*s' $((${#1} + 32)) '' | tr ' ' '-')

The service runs as the system user "piconet" with no capabilities, which is
all Wi-Fi discovery and sessions need. For Bluetooth (--transport bluetooth or
any), give it the two capabilities raw HCI and L2CAP sockets need:

  sudo systemctl edit $1.service

    [Service]
    AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN
    CapabilityBoundingSet=CAP_NET_RAW CAP_NET_ADMIN

Configuration: /etc/piconet/${1#piconet-}.json (kept across upgrades).
State (identity key, made at first start with mode 0600): /var/lib/piconet,
kept by "apt remove", deleted by "apt purge".
EOF
}

# deb_overrides PRODUCT DEBARCH: lintian overrides, each with its reason (lintian prints the
# comment line above a tag when it applies the override).
deb_overrides() {
  printf '# Built outside the Debian archive: there is no ITP bug to close.\n%s: initial-upload-closes-no-bugs\n' "$1"
  [ "$1" = piconet ] || printf '# A systemd service only: its sandbox (the unit) is part of the package.\n%s: package-supports-alternative-init-but-no-init.d-script\n' "$1"
  [ "$2" != armhf ] || printf '# 32-bit Arm Embedded Swift is compiled position-dependent: lld cannot make it a PIE (scripts/lib/aarch64.sh).\n%s: hardening-no-pie\n' "$1"
  printf '# Linked as Package.swift and scripts/lib/aarch64.sh link it (lazy binding: start-up cost on a Pi Zero).\n%s: hardening-no-bindnow\n' "$1"
}
