# Shared helpers for Piconet's scripts. Source it: . "$(dirname "$0")/lib/common.sh"
set -euo pipefail
PICONET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
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
  mosquitto libmosquitto-dev libcoap3-dev  # bench.d/80-mqtt, 81-coap: broker and C clients
  chromium sqlite3         # the main-job stage: browser test of the live page, history checks
)
