#!/usr/bin/env bash
# Install what mn-harness needs on a fresh Debian 12 / Ubuntu 22.04+ machine, then make .venv.
# Idempotent and quick when nothing is missing: `make demo` and `make test` call it every time.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "mn-harness setup: needs root (apt, network namespaces, BPF): run it with sudo" >&2
  exit 2
fi

packages=(mininet iperf3 bridge-utils iproute2 iputils-ping ethtool procps psmisc kmod make
          clang llvm libbpf-dev python3-venv python3-dev python3-pip)
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

# Mininet is installed into the distribution's python3, so the venv must see system packages
# and be made by that same interpreter.
# EXTRAS: optional extras besides test, comma separated (e.g. EXTRAS=torch: `make test EXTRAS=torch`).
extras="test${EXTRAS:+,$EXTRAS}"
stamp=".venv/.installed-$( (cat pyproject.toml; echo "$extras") | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import mininet.net' 2>/dev/null; then
    rm -rf .venv
    /usr/bin/python3 -m venv --system-site-packages .venv
  fi
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e ".[$extras]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
