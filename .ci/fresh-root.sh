#!/usr/bin/env bash
# A fresh minimal Debian 12 root on this machine, to run the README's commands as a new user
# would: debootstrap (minbase), the host's package-client settings copied in (mirrors, proxies,
# CA certificates: what a machine behind the same network needs to reach the same registries),
# the kernel file systems bound, the checkout's committed HEAD cloned to /root/project inside a
# 0700 /root, as on a real fresh machine.
#   .ci/fresh-root.sh up [DIR]        make the root (about a minute); prints nothing else on success
#   .ci/fresh-root.sh run DIR 'CMD'   CMD as root inside, in a mount namespace whose root is DIR
#                                     (pivot_root, so Mininet's `mnexec -a` sees the new root)
#   .ci/fresh-root.sh down DIR        stop what still runs inside, unmount, delete
# It shares this machine's kernel (namespaces, BPF, sysctls): only the user space is fresh.
# Needs root; installs debootstrap when it is missing.
set -euo pipefail

usage() { sed -n 2,13p "$0" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "fresh-root: needs root" >&2; exit 2; }

mirror() {
  local m
  m=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$m" ] || m=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/debian}"
}

down() {
  local root=$1
  [ -d "$root" ] || return 0
  # processes whose root is inside (a test left running after a timeout)
  for link in /proc/[0-9]*/root; do
    [ "$(readlink "$link" 2>/dev/null)" = "$root" ] && kill -9 "${link//[^0-9]/}" 2>/dev/null || true
  done
  findmnt -rn -o TARGET | grep -F "$root" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
}

case "${1:-}" in
up)
  root=${2:-$(mktemp -d /var/tmp/fresh-root.XXXXXX)}
  trap 'down "$root"' ERR
  chmod 755 "$root"  # it becomes /: mktemp made it private
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  src=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
  log=$(mktemp /tmp/fresh-root-debootstrap.XXXXXX.log)
  debootstrap --variant=minbase bookworm "$root" "$(mirror)" >"$log" 2>&1 \
    || { echo "fresh-root: debootstrap failed, see $log" >&2; exit 1; }
  rm -f "$log"
  cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/" 2>/dev/null || true
  [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$root/etc/apt/"
  cp /etc/apt/apt.conf.d/*proxy* /etc/apt/apt.conf.d/99* "$root/etc/apt/apt.conf.d/" 2>/dev/null || true
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/"
  [ -d /etc/xdg/pip ] && mkdir -p "$root/etc/xdg" && cp -r /etc/xdg/pip "$root/etc/xdg/"
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$root/etc/hosts"
  mount --bind "$root" "$root"
  for d in proc sys dev dev/pts dev/shm run tmp; do mkdir -p "$root/$d"; done
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --bind /dev "$root/dev"
  mount --bind /dev/pts "$root/dev/pts"
  for d in dev/shm run tmp; do mount -t tmpfs tmpfs "$root/$d"; done
  chmod 1777 "$root/tmp" "$root/dev/shm"
  "$0" run "$root" 'apt-get install -y -qq ca-certificates >/dev/null && update-ca-certificates >/dev/null'
  chmod 700 "$root/root"
  git clone -q "$src" "$root/root/project"
  echo "$root"
  ;;
run)
  [ $# -eq 3 ] || usage
  root=$(realpath "$2")
  # env -i: nothing of this machine's environment leaks in (no P4_TOOLCHAIN, no CI settings)
  exec env -i --default-signal=INT HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    /usr/bin/unshare --mount --propagation private -- /bin/bash -c '
      set -e; cd "$2"; mkdir -p .oldroot; /usr/sbin/pivot_root . .oldroot; cd /
      umount -l /.oldroot; rmdir /.oldroot
      exec chroot / /bin/bash -lc "$1"' _ "$3" "$root"
  ;;
down)
  [ $# -eq 2 ] || usage
  down "$(realpath "$2")"
  ;;
*) usage ;;
esac
