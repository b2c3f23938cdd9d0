# Shell functions the VM scripts share (sourced by setup-host.sh and arm64-vm.sh; no side effects).

# debian_mirror [APT_ETC]: prints the Debian mirror the host's apt sources already name
# (deb822 `URIs:` lines or one-line `deb` entries; the first URL ending in /debian), or nothing.
# APT_ETC (default /etc/apt) is only there so the function can be tried on a fake tree.
# The VM scripts download the kernel from it with a private apt config, so they ask no mirror
# the host does not already use.
debian_mirror() {
  local etc=${1:-/etc/apt}
  { grep -hE '^URIs:' "$etc"/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' || true
    grep -hE '^deb ' "$etc"/sources.list "$etc"/sources.list.d/*.list 2>/dev/null \
      | awk '{for(i=2;i<=NF;i++) if($i ~ /^[a-z]+:\/\//){print $i; break}}' || true; } \
    | grep -E '/debian/?$' | head -n1 || true
}

# prune_other_versions DIR KEEP PATTERN: removes DIR's entries whose name matches the shell
# PATTERN (e.g. '*-arm64', one kernel version each) other than KEEP, printing each name it
# removes. A cache keyed by version otherwise keeps every kernel it ever downloaded (hundreds
# of MB each); call it once KEEP is complete, so a failed download leaves the old one usable.
# Entries not matching PATTERN (apt state, the lock file) are left alone.
prune_other_versions() {
  local dir=$1 keep=$2 pattern=$3 e name
  [ -n "$dir" ] && [ -n "$keep" ] && [ -n "$pattern" ] || { echo "prune_other_versions: DIR KEEP PATTERN" >&2; return 2; }
  for e in "$dir"/$pattern; do
    [ -e "$e" ] || continue
    name=${e##*/}
    [ "$name" = "$keep" ] && continue
    rm -rf -- "$e" && echo "removed the cache of $name (now $keep)"
  done
}
