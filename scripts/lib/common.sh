# Shared helpers for Piconet's scripts. Source it: . "$(dirname "$0")/lib/common.sh"
set -euo pipefail
PICONET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
PICONET_STARTED=$(date +%s)   # when the script began (swiftpm_leftovers)
say()  { printf '%s\n' "$*"; }
warn() { printf '%s\n' "$*" >&2; }
die()  { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; exit 2; }
is_root() { [ "$(id -u)" = 0 ]; }
# Debian packages the build, the tests and the demo need. Later stages add theirs here.
PICONET_APT_PACKAGES=(
  pkg-config libbluetooth-dev libgpiod-dev gpiod libsqlite3-dev libsodium-dev
  iproute2 nftables procps psmisc curl python3 python3-venv
  mtools dosfstools fdisk e2fsprogs jq openssh-server openssh-client shellcheck sudo systemd systemd-container  # flash-sd, provision, their stage (sudo path, systemd-analyze, nspawn board)
  gcc libc6-dev            # scripts/bench compiles its C baseline
  mosquitto mosquitto-clients libmosquitto-dev libcoap3-dev  # the hub's --mqtt (libmosquitto), its stage (broker, mosquitto_sub), bench.d/80-mqtt, 81-coap
  chromium sqlite3         # the main-job stage: browser test of the live page, history checks
  debootstrap              # stage 72-arm64: the sid root with Debian's swiftlang for the aarch64 hub and CLI
  minisign                 # release signatures: the netns-update stage signs builds as a release manager does
  rsync                    # bench.d/85-resources: rsync over ssh beside piconet send --file
  qemu-user-static         # stage 73-armhf: the armv7 node under qemu-arm-static -cpu cortex-a7
  tmux                     # stage 29-netns-appsvc: `piconet pick` in a real terminal (send-keys, capture-pane)
  help2man lintian         # build-release --deb (man pages from --help) and stage 74-packages (lintian)
)
# cannot_run REASON: this stage cannot run here (not root, no namespaces, too little memory, a
# tool or PyPI missing): the one place a stage decides to skip. On a developer machine that is a
# visible skip (exit 77, which scripts/test counts as a skipped stage); with CI=true, where every
# stage must run, it is a failure naming what is missing.
cannot_run() {
  local stage; stage=$(basename "$0"); stage=${stage#[0-9][0-9]-}
  if [ "${CI:-}" = true ]; then
    say "FAIL $stage cannot run in CI: $1"
    say "$stage: 0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  say "$stage: skipped: $1"
  exit 77
}
# cannot_check NAME REASON: one check of a stage cannot run here: a visible skip on a developer
# machine, a failure with CI=true. It counts in the caller's own $skipped or $failed.
cannot_check() {
  if [ "${CI:-}" = true ]; then failed=$((failed + 1)); say "FAIL $1: cannot run in CI: $2"
  else skipped=$((skipped + 1)); say "skip $1: $2"; fi
}
# swift_testing_counts LOG: "PASSED FAILED SKIPPED" from a `swift test` log (Swift Testing's
# console output), or nothing when the log has no run summary. The total is the summary's
# "Test run with N tests" (tests that ran or were skipped); the skipped and failed are its
# result lines ("Test NAME skipped." / skipped: "why" / was cancelled after …, and
# "Test NAME [with K test cases] failed after D seconds …"). The symbol that starts each line
# (U+279C, U+2718…) is matched as any run of non-blanks and grep reads bytes (LC_ALL=C), so a
# POSIX locale and a UTF-8 one count the same.
swift_testing_counts() {
  local n s f
  n=$(LC_ALL=C grep -aE '^[^ ]+ Test run with [0-9]+ tests? in [0-9]+ suites? (passed|failed) after' "$1" | tail -n1 |
      LC_ALL=C sed -E 's/^[^ ]+ Test run with ([0-9]+) tests? .*/\1/')
  [ -n "$n" ] || return 0
  s=$(LC_ALL=C grep -aE '^[^ ]+ Test .+ (skipped(\.|: ".*")|was cancelled after [0-9.]+ seconds.*)$' "$1" |
      LC_ALL=C grep -acvE '^[^ ]+ Test (run with|case passing) ' || true)
  f=$(LC_ALL=C grep -aE '^[^ ]+ Test .+ failed after [0-9.]+ seconds( with .*)?\.$' "$1" |
      LC_ALL=C grep -acvE '^[^ ]+ Test (run with|case passing) ' || true)
  echo "$((n - s - f)) $f $s"
}
# usage_error WHAT [FIX]: the one-line usage error of every Piconet command (STYLE.md):
# "NAME: error: WHAT (FIX)" on stderr, exit 64 (EX_USAGE).
usage_error() {
  local fix=${2:+ ($2)}
  printf '%s: error: %s%s\n' "$(basename "$0")" "$1" "$fix" >&2
  exit 64
}
# edit_distance A B: Levenshtein distance (for "did you mean").
edit_distance() {
  local a=$1 b=$2 i j cost la=${#1} lb=${#2}
  local -a prev cur
  for ((j = 0; j <= lb; j++)); do prev[j]=$j; done
  for ((i = 1; i <= la; i++)); do
    cur=([0]=$i)
    for ((j = 1; j <= lb; j++)); do
      [ "${a:i-1:1}" = "${b:j-1:1}" ] && cost=0 || cost=1
      local d=$((prev[j] + 1)) ins=$((cur[j - 1] + 1)) sub=$((prev[j - 1] + cost))
      ((ins < d)) && d=$ins; ((sub < d)) && d=$sub
      cur[j]=$d
    done
    prev=("${cur[@]}")
  done
  echo "${prev[lb]}"
}
# did_you_mean WORD CANDIDATE...: prints the closest candidate within distance 3 (or nothing).
did_you_mean() {
  local word=$1 best="" bestd=4 c d; shift
  for c in "$@"; do
    d=$(edit_distance "$word" "$c")
    if ((d < bestd)); then best=$c; bestd=$d; fi
  done
  [ -n "$best" ] && printf '%s' "$best"
  return 0
}
# need_value FLAG NEXT-ARG-COUNT VALUE: a flag given without its value is a usage error.
need_value() { [ "$2" -ge 2 ] && [ -n "$3" ] && [ "${3#--}" = "$3" ] || usage_error "$1 needs a value" "see --help"; }

# netns_end NS...: ends every process still inside these namespaces (TERM, KILL after 3 s),
# before they are deleted. A program started as `some_function ... &` is not $! (that is the
# subshell), and `ip netns del` does not stop what runs inside: this catches both.
netns_end() {
  local ns left
  for ns in "$@"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; done
  for _ in $(seq 30); do
    left=""
    for ns in "$@"; do left+=$(ip netns pids "$ns" 2>/dev/null || true); done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  for ns in "$@"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
}

# embedded_node: builds piconet-node in Embedded Swift (PICONET_EMBEDDED=1: no Swift runtime,
# what a board runs) and prints the binary's path; build output goes to stderr. Every stage
# that runs the node uses this, so the tests run the form that ships. $PICONET_NODE_BIN, if
# set, is used instead (no build). Scratch: $PICONET_EMBEDDED_SCRATCH (default .build-embedded).
# Cost: a warm rebuild is seconds; a cold one about 5 minutes of two cores here (whole-module,
# -Osize, every module of the node), once per checkout, shared by all stages.
embedded_node() {
  if [ -n "${PICONET_NODE_BIN:-}" ]; then printf '%s\n' "$PICONET_NODE_BIN"; return 0; fi
  local scratch=${PICONET_EMBEDDED_SCRATCH:-$PICONET_ROOT/.build-embedded}
  # The linker map ($scratch/piconet-node.map) is what scripts/bench.d/67-node-embedded breaks
  # the binary's size down by (one file, rewritten by each link; no effect on the binary).
  # -Osize, and the functions an idle node runs linked first, together
  # (scripts/lib/node-hot-symbols.txt, from a callgrind run: scripts/lib/callgrind-hot-symbols.py).
  # The kernel maps a binary's pages in 64 KiB windows around each page a process touches, and
  # start-up touches code everywhere: unordered, the whole 1.4 MiB of code is resident in an
  # idle node; ordered, about 0.85 MiB (read from storage as on a board), which is what keeps the
  # idle node well inside its 3 MiB budget.
  local args=(-c release --package-path "$PICONET_ROOT" --scratch-path "$scratch" -Xswiftc -Osize
              -Xlinker "--symbol-ordering-file=$PICONET_ROOT/scripts/lib/node-hot-symbols.txt"
              -Xlinker --no-warn-symbol-ordering -Xlinker "-Map=$scratch/piconet-node.map")
  # SwiftPM does not know the ordering file is an input of the link: a newer list relinks.
  local linked="$scratch/$(uname -m)-unknown-linux-gnu/release/piconet-node"
  [ "$PICONET_ROOT/scripts/lib/node-hot-symbols.txt" -nt "$linked" ] && rm -f "$linked"
  PICONET_EMBEDDED=1 swift build "${args[@]}" --product piconet-node >&2 || return 1
  printf '%s/piconet-node\n' "$(PICONET_EMBEDDED=1 swift build "${args[@]}" --show-bin-path)"
}

# release_variant SRC OUT OLD NEW: the node binary SRC reporting version NEW instead of OLD, the
# update stages' stand-in for a newer build (another Embedded build per run would cost minutes).
# Every copy of the string changes (constant folding makes several); the same length keeps every
# offset. Fails when OLD is not in SRC or the lengths differ.
release_variant() {
  python3 - "$@" <<'PY'
import sys
src, out, old, new = sys.argv[1:]
data = open(src, 'rb').read()
if data.count(old.encode()) < 1 or len(old) != len(new):
    sys.exit(f"release_variant: '{old}' not in {src}, or not as long as '{new}'")
open(out, 'wb').write(data.replace(old.encode(), new.encode()))
PY
  chmod 755 "$2"
}

# crashing_build OUT: a program that crashes at start (SIGSEGV): the update stages' bad release.
crashing_build() {
  printf 'int main(void) { volatile int *p = 0; return *p; }\n' >"$1.c" && cc -O0 -o "$1" "$1.c" && rm -f "$1.c"
}

# fixed_src CACHE: SwiftPM's scratch holds absolute paths (a scratch reached through a symlink or
# moved breaks clang's module cache), so a scratch outside the checkout is only warm for a new
# clone if every clone is built from ONE path. Sets FIXED_BASE (a folder in CACHE keyed by the
# Swift version, for the scratch folders) and defines in_src CMD...: runs CMD in a private mount
# namespace where the checkout is bound at CACHE/src (an empty folder; the bind vanishes with the
# namespace), cwd there; with FIXED_BUILD set, that folder is bound at the checkout's .build too
# (scripts/test). A fresh clone then finds the dependencies (swift-nio, GRDB,
# Hummingbird: most of a cold build) compiled. Without mount namespaces (not root) in_src runs
# CMD as it is and FIXED_BASE is keyed by the checkout's own path too (cold once per path).
fixed_src() {
  local cache=$1 version
  version=$(swift --version 2>/dev/null | head -n1)
  mkdir -p "$cache/src"
  FIXED_SRC=$cache/src
  if unshare -m --propagation private true 2>/dev/null; then
    FIXED_BASE=$cache/fixed-$(sha256sum <<<"$version" | cut -c1-12)
    in_src() {
      unshare -m --propagation private sh -ec \
        'mount --bind "$1" "$2"; [ -z "$3" ] || mount --bind "$3" "$2/.build"; cd "$2"; shift 3; exec "$@"' \
        sh "$PICONET_ROOT" "$FIXED_SRC" "${FIXED_BUILD:-}" "$@"
    }
  else
    FIXED_BASE=$cache/$( (echo "$PICONET_ROOT"; echo "$version") | sha256sum | cut -c1-12)
    in_src() { (cd "$PICONET_ROOT" && exec "$@"); }
  fi
  mkdir -p "$FIXED_BASE"
}

# fresh_modules SCRATCH: before a build into a scratch that may last have built other sources
# (another clone, another commit), removes Piconet's own compiled modules there when the sources
# (Sources/, Tests/, Package.swift: their content) differ from that last build's, so they are
# compiled whole again: an incremental build can leave a module compiled against another's old
# layout after a change of private stored properties (swiftlang/swift#89636; README, "Layout and
# layers"). The dependencies stay. sources_built SCRATCH records the sources after a good build.
sources_stamp() { (cd "$PICONET_ROOT" && find Sources Tests Package.swift -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16); }
fresh_modules() {
  local scratch=$1
  [ "$(cat "$scratch/piconet-sources" 2>/dev/null)" = "$(sources_stamp)" ] && return 0
  # With them goes SwiftPM's build plan (the llbuild manifest and description.json), which names
  # files inside those folders: kept, a build that sees no change to plan reads them and fails.
  rm -rf "$scratch"/*/debug/Piconet*.build "$scratch"/*/debug/piconet*.build \
         "$scratch"/*/release/Piconet*.build "$scratch"/*/release/piconet*.build "$scratch/piconet-sources" \
         "$scratch"/debug.yaml "$scratch"/release.yaml "$scratch"/*/debug/description.json "$scratch"/*/release/description.json
}
sources_built() { sources_stamp >"$1/piconet-sources"; }

# swiftpm_leftovers: SwiftPM (6.3) leaves an empty TemporaryDirectory.XXXXXX (a lone
# .keep-directory file) in TMPDIR after every command, even --show-bin-path: 384 from one CI run.
# The scripts that run SwiftPM (test, bench, fuzz, demo) call this when they exit: it removes
# those made since the script started (PICONET_STARTED) that still hold nothing else. SwiftPM's
# lock files (one per build folder) and the compiler's swift-generated-sources (one file per macro
# expansion) stay: fixed names, reused by every build, so they do not pile up; and the locks are
# what keep two builds out of one folder.
swiftpm_leftovers() {
  local since=$(( PICONET_STARTED - 1 )) d
  find "${TMPDIR:-/tmp}" -maxdepth 1 -type d -name 'TemporaryDirectory.*' -newermt "@$since" 2>/dev/null |
    while IFS= read -r d; do
      if [ "$(ls -A "$d" 2>/dev/null)" = .keep-directory ]; then rm -rf -- "$d"; fi
    done
  return 0
}
