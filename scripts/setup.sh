#!/usr/bin/env bash
# Install what mn-harness needs on a fresh Debian 12 / Ubuntu 22.04+ machine, make .venv, and
# put the `mn-harness` launcher into /usr/local/bin (so `sudo mn-harness ...` works under sudo's
# secure_path, which does not include .venv/bin).
# Idempotent and quick when nothing is missing: `make demo` and `make test` call it every time.
#   scripts/setup.sh               install (needs root)
#   scripts/setup.sh --uninstall   remove the launcher this checkout installed (`make uninstall`)
# MN_HARNESS_BIN_DIR: where the launcher goes (default /usr/local/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
checkout="$(pwd -P)"
bin_dir="${MN_HARNESS_BIN_DIR:-/usr/local/bin}"
launcher="$bin_dir/mn-harness"
marker="# mn-harness launcher"

# The launcher is ours when it carries the marker; it is this checkout's when it runs our venv.
launcher_target() { sed -n 's/^exec "\(.*\)" "\$@"$/\1/p' "$launcher" 2>/dev/null || true; }
ours() { [ -f "$launcher" ] && grep -q "^$marker" "$launcher"; }

if [ "${1:-}" = "--uninstall" ]; then
  if ours && [ "$(launcher_target)" = "$checkout/.venv/bin/mn-harness" ]; then
    rm -f "$launcher"
    echo "uninstall: removed $launcher (the venv stays: rm -rf .venv to remove it too)"
  elif [ -e "$launcher" ]; then
    echo "uninstall: $launcher is not this checkout's launcher; left as is"
  else
    echo "uninstall: no launcher at $launcher"
  fi
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "mn-harness setup: needs root (apt, network namespaces, BPF): run it with sudo" >&2
  exit 2
fi

packages=(mininet iperf3 bridge-utils iproute2 iputils-ping ethtool procps psmisc kmod make tcpdump
          clang llvm libbpf-dev python3-venv python3-dev python3-pip openssh-client)
# bpftool: its own package on Debian 12 and Ubuntu >= 24.04, part of linux-tools on older Ubuntu
if apt-cache show bpftool >/dev/null 2>&1; then packages+=(bpftool); else packages+=(linux-tools-common "linux-tools-$(uname -r)"); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# apt-cache may know nothing before the first update on a fresh machine
command -v bpftool >/dev/null || { apt-get update -qq && apt-get install -y -qq bpftool >/dev/null; }

# CLUSTER=1: sshd for the cluster tests' servers, which run it in namespaces of their own, and
# GNU parallel for the test of the rounds over ssh (docs/cluster.md#tests). sshd is installed
# without starting it, and, where we installed it, not enabled at boot either: this machine gets
# no ssh service it did not have.
if [ "${CLUSTER:-}" = 1 ]; then
  cluster_packages=()
  command -v parallel >/dev/null || cluster_packages+=(parallel)
  if ! dpkg-query -W -f='${Status}' openssh-server 2>/dev/null | grep -q "install ok installed"; then
    cluster_packages+=(openssh-server)
  fi
  if [ -n "${cluster_packages[*]:-}" ]; then
    echo "setup: installing ${cluster_packages[*]} (CLUSTER=1; sshd not started, not enabled)"
    apt-cache show openssh-server >/dev/null 2>&1 || apt-get update -qq
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod 755 "$policy"; made_policy=1; fi
    rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${cluster_packages[@]}" >/dev/null || rc=$?
    if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi
    [ "$rc" = 0 ] || exit "$rc"
    if command -v systemctl >/dev/null 2>&1; then systemctl disable ssh.service ssh.socket >/dev/null 2>&1 || true; fi
  fi
fi

# Mininet is installed into the distribution's python3, so the venv must see system packages
# and be made by that same interpreter.
# EXTRAS: optional extras besides test and analysis, comma separated (EXTRAS=torch:
# `make test EXTRAS=torch`).
extras="test,analysis${EXTRAS:+,$EXTRAS}"
stamp=".venv/.installed-$( (cat pyproject.toml; echo "$extras") | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import mininet.net' 2>/dev/null; then
    rm -rf .venv
    /usr/bin/python3 -m venv --system-site-packages .venv
  fi
  # setuptools >= 77 reads the SPDX license string; tests build the wheel without isolation, so
  # the venv needs it itself (Ubuntu 22.04's python3-setuptools is 59)
  .venv/bin/pip install -q --upgrade pip 'setuptools>=77' >/dev/null
  # test: the test tools; analysis: pandas for mn_harness.results.load() (its tests run here);
  # EXTRAS adds more (torch: the real-framework tests)
  .venv/bin/pip install -q -e ".[$extras]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi

# The launcher: installed when there is none, replaced when it is an mn-harness launcher whose
# venv is gone; a launcher of another checkout (or another program) is left alone.
want="$checkout/.venv/bin/mn-harness"
if ! ours || [ "$(launcher_target)" != "$want" ]; then
  current="$(launcher_target)"
  if [ -e "$launcher" ] && ! ours; then
    echo "setup: $launcher exists and is not an mn-harness launcher; left as is (use $want)"
  elif ours && [ -x "$current" ] && [ "${MN_HARNESS_LAUNCHER:-}" != "replace" ]; then
    echo "setup: $launcher runs $current (another checkout); left as is (MN_HARNESS_LAUNCHER=replace to change)"
  else
    mkdir -p "$bin_dir"
    tmp="$(mktemp "$bin_dir/.mn-harness.XXXXXX")"
    printf '#!/bin/sh\n%s installed by %s/scripts/setup.sh; `make uninstall` removes it.\n# sudo keeps /usr/local/bin on its secure_path, not the venv: this runs the venv'"'"'s mn-harness.\nexec "%s" "$@"\n' \
      "$marker" "$checkout" "$want" > "$tmp"
    chmod 755 "$tmp"
    mv -f "$tmp" "$launcher"
    echo "setup: installed $launcher -> $want"
  fi
fi
