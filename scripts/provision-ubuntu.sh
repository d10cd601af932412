#!/usr/bin/env bash
# Provision an Ubuntu machine (the Vagrant VM: Ubuntu 22.04, or a plain host with sudo) for
# mn-harness, and end with the test summary:
#   1. BMv2 (simple_switch_grpc, simple_switch_CLI), PI and p4c from the p4lang packages of the
#      openSUSE Build Service where they exist for this release: only Ubuntu 22.04 (amd64) has
#      current ones (project home:p4lang:latest, then the older home:p4lang). Elsewhere (24.04
#      has no p4lang-bmv2 package) or if the packages fail, scripts/install-p4-toolchain.sh
#      builds them from source into /opt/p4local (~40 min on 2 cores); P4_SOURCE_BUILD=0 skips
#      that and provisioning goes on without BMv2 (the BMv2 tests then skip with the reason). A
#      toolchain already found (P4_TOOLCHAIN=<prefix>, /opt/p4local, /usr/local, /usr, PATH) is
#      used as it is.
#   2. scripts/setup.sh: Mininet, iperf3, ethtool, clang/llvm/libbpf/bpftool, and the project's
#      .venv (--system-site-packages: Mininet and BMv2's python3-thrift come from the system).
#   3. `make test` (root: namespaces, tc, BPF), printing pytest's summary; its exit code is the
#      script's.
#
# Usage (from the project directory):  sudo scripts/provision-ubuntu.sh [--plan]
#   --plan   print what would be done for this machine (release, package source) and change nothing
# Environment: PROJECT_DIR (default: the directory above this script), PROJECT_USER (owner of
# .venv; default $SUDO_USER or root), PROVISION_TESTS=0 (skip step 3), PYTEST_ARGS (step 3's
# pytest arguments), OS_RELEASE (default /etc/os-release), P4_SOURCE_BUILD=0 (no source build),
# P4_SOURCES (where the source build takes the repositories; see install-p4-toolchain.sh).
# Safe to run again: every step checks what is already there.
set -euo pipefail

PLAN=0
[[ "${1:-}" == "--plan" ]] && PLAN=1
if [[ $EUID -ne 0 && $PLAN -eq 0 ]]; then
    exec sudo -E "$0" "$@"
fi

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT_DIR="${PROJECT_DIR:-$(dirname "$SCRIPT_DIR")}"
PROJECT_USER="${PROJECT_USER:-${SUDO_USER:-root}}"
OS_RELEASE="${OS_RELEASE:-/etc/os-release}"
export DEBIAN_FRONTEND=noninteractive

log() { printf '\n=== provision: %s\n' "$*"; }
warn() { printf 'provision: WARNING: %s\n' "$*" >&2; }

# shellcheck disable=SC1090
source "$OS_RELEASE"
ARCH=$(dpkg --print-architecture 2>/dev/null || uname -m)

# OBS projects with p4lang-bmv2 + p4lang-pi + p4lang-p4c, best first, for this release
p4lang_sources() {
    [[ "${ID:-}" == ubuntu && "$ARCH" == amd64 ]] || return 0
    case "${VERSION_ID:-}" in
        22.04) echo "home:/p4lang:/latest home:/p4lang" ;;
        *) ;;   # 24.04: no p4lang-bmv2 package; others: none current
    esac
}

toolchain_found() {  # the project's own search (mn_harness/p4/toolchain.py), without a venv
    PYTHONPATH="$PROJECT_DIR" python3 -c 'import sys
from mn_harness.p4.toolchain import find_toolchain
sys.exit(0 if find_toolchain().complete else 1)' 2>/dev/null
}

SOURCES=$(p4lang_sources)
if [[ $PLAN -eq 1 ]]; then
    echo "provision: ${PRETTY_NAME:-unknown system} ($ARCH)"
    if toolchain_found; then
        echo "provision: P4 toolchain: already installed, used as it is"
    elif [[ -n "$SOURCES" ]]; then
        echo "provision: P4 toolchain: p4lang packages from OBS, first of: $SOURCES"
    elif [[ "${P4_SOURCE_BUILD:-1}" == 0 ]]; then
        echo "provision: P4 toolchain: no p4lang packages for this release, P4_SOURCE_BUILD=0: none installed (BMv2 tests skip)"
    else
        echo "provision: P4 toolchain: no p4lang packages for this release: source build into /opt/p4local (scripts/install-p4-toolchain.sh, ~40 min on 2 cores)"
    fi
    echo "provision: then scripts/setup.sh (packages + .venv), then make test"
    exit 0
fi

log "P4 toolchain (BMv2, PI, p4c)"
if toolchain_found; then
    echo "already installed; used as it is"
elif [[ -z "$SOURCES" ]]; then
    echo "no p4lang packages for ${PRETTY_NAME:-this system} ($ARCH) (they exist for Ubuntu 22.04 amd64 only)"
else
    apt-get update -q
    apt-get install -y -q --no-install-recommends ca-certificates curl gnupg
    for project in $SOURCES; do
        repo="https://download.opensuse.org/repositories/${project}/xUbuntu_${VERSION_ID}/"
        name=$(echo "$project" | tr -d '/' | tr ':' '_')   # home_p4lang_latest
        key="/etc/apt/trusted.gpg.d/${name}.gpg"
        echo "trying $repo"
        if ! curl -fsSL "${repo}Release.key" | gpg --dearmor >"$key.tmp"; then
            rm -f "$key.tmp"; warn "cannot fetch ${repo}Release.key"; continue
        fi
        mv "$key.tmp" "$key"
        echo "deb ${repo} /" >"/etc/apt/sources.list.d/${name}.list"
        if apt-get update -q && apt-get install -y -q p4lang-pi p4lang-bmv2 p4lang-p4c; then
            break
        fi
        warn "p4lang packages from $repo failed to install; removing that source"
        rm -f "/etc/apt/sources.list.d/${name}.list" "$key"
        apt-get update -q || true
    done
    toolchain_found || warn "BMv2/p4c still not found after the p4lang packages"
fi
if ! toolchain_found; then
    if [[ "${P4_SOURCE_BUILD:-1}" == 0 ]]; then
        warn "P4_SOURCE_BUILD=0: going on without BMv2, the BMv2 tests will skip"
    else
        echo "building PI, BMv2 and p4c from source into /opt/p4local (scripts/install-p4-toolchain.sh; ~40 min on 2 cores)"
        "$SCRIPT_DIR/install-p4-toolchain.sh" /opt/p4local \
            || warn "the source build failed (its message above): going on without BMv2, the BMv2 tests will skip"
    fi
fi

log "Packages and .venv (scripts/setup.sh)"
(cd "$PROJECT_DIR" && scripts/setup.sh)
if [[ "$PROJECT_USER" != "root" ]]; then
    chown -R "$PROJECT_USER:" "$PROJECT_DIR/.venv"
fi
"$PROJECT_DIR/.venv/bin/python" - <<'PY'
import sys
from p4.v1 import p4runtime_pb2  # noqa: F401  (the protobuf pairing the project pins)
from mn_harness.p4.toolchain import find_toolchain
tc = find_toolchain()
print(f"python {sys.version.split()[0]}; toolchain:", tc.paths if tc.complete else tc.missing_reason())
PY

if [[ "${PROVISION_TESTS:-1}" == 0 ]]; then
    log "Done (tests not run: PROVISION_TESTS=0); run them with: cd $PROJECT_DIR && sudo make test"
    exit 0
fi
log "Tests (make test)"
out=$(mktemp)
set +e
(cd "$PROJECT_DIR" && make test PYTEST_ARGS="${PYTEST_ARGS:--q -ra -p no:cacheprovider}") >"$out" 2>&1
status=$?
set -e
tail -n 40 "$out"
log "Test summary: $(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$out" | tail -1 | tr -d '=') (exit $status; full output: $out)"
exit $status
