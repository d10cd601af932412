#!/usr/bin/env bash
# Provision an Ubuntu 24.04 machine (the Vagrant VM, or a plain host with sudo) for mn-harness:
#   - Mininet, iperf3, ethtool, tcpdump, iproute2
#   - BMv2 (simple_switch_grpc, simple_switch_CLI), PI and p4c from the p4lang packages of the
#     openSUSE Build Service (p4lang-bmv2 p4lang-pi p4lang-p4c)
#   - clang, llvm, libbpf-dev, bpftool (BPF struct_ops congestion controls)
#   - a Python venv with --system-site-packages (so BMv2's Python runtime modules and Mininet
#     are importable) and `pip install -e '.[test]'` of the project
#
# Usage (from the project directory):  sudo scripts/provision-ubuntu.sh
# Environment: PROJECT_DIR (default: the directory above this script), VENV_DIR (default:
# $PROJECT_DIR/.venv), PROJECT_USER (owner of the venv; default: $SUDO_USER or root).
# Safe to run again: every step checks what is already there.
set -euo pipefail

if [[ $EUID -ne 0 ]]; then
    exec sudo -E "$0" "$@"
fi

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT_DIR="${PROJECT_DIR:-$(dirname "$SCRIPT_DIR")}"
VENV_DIR="${VENV_DIR:-$PROJECT_DIR/.venv}"
PROJECT_USER="${PROJECT_USER:-${SUDO_USER:-root}}"
export DEBIAN_FRONTEND=noninteractive

log() { printf '\n=== %s\n' "$*"; }

# shellcheck disable=SC1091
source /etc/os-release
if [[ "${ID:-}" != "ubuntu" ]]; then
    echo "provision-ubuntu.sh: this is ${PRETTY_NAME:-an unknown system}, not Ubuntu;" \
         "the p4lang packages are published per Ubuntu release" >&2
    exit 1
fi
if [[ "${VERSION_ID:-}" != "24.04" ]]; then
    echo "provision-ubuntu.sh: written for Ubuntu 24.04, found ${VERSION_ID:-?}; continuing" >&2
fi

log "Base packages"
apt-get update -q
apt-get install -y -q --no-install-recommends \
    ca-certificates curl gnupg git build-essential pkg-config \
    python3 python3-venv python3-dev python3-pip \
    iproute2 iputils-ping ethtool tcpdump iperf3 net-tools psmisc \
    mininet openvswitch-switch

log "BPF toolchain"
apt-get install -y -q --no-install-recommends clang llvm libbpf-dev
if ! command -v bpftool >/dev/null 2>&1; then
    # Ubuntu ships bpftool in linux-tools; a standalone package exists on some releases.
    apt-get install -y -q bpftool 2>/dev/null \
        || apt-get install -y -q linux-tools-common linux-tools-generic "linux-tools-$(uname -r)" \
        || echo "WARNING: bpftool not installed (no linux-tools for kernel $(uname -r))" >&2
fi

log "p4lang packages (BMv2, PI, p4c) from the openSUSE Build Service"
P4LANG_REPO="https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_${VERSION_ID}/"
P4LANG_KEY="/etc/apt/trusted.gpg.d/home_p4lang.gpg"
if [[ ! -s "$P4LANG_KEY" ]]; then
    curl -fsSL "${P4LANG_REPO}Release.key" | gpg --dearmor > "$P4LANG_KEY.tmp"
    mv "$P4LANG_KEY.tmp" "$P4LANG_KEY"
fi
echo "deb ${P4LANG_REPO} /" > /etc/apt/sources.list.d/home:p4lang.list
apt-get update -q
apt-get install -y -q p4lang-pi p4lang-bmv2 p4lang-p4c
for tool in simple_switch_grpc simple_switch_CLI p4c-bm2-ss; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "provision-ubuntu.sh: $tool missing after installing the p4lang packages" >&2
        exit 1
    fi
done

log "Mininet service"
systemctl enable --now openvswitch-switch >/dev/null 2>&1 || true

log "Python venv at $VENV_DIR"
mkdir -p "$(dirname "$VENV_DIR")"
if [[ ! -x "$VENV_DIR/bin/python" ]]; then
    python3 -m venv --system-site-packages "$VENV_DIR"
fi
"$VENV_DIR/bin/pip" install -q --upgrade pip
(cd "$PROJECT_DIR" && "$VENV_DIR/bin/pip" install -q -e '.[test]')
if [[ "$PROJECT_USER" != "root" ]]; then
    chown -R "$PROJECT_USER:" "$VENV_DIR"
fi
"$VENV_DIR/bin/python" - <<'PY'
from p4.v1 import p4runtime_pb2  # noqa: F401  (the protobuf pairing the project pins)
from mn_harness.p4.toolchain import find_toolchain
tc = find_toolchain()
print("toolchain:", tc.paths if tc.complete else tc.missing_reason())
PY

log "Done"
cat <<MSG
Run the tests (root is needed for namespaces, tc and BPF):
    cd $PROJECT_DIR && sudo $VENV_DIR/bin/pytest -q
MSG
