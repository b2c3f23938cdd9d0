# The aarch64 board build of piconet-node, from this machine's toolchain and Debian packages
# only. Source after common.sh: . "$PICONET_ROOT/scripts/lib/aarch64.sh"
#
# - arm64_sysroot: bookworm's arm64 glibc, libgcc, kernel headers, libsodium,
#   libgpiod and BlueZ headers, fetched with apt-get under a private apt configuration (the
#   machine's own apt sources are not touched) and unpacked with dpkg-deb, cached OUTSIDE the
#   checkout in $PICONET_CACHE (default /var/cache/piconet)/sysroot-bookworm-arm64-KEY, keyed by the
#   exact package versions (a new Debian point release unpacks a fresh one). Prints its path.
# - aarch64_qemu: qemu-aarch64 from trixie's qemu-user (a static binary, runs on bookworm),
#   cached the same way. Not bookworm's qemu-user-static 7.2: it mistranslates a 12-byte
#   `struct ip_mreqn` (IP_ADD_MEMBERSHIP by interface index, as the node's mDNS socket does)
#   and the kernel answers ENODEV; qemu 10 translates it right.
# - embedded_node_aarch64: piconet-node in Embedded Swift for aarch64, linked against
#   bookworm's glibc (so it needs nothing newer than 2.36 and runs on trixie too). Prints the
#   (unstripped) binary's path. SwiftPM compiles (target aarch64-none-none-elf: the toolchain's
#   Embedded stdlib for 64-bit Arm, with the sysroot's Linux headers); SwiftPM cannot link a
#   none-elf target against glibc, so clang links the objects with lld, as the facts file
#   (shared/facts/embedded-swift.md) checked by hand: no libm (CNodeLibm is among the
#   objects) and no .eh_frame, as Package.swift links the x86_64 node.
PICONET_CACHE=${PICONET_CACHE:-/var/cache/piconet}
PICONET_SWIFT=${PICONET_SWIFT:-/opt/swift/usr}

# _private_apt DIR ARCH SUITE: prints apt-get options for a private configuration under DIR.
_private_apt() {
  local dir=$1 arch=$2 suite=$3
  mkdir -p "$dir/etc/apt/sources.list.d" "$dir/etc/apt/preferences.d" "$dir/state/lists/partial" "$dir/cache/archives/partial"
  printf 'deb [arch=%s signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian %s main\n' \
    "$arch" "$suite" >"$dir/etc/apt/sources.list"
  printf '%s ' -o "Dir::Etc=$dir/etc/apt" -o "Dir::Etc::SourceList=$dir/etc/apt/sources.list" \
    -o "Dir::Etc::SourceParts=$dir/etc/apt/sources.list.d" -o "Dir::State=$dir/state" \
    -o "Dir::State::status=/dev/null" -o "Dir::Cache=$dir/cache" -o "APT::Architecture=$arch" \
    -o "APT::Architectures=$arch" -o "Debug::NoLocking=1"
}

# _fetch_unpacked ARCH SUITE TARGET PACKAGE...: downloads PACKAGEs of SUITE/ARCH and unpacks them
# into TARGET-<key> (key: a hash of the exact .deb names); prints that folder. Cached.
_fetch_unpacked() {
  local arch=$1 suite=$2 target=$3; shift 3
  local apt_dir="$PICONET_CACHE/apt-$suite-$arch" opts
  # shellcheck disable=SC2207
  opts=($(_private_apt "$apt_dir" "$arch" "$suite"))
  apt-get "${opts[@]}" update >&2 || return 1
  local debs="$apt_dir/debs"; rm -rf "$debs"; mkdir -p "$debs"
  (cd "$debs" && apt-get "${opts[@]}" download "$@" >&2 2>&1) || return 1
  local key; key=$(cd "$debs" && ls ./*.deb | sha256sum | cut -c1-12)
  local out="$target-$key"
  if [ ! -f "$out/.complete" ]; then
    rm -rf "$out"; mkdir -p "$out"
    for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$out" || return 1; done
    (cd "$debs" && ls ./*.deb) >"$out/.complete"
  fi
  # trixie is merged-/usr (its libc6 puts ld-linux-aarch64.so.1 in /usr/lib); the /lib link
  # comes from base-files there, which a run-time-only unpack does not include.
  [ -e "$out/lib" ] || ln -s usr/lib "$out/lib"
  printf '%s\n' "$out"
}

arm64_sysroot() {
  _fetch_unpacked arm64 bookworm "$PICONET_CACHE/sysroot-bookworm-arm64" \
    libc6 libc6-dev libgcc-12-dev libgcc-s1 linux-libc-dev \
    libsodium-dev libsodium23 libgpiod-dev libgpiod2 libbluetooth-dev libbluetooth3
}

# arm64_libc SUITE: only what the node needs at run time on SUITE (its glibc), for qemu -L.
arm64_libc() {
  _fetch_unpacked arm64 "$1" "$PICONET_CACHE/libc-$1-arm64" libc6 libgcc-s1
}

aarch64_qemu() {
  local dir; dir=$(_fetch_unpacked amd64 trixie "$PICONET_CACHE/qemu-trixie" qemu-user) || return 1
  printf '%s/usr/bin/qemu-aarch64\n' "$dir"
}

embedded_node_aarch64() {
  local sysroot; sysroot=$(arm64_sysroot) || return 1
  local scratch=${PICONET_EMBEDDED_SCRATCH:-$PICONET_ROOT/.build-embedded}-aarch64
  local lib="$PICONET_SWIFT/lib/swift/embedded/aarch64-none-none-elf"
  local clibs="$sysroot/usr/lib/aarch64-linux-gnu" gcc="$sysroot/usr/lib/gcc/aarch64-linux-gnu/12"
  # The none-elf target defines no OS: the sysroot's glibc headers need Linux's macros and
  # the multiarch include folder, which clang adds only for a *-linux-gnu target.
  PICONET_EMBEDDED=1 PICONET_EMBEDDED_LIB=$lib PICONET_EMBEDDED_CLIBS=$clibs \
    swift build -c release --package-path "$PICONET_ROOT" --scratch-path "$scratch" \
      --triple aarch64-none-none-elf --target piconet-node -Xswiftc -Osize \
      -Xcc --sysroot="$sysroot" -Xcc -D__linux__ -Xcc -D__gnu_linux__ -Xcc -D__unix__ \
      -Xcc -isystem -Xcc "$sysroot/usr/include/aarch64-linux-gnu" -Xcc -isystem -Xcc "$sysroot/usr/include" >&2 \
    || return 1
  local objects="$scratch/aarch64-none-none-elf/release" bin="$scratch/piconet-node-aarch64"
  # SwiftPM names an executable's entry point MODULE_main (for @testable); main is defined here.
  "$PICONET_SWIFT/bin/clang" --target=aarch64-linux-gnu --sysroot="$sysroot" -fuse-ld=lld \
    "$objects"/*.build/*.o "$lib/libswiftUnicodeDataTables.a" "$clibs/libsodium.a" "$clibs/libgpiod.a" \
    -Wl,--defsym,main=piconet_node_main -Wl,--gc-sections -Wl,-z,pack-relative-relocs -Wl,--no-export-dynamic \
    -Wl,--no-eh-frame-hdr -Wl,-T,"$PICONET_ROOT/scripts/lib/discard-eh-frame.ld" -Wl,-Map,"$bin.map" \
    -B "$gcc" -L "$gcc" -o "$bin" >&2 || return 1
  printf '%s\n' "$bin"
}
