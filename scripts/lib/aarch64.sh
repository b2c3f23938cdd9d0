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
  # Already unpacked (same .deb names, so the same key as below): no download (swiftlang is 0.5 GB).
  local names; names=$(apt-get "${opts[@]}" download --print-uris "$@" 2>/dev/null | awk '{print "./" $2}' | sort)
  if [ -n "$names" ] && [ -f "$target-$(sha256sum <<<"$names" | cut -c1-12)/.complete" ]; then
    printf '%s\n' "$target-$(sha256sum <<<"$names" | cut -c1-12)"; return 0
  fi
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

# board_sysroot DEBARCH (arm64 or armhf): the node's build sysroot for that Debian architecture.
board_sysroot() {
  _fetch_unpacked "$1" bookworm "$PICONET_CACHE/sysroot-bookworm-$1" \
    libc6 libc6-dev libgcc-12-dev libgcc-s1 linux-libc-dev \
    libsodium-dev libsodium23 libgpiod-dev libgpiod2 libbluetooth-dev libbluetooth3
}
arm64_sysroot() { board_sysroot arm64; }

# arm64_libc SUITE: only what the node needs at run time on SUITE (its glibc), for qemu -L.
arm64_libc() {
  _fetch_unpacked arm64 "$1" "$PICONET_CACHE/libc-$1-arm64" libc6 libgcc-s1
}

# arm64_hub_runtime SUITE: what the hub needs at run time on SUITE: glibc and libmosquitto1
# (the MQTT export; Debian ships no static libmosquitto) with its OpenSSL (trixie renamed the
# package libssl3t64). That is what `apt install libmosquitto1` puts on a Pi.
arm64_hub_runtime() {
  # trixie's OpenSSL (libssl3t64) links zlib and zstd; bookworm's links neither.
  local ssl=(libssl3); [ "$1" = bookworm ] || ssl=(libssl3t64 zlib1g libzstd1)
  _fetch_unpacked arm64 "$1" "$PICONET_CACHE/hubrun-$1-arm64" libc6 libgcc-s1 libmosquitto1 "${ssl[@]}"
}

# board_qemu NAME: trixie's qemu-NAME (aarch64, arm), cached as above.
board_qemu() {
  local dir; dir=$(_fetch_unpacked amd64 trixie "$PICONET_CACHE/qemu-trixie" qemu-user) || return 1
  printf '%s/usr/bin/qemu-%s\n' "$dir" "$1"
}
aarch64_qemu() { board_qemu aarch64; }

# board_arch ARCH (aarch64, armv7, armv6): sets the names a board build for ARCH uses:
# BOARD_DEBARCH (Debian's), BOARD_TRIPLE (the Embedded stdlib's), BOARD_GNU (glibc's multiarch
# folder and clang's link target), BOARD_CFLAGS (clang flags for Swift and C alike), BOARD_LDFLAGS.
# Fails on others. 32-bit Pi OS is hard-float: eabi's default is soft-float, so the float ABI is
# named; VFPv2 is what every Pi core has (the ARM1176 of a Pi 1 / Zero has nothing newer). The
# none-eabi target compiles position-dependent code, which lld cannot put in a 32-bit ARM PIE
# (absolute relocations against local symbols): the 32-bit node links as a fixed-address binary.
# ARM's unwind index (.ARM.exidx, kept: the linker script drops only .eh_frame) names libgcc's
# personality routine; -static-libgcc takes it from libgcc_eh.a, so only libc is needed at run time.
board_arch() {
  case "$1" in
    aarch64) BOARD_DEBARCH=arm64 BOARD_TRIPLE=aarch64-none-none-elf BOARD_GNU=aarch64-linux-gnu
      BOARD_CFLAGS=() BOARD_LDFLAGS=() ;;
    armv7|armv6) BOARD_DEBARCH=armhf BOARD_TRIPLE=$1-none-none-eabi BOARD_GNU=arm-linux-gnueabihf
      BOARD_CFLAGS=(-mfloat-abi=hard -mfpu=vfp) BOARD_LDFLAGS=(-no-pie -static-libgcc) ;;
    *) return 1 ;;
  esac
}

# embedded_node_board ARCH: piconet-node for ARCH (board_arch); prints the unstripped binary.
embedded_node_board() {
  board_arch "$1" || { warn "no board build for '$1' (aarch64, armv7 or armv6)"; return 1; }
  local arch=$1 sysroot; sysroot=$(board_sysroot "$BOARD_DEBARCH") || return 1
  local scratch=${PICONET_EMBEDDED_SCRATCH:-$PICONET_ROOT/.build-embedded}-$arch
  local lib="$PICONET_SWIFT/lib/swift/embedded/$BOARD_TRIPLE"
  local clibs="$sysroot/usr/lib/$BOARD_GNU" gcc="$sysroot/usr/lib/gcc/$BOARD_GNU/12" f xcc=()
  for f in "${BOARD_CFLAGS[@]}"; do xcc+=(-Xcc "$f"); done
  # The none-elf target defines no OS: the sysroot's glibc headers need Linux's macros and
  # the multiarch include folder, which clang adds only for a *-linux-gnu target.
  PICONET_EMBEDDED=1 PICONET_EMBEDDED_LIB=$lib PICONET_EMBEDDED_CLIBS=$clibs \
    swift build -c release --package-path "$PICONET_ROOT" --scratch-path "$scratch" \
      --triple "$BOARD_TRIPLE" --target piconet-node -Xswiftc -Osize "${xcc[@]}" \
      -Xcc --sysroot="$sysroot" -Xcc -D__linux__ -Xcc -D__gnu_linux__ -Xcc -D__unix__ \
      -Xcc -isystem -Xcc "$sysroot/usr/include/$BOARD_GNU" -Xcc -isystem -Xcc "$sysroot/usr/include" >&2 \
    || return 1
  local objects="$scratch/$BOARD_TRIPLE/release" bin="$scratch/piconet-node-$arch"
  # SwiftPM names an executable's entry point MODULE_main (for @testable); main is defined here.
  "$PICONET_SWIFT/bin/clang" --target="$BOARD_GNU" --sysroot="$sysroot" -fuse-ld=lld "${BOARD_CFLAGS[@]}" "${BOARD_LDFLAGS[@]}" \
    "$objects"/*.build/*.o "$lib/libswiftUnicodeDataTables.a" "$clibs/libsodium.a" "$clibs/libgpiod.a" \
    -Wl,--defsym,main=piconet_node_main -Wl,--gc-sections -Wl,-z,pack-relative-relocs -Wl,--no-export-dynamic \
    -Wl,--no-eh-frame-hdr -Wl,-T,"$PICONET_ROOT/scripts/lib/discard-eh-frame.ld" -Wl,-Map,"$bin.map" \
    -B "$gcc" -L "$gcc" -o "$bin" >&2 || return 1
  printf '%s\n' "$bin"
}
embedded_node_aarch64() { embedded_node_board aarch64; }

# ---- The hub and the CLI for aarch64 (ordinary Swift: Foundation, NIO, GRDB) ----
# This toolchain (6.3.1) has no aarch64 Linux runtime, and it cannot import another compiler's
# binary .swiftmodule files (Foundation ships no .swiftinterface). So the cross build uses one
# Swift release end to end, Debian's swiftlang 6.2.3 (sid):
# - swift_chroot: a debootstrap'd sid amd64 root with swiftlang:amd64 (the compiler needs
#   glibc 2.42; this host is bookworm), cached in $PICONET_CACHE/chroot-sid-amd64-VERSION;
# - swiftlang_arm64: swiftlang:arm64 of the same version, unpacked: its static stdlib and
#   Foundation (usr/libexec/swift/lib/swift_static/linux) are the target's resources;
# - hub_sysroot_arm64: bookworm's arm64 libc, libstdc++, libsqlite3 (linked statically),
#   libsodium, libgpiod, BlueZ headers: linking against glibc 2.36 keeps the binaries to
#   symbols bookworm has; glibc238-shims.c defines the 2.38 ones Debian's runtime calls;
# - aarch64_swift_sdk: a Swift SDK bundle (swift-sdk.json + toolset.json) naming those,
#   used as `swift build --swift-sdks-path DIR --swift-sdk piconet-aarch64`.
# Cold: ~1 GB of downloads and ~3 GB unpacked; warm: nothing is fetched again while sid's
# swiftlang version stays (a new one is a new cache key).
PICONET_SWIFT_SDK_NAME=piconet-aarch64

# swiftlang_version: sid's current swiftlang version (from the private arm64 apt lists).
swiftlang_version() {
  local apt_dir="$PICONET_CACHE/apt-sid-arm64" opts
  # shellcheck disable=SC2207
  opts=($(_private_apt "$apt_dir" arm64 sid))
  [ -n "${_SWIFTLANG_VERSION:-}" ] || {
    apt-get "${opts[@]}" update >/dev/null 2>&1 || return 1
    _SWIFTLANG_VERSION=$(apt-cache "${opts[@]}" policy swiftlang | awk '/Candidate:/ {print $2}')
  }
  [ -n "$_SWIFTLANG_VERSION" ] && [ "$_SWIFTLANG_VERSION" != "(none)" ] || { warn "no swiftlang in sid (arm64)"; return 1; }
  printf '%s\n' "$_SWIFTLANG_VERSION"
}

swiftlang_arm64() {
  _fetch_unpacked arm64 sid "$PICONET_CACHE/swiftlang-sid-arm64" swiftlang libswiftlang
}

hub_sysroot_arm64() {
  _fetch_unpacked arm64 bookworm "$PICONET_CACHE/hubroot-bookworm-arm64" \
    libc6 libc6-dev libgcc-12-dev libgcc-s1 linux-libc-dev libstdc++-12-dev libstdc++6 \
    libsqlite3-dev libsqlite3-0 libsodium-dev libsodium23 libgpiod-dev libgpiod2 \
    libbluetooth-dev libbluetooth3 zlib1g zlib1g-dev libmosquitto-dev libmosquitto1 libssl3
}

# swift_chroot: prints the sid amd64 root with swiftlang (the version swiftlang_version names).
swift_chroot() {
  local version; version=$(swiftlang_version) || return 1
  local root="$PICONET_CACHE/chroot-sid-amd64-$version"
  if [ ! -f "$root/.complete" ]; then
    command -v debootstrap >/dev/null || { warn "debootstrap is missing (apt-get install debootstrap)"; return 1; }
    rm -rf "$root.tmp"
    debootstrap --variant=minbase --include=git,ca-certificates sid "$root.tmp" http://deb.debian.org/debian >&2 \
      || { warn "debootstrap of sid failed"; return 1; }
    chroot "$root.tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      "swiftlang=$version" "libswiftlang=$version" libc6-dev >&2 || { warn "installing swiftlang $version in the sid root failed"; return 1; }
    chroot "$root.tmp" apt-get clean
    rm -rf "$root"; mv "$root.tmp" "$root"; : >"$root/.complete"
  fi
  printf '%s\n' "$root"
}

# aarch64_swift_sdk: writes the Swift SDK bundle for the sid chroot's swift (paths as seen
# inside the chroot, which binds $PICONET_CACHE and the checkout at their own paths) and
# prints the folder to pass as --swift-sdks-path. Rewritten each call (cheap; it only names
# cached folders) and adjusts the sysroot (below).
aarch64_swift_sdk() {
  local sysroot swiftlang; sysroot=$(hub_sysroot_arm64) || return 1; swiftlang=$(swiftlang_arm64) || return 1
  # The SDK names the sysroot by one stable link, not its keyed folder: a package update (a new
  # key) then changes headers and libraries, which SwiftPM tracks, but not every compile command,
  # which would recompile the whole cached scratch (~30 min) for a path alone.
  ln -sfn "$sysroot" "$PICONET_CACHE/hubroot-bookworm-arm64.current"; sysroot=$PICONET_CACHE/hubroot-bookworm-arm64.current
  local dir="$PICONET_CACHE/swift-sdk-aarch64" lib="$sysroot/usr/lib/aarch64-linux-gnu"
  local bundle="$dir/$PICONET_SWIFT_SDK_NAME.artifactbundle" sdk
  sdk="$bundle/$PICONET_SWIFT_SDK_NAME"
  rm -rf "$bundle"; mkdir -p "$sdk/static"
  # clang searches the sysroot's library folders before any -L of ours, so the sysroot itself
  # is made to say what to link: the -dev links of libraries to take statically are removed
  # (the linker then finds only the .a), and links with an absolute target (bookworm's
  # libm.so -> /lib/...: out of the sysroot, so the linker took libm.a) are made relative.
  local l t
  for l in "$lib"/libsqlite3.so "$lib"/libsodium.so "$lib"/libgpiod.so "$lib"/libbluetooth.so \
           "$sysroot"/usr/lib/gcc/aarch64-linux-gnu/12/libstdc++.so; do rm -f "$l"; done
  for l in "$lib"/*.so; do
    [ -L "$l" ] && t=$(readlink "$l") && [ "${t#/}" != "$t" ] && ln -sfn "../../..$t" "$l"   # usr/lib/<triple>/ -> /
  done
  "$PICONET_SWIFT/bin/clang" --target=aarch64-linux-gnu --sysroot="$sysroot" -O2 -fPIC -c \
    "$PICONET_ROOT/scripts/lib/glibc238-shims.c" -o "$sdk/static/glibc238-shims.o" >&2 || return 1
  local res="$swiftlang/usr/libexec/swift/lib"
  # Swift's driver takes swiftrt.o and the static-stdlib link arguments from the SDK root's
  # usr/lib/swift_static whatever the JSON says: link Debian's resources in there.
  ln -sfn "$res/swift_static" "$sysroot/usr/lib/swift_static"; ln -sfn "$res/swift" "$sysroot/usr/lib/swift"
  cat >"$bundle/info.json" <<JSON
{"schemaVersion": "1.0", "artifacts": {"$PICONET_SWIFT_SDK_NAME": {"type": "swiftSDK", "version": "1",
  "variants": [{"path": "$PICONET_SWIFT_SDK_NAME"}]}}}
JSON
  cat >"$sdk/swift-sdk.json" <<JSON
{"schemaVersion": "4.0", "targetTriples": {"aarch64-unknown-linux-gnu": {
  "sdkRootPath": "$sysroot", "swiftResourcesPath": "$res/swift", "swiftStaticResourcesPath": "$res/swift_static",
  "toolsetPaths": ["toolset.json"]}}}
JSON
  cat >"$sdk/toolset.json" <<JSON
{"schemaVersion": "1.0", "swiftCompiler": {"extraCLIOptions": ["-use-ld=lld",
  "-Xlinker", "$sdk/static/glibc238-shims.o"]}}
JSON
  printf '%s\n' "$dir"
}

# in_swift_chroot COMMAND...: runs COMMAND in the sid root, in its own mount namespace (the
# binds vanish with it: nothing stays mounted), with /proc, /dev, the checkout, the package
# mirror and the cache bound at their own paths, the checkout also at /piconet-src (one path for
# every clone, so the cached scratch's build records match a fresh clone's and only what changed
# is compiled again), and git's GitHub rewrite to /opt/swift-packages.
in_swift_chroot() {
  local root; root=$(swift_chroot) || return 1
  local pkgs=${PICONET_SWIFT_PACKAGES:-/opt/swift-packages}
  # shellcheck disable=SC2016
  unshare -m --propagation private sh -ec '
    root=$1 pkgs=$2 checkout=$3 cache=$4; shift 4
    mount -t proc proc "$root/proc"; mount --rbind /dev "$root/dev"
    for d in "$checkout" "$pkgs" "$cache"; do mkdir -p "$root$d"; mount --bind "$d" "$root$d"; done
    mkdir -p "$root/piconet-src"; mount --bind "$checkout" "$root/piconet-src"
    exec chroot "$root" env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
      GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_0="url.$pkgs/.insteadOf" GIT_CONFIG_VALUE_0=https://github.com/ \
      GIT_CONFIG_KEY_1=safe.directory GIT_CONFIG_VALUE_1="*" "$@"
  ' sh "$root" "$pkgs" "$PICONET_ROOT" "$PICONET_CACHE" "$@"
}

# hub_cli_aarch64 PRODUCT...: builds PRODUCTs (piconet-hub, piconet) for aarch64 in release with
# the static stdlib; prints the bin folder (unstripped). Scratch: $PICONET_AARCH64_SCRATCH, by
# default in the cache, keyed by the swiftlang version, so that a fresh clone (CI) finds the
# dependencies (NIO, Hummingbird, GRDB: most of the ~15 min) compiled; one build at a time (flock).
hub_cli_aarch64() {
  local sdks version; sdks=$(aarch64_swift_sdk) || return 1; version=$(swiftlang_version) || return 1
  local scratch=${PICONET_AARCH64_SCRATCH:-$PICONET_CACHE/build-aarch64-$version} p args
  args=(-c release --static-swift-stdlib --package-path /piconet-src --scratch-path "$scratch"
        --swift-sdks-path "$sdks" --swift-sdk "$PICONET_SWIFT_SDK_NAME")
  mkdir -p "$scratch"
  (
    flock 9
    for p in "$@"; do
      in_swift_chroot swift build "${args[@]}" --product "$p" >&2 || exit 1
    done
    in_swift_chroot swift build "${args[@]}" --show-bin-path
  ) 9>"$scratch/.piconet-lock"
}
