#!/usr/bin/env bash
# install-p4-toolchain.sh [PREFIX] [pi|bmv2|p4c ...]
#
# Builds the P4 toolchain mn-harness needs from the p4lang sources, for machines without the
# p4lang packages (Debian 12, Ubuntu 24.04, ...): PI (P4Runtime server library), BMv2
# (simple_switch_grpc with the Thrift runtime server, simple_switch_CLI; logging macros off,
# -O3) and p4c (BMv2 back end only) into PREFIX (default /opt/p4local, which mn-harness searches
# by default; else export P4_TOOLCHAIN=PREFIX). Components are built in the order given (default:
# all three, in dependency order; BMv2 needs PI in PREFIX).
#
# Idempotent: a component whose stamp (commit + flags) is in PREFIX/share/p4-toolchain/ and whose
# binaries are there is skipped; sources and build trees in P4_BUILD_DIR are reused.
#
# Environment:
#   P4_SOURCES    where the repositories come from, a template with {owner} and {name}
#                 (default https://github.com/{owner}/{name}.git); e.g. a local mirror:
#                 P4_SOURCES='/srv/mirror/{owner}+{name}/repo' (bare or working repositories)
#   P4_BUILD_DIR  sources and build trees (default /var/tmp/p4-toolchain-build)
#   JOBS          parallel compile jobs (default: nproc); p4c needs ~1.5 GB of memory per job
#   P4_SKIP_APT=1 do not apt-get the build dependencies (they must be installed)
#
# Measured on a 2-core Debian 12 VM (JOBS=2, docs/p4.md): PI 2m21s, BMv2 10m00s, p4c 26m20s;
# roughly x 2/JOBS on more cores. A second run with everything in place takes seconds.
set -euo pipefail

# -- pinned versions (the submodules are the ones these commits pin) ---------------------------
PI_REPO=p4lang/PI
PI_COMMIT=f96af95e090619491e3abf2df69df340c2c9cb46          # main, 2026-06-28
PI_SUBMODULES=(proto/p4runtime proto/openconfig/gnmi third_party/googletest third_party/uthash)
BMV2_REPO=p4lang/behavioral-model
BMV2_COMMIT=693e69e634fedf007964a069fdd69acc441a5f80        # 1.15.5, 2026-08-02
P4C_REPO=p4lang/p4c
P4C_COMMIT=b9775ee382ec9dea5820c979f2991208fcefe260         # v1.2.4.1, 2023-07-18
P4C_SUBMODULES=(control-plane/p4runtime test/frameworks/gtest)
# the last p4c release that builds against the distribution's protobuf; later ones fetch
# protobuf/abseil/googletest sources during cmake

# -- flags (and why) ---------------------------------------------------------------------------
PI_CONFIGURE=(--with-proto --without-internal-rpc --without-cli --without-bmv2 --disable-static)
# logging macros and the event logger cost per packet: BMv2's performance notes build with both
# off and -O3; nanomsg is not needed (digests go over P4Runtime)
BMV2_CONFIGURE=(--with-pi --with-thrift --without-nanomsg --disable-elogger
                --disable-logging-macros --disable-static)
BMV2_CXXFLAGS="-O3"
P4C_CMAKE=(-DCMAKE_BUILD_TYPE=Release -DENABLE_BMV2=ON -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF
           -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF -DENABLE_P4TEST=OFF -DENABLE_P4C_GRAPHS=OFF
           -DENABLE_GTESTS=OFF -DENABLE_DOCS=OFF -DENABLE_TEST_TOOLS=OFF
           # p4c's BMv2 tests are not built; without this an installed simple_switch makes cmake
           # demand scapy in the build's python
           -DCMAKE_DISABLE_FIND_PACKAGE_BMV2=ON)
# gcc >= 13 no longer includes <cstdint> transitively; p4c 1.2.4.1 relies on it in a few files
P4C_CXXFLAGS="-include cstdint"

BUILD_DEPS=(git ca-certificates g++ make autoconf automake libtool libtool-bin pkg-config cmake
            bison flex libfl-dev python3 cpp
            libboost-dev libboost-program-options-dev libboost-system-dev libboost-filesystem-dev
            libboost-thread-dev libboost-iostreams-dev libgmp-dev libpcap-dev libevent-dev
            libssl-dev libjsoncpp-dev libxxhash-dev libgc-dev
            libthrift-dev thrift-compiler python3-thrift python3-six
            libprotobuf-dev libprotoc-dev protobuf-compiler
            libgrpc++-dev libgrpc-dev protobuf-compiler-grpc)

PREFIX=${1:-/opt/p4local}
[ $# -gt 0 ] && shift
case "$PREFIX" in /*) ;; *) PREFIX=$(pwd)/$PREFIX ;; esac
COMPONENTS=("$@")
[ ${#COMPONENTS[@]} -gt 0 ] || COMPONENTS=(pi bmv2 p4c)
DEFAULT_SOURCES='https://github.com/{owner}/{name}.git'
P4_SOURCES=${P4_SOURCES:-$DEFAULT_SOURCES}
P4_BUILD_DIR=${P4_BUILD_DIR:-/var/tmp/p4-toolchain-build}
JOBS=${JOBS:-$(nproc)}
STAMPS=$PREFIX/share/p4-toolchain
export PYTHON=/usr/bin/python3          # not a pyenv/venv python: the CLIs run with python3
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
T0=$(date +%s)

say() { printf '[install-p4-toolchain %s +%dm%02ds] %s\n' "$(date +%H:%M:%S)" \
          $((($(date +%s) - T0) / 60)) $((($(date +%s) - T0) % 60)) "$*"; }
fail() { echo "install-p4-toolchain: FAILED: $*" >&2; exit 1; }

for c in "${COMPONENTS[@]}"; do
  case "$c" in pi|bmv2|p4c) ;; *) fail "unknown component '$c' (pi, bmv2, p4c)";; esac
done

# -- build dependencies --------------------------------------------------------------------------
install_deps() {
  [ "${P4_SKIP_APT:-0}" = 1 ] && return
  local missing=() p
  for p in "${BUILD_DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq || fail "apt-get update"
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get install ${missing[*]}"
}

# -- sources -------------------------------------------------------------------------------------
source_url() {  # owner/name -> URL from the P4_SOURCES template
  local t=$P4_SOURCES
  t=${t//\{owner\}/${1%%/*}}
  echo "${t//\{name\}/${1#*/}}"
}

checkout() {  # dir owner/name commit: a plain checkout of exactly that commit
  local dir=$1 repo=$2 commit=$3 url
  if [ -e "$dir/.git" ] && [ "$(git -C "$dir" rev-parse -q --verify HEAD 2>/dev/null)" = "$commit" ]; then
    return
  fi
  url=$(source_url "$repo")
  say "fetch $repo $commit from $url"
  rm -rf "$dir"
  if [ -d "$url" ]; then
    # a local mirror: borrow its objects (no copy, no pack transfer)
    git clone -q --shared --no-checkout "$url" "$dir" || fail "cannot clone $repo from $url"
  else
    mkdir -p "$dir"
    git -C "$dir" init -q
    # one commit if the server allows it (GitHub does), else everything
    git -C "$dir" fetch -q --depth 1 "$url" "$commit" 2>/dev/null \
      || git -C "$dir" fetch -q "$url" '+refs/heads/*:refs/remotes/src/*' '+refs/tags/*:refs/tags/*' \
      || fail "cannot fetch $repo from $url"
  fi
  # slides and PDFs are not needed to build (p4c carries ~10 MB of them; mirrors that drop
  # large files lack them)
  git -C "$dir" config core.sparseCheckout true
  local info
  info="$(git -C "$dir" rev-parse --absolute-git-dir)/info"
  mkdir -p "$info" && printf '/*\n!*.pptx\n!*.pdf\n' >"$info/sparse-checkout"
  git -C "$dir" -c advice.detachedHead=false checkout -q "$commit" \
    || fail "$repo has no commit $commit at $url"
}

checkout_submodules() {  # dir path...: each at the commit the superproject pins
  local dir=$1 path name url commit repo; shift
  for path in "$@"; do
    name=$(git -C "$dir" config -f .gitmodules --get-regexp '^submodule\..*\.path$' \
             | awk -v p="$path" '$2 == p {print $1}' | sed 's/^submodule\.//; s/\.path$//')
    [ -n "$name" ] || fail "$dir: no submodule at $path"
    url=$(git -C "$dir" config -f .gitmodules "submodule.$name.url")
    repo=$(echo "$url" | sed -E 's#^.*github\.com[:/]##; s#\.git$##; s#/$##')
    commit=$(git -C "$dir" ls-tree HEAD "$path" | awk '{print $3}')
    [ -n "$commit" ] || fail "$dir: no pinned commit for $path"
    checkout "$dir/$path" "$repo" "$commit"
  done
}

# -- components ----------------------------------------------------------------------------------
stamp_ok() {  # component key binary...
  local c=$1 key=$2 f; shift 2
  [ -f "$STAMPS/$c" ] && [ "$(cat "$STAMPS/$c")" = "$key" ] || return 1
  for f in "$@"; do [ -e "$PREFIX/$f" ] || return 1; done
}

build_pi() {
  local key="$PI_COMMIT ${PI_CONFIGURE[*]}" src=$P4_BUILD_DIR/PI
  if stamp_ok pi "$key" lib/libpi.so lib/libpigrpcserver.so; then say "PI: up to date"; return; fi
  say "PI: building (~2.5 min on 2 cores)"
  checkout "$src" "$PI_REPO" "$PI_COMMIT"
  checkout_submodules "$src" "${PI_SUBMODULES[@]}"
  (cd "$src" && ./autogen.sh >"$P4_BUILD_DIR/pi.log" 2>&1 \
     && ./configure --prefix="$PREFIX" "${PI_CONFIGURE[@]}" CFLAGS=-O2 CXXFLAGS=-O2 \
          >>"$P4_BUILD_DIR/pi.log" 2>&1 \
     && make -j"$JOBS" >>"$P4_BUILD_DIR/pi.log" 2>&1 \
     && make install-strip >>"$P4_BUILD_DIR/pi.log" 2>&1) \
    || fail "PI build, see the end of $P4_BUILD_DIR/pi.log: $(tail -3 "$P4_BUILD_DIR/pi.log" | tr '\n' ' ')"
  mkdir -p "$STAMPS" && echo "$key" >"$STAMPS/pi"
  say "PI: installed"
}

build_bmv2() {
  local key="$BMV2_COMMIT ${BMV2_CONFIGURE[*]} $BMV2_CXXFLAGS" src=$P4_BUILD_DIR/behavioral-model
  if stamp_ok bmv2 "$key" bin/simple_switch_grpc bin/simple_switch_CLI; then say "BMv2: up to date"; return; fi
  [ -e "$PREFIX/lib/libpi.so" ] || fail "BMv2 needs PI in $PREFIX: build 'pi' first"
  say "BMv2: building (~10 min on 2 cores)"
  checkout "$src" "$BMV2_REPO" "$BMV2_COMMIT"
  (cd "$src" && ./autogen.sh >"$P4_BUILD_DIR/bmv2.log" 2>&1 \
     && ./configure --prefix="$PREFIX" "${BMV2_CONFIGURE[@]}" \
          CPPFLAGS="-I$PREFIX/include" LDFLAGS="-L$PREFIX/lib -Wl,-rpath,$PREFIX/lib" \
          CFLAGS="$BMV2_CXXFLAGS" CXXFLAGS="$BMV2_CXXFLAGS" >>"$P4_BUILD_DIR/bmv2.log" 2>&1 \
     && make -j"$JOBS" >>"$P4_BUILD_DIR/bmv2.log" 2>&1 \
     && make install-strip >>"$P4_BUILD_DIR/bmv2.log" 2>&1) \
    || fail "BMv2 build, see the end of $P4_BUILD_DIR/bmv2.log: $(tail -3 "$P4_BUILD_DIR/bmv2.log" | tr '\n' ' ')"
  mkdir -p "$STAMPS" && echo "$key" >"$STAMPS/bmv2"
  say "BMv2: installed"
}

build_p4c() {
  local key="$P4C_COMMIT ${P4C_CMAKE[*]} $P4C_CXXFLAGS" src=$P4_BUILD_DIR/p4c
  if stamp_ok p4c "$key" bin/p4c-bm2-ss share/p4c/p4include/v1model.p4; then say "p4c: up to date"; return; fi
  say "p4c: building (~26 min on 2 cores)"
  checkout "$src" "$P4C_REPO" "$P4C_COMMIT"
  checkout_submodules "$src" "${P4C_SUBMODULES[@]}"
  (cmake -S "$src" -B "$src/build" -DCMAKE_INSTALL_PREFIX="$PREFIX" "${P4C_CMAKE[@]}" \
       -DCMAKE_CXX_FLAGS="$P4C_CXXFLAGS" -DPYTHON_EXECUTABLE=/usr/bin/python3 \
       >"$P4_BUILD_DIR/p4c.log" 2>&1 \
     && cmake --build "$src/build" -j"$JOBS" >>"$P4_BUILD_DIR/p4c.log" 2>&1 \
     && cmake --install "$src/build" --strip >>"$P4_BUILD_DIR/p4c.log" 2>&1) \
    || fail "p4c build, see the end of $P4_BUILD_DIR/p4c.log: $(tail -3 "$P4_BUILD_DIR/p4c.log" | tr '\n' ' ')"
  mkdir -p "$STAMPS" && echo "$key" >"$STAMPS/p4c"
  say "p4c: installed"
}

# -- smoke check ---------------------------------------------------------------------------------
check() {
  local b=$PREFIX/bin f tmp
  for f in "$@"; do
    case $f in
      pi) [ -e "$PREFIX/lib/libpigrpcserver.so" ] || fail "missing $PREFIX/lib/libpigrpcserver.so" ;;
      bmv2)
        "$b/simple_switch_grpc" --version >/dev/null 2>&1 || fail "$b/simple_switch_grpc does not run"
        # (captured first: grep -q closing the pipe early would fail the pipeline under pipefail)
        f=$(ldd "$b/simple_switch_grpc")
        grep -q libsimpleswitch_thrift <<<"$f" || fail "simple_switch_grpc was built without the Thrift server"
        "$PYTHON" "$b/simple_switch_CLI" --help >/dev/null 2>&1 || fail "$b/simple_switch_CLI does not run with $PYTHON (python3-thrift?)" ;;
      p4c)
        tmp=$(mktemp -d)
        printf '#include <core.p4>\n#include <v1model.p4>\nstruct h_t {}\nstruct m_t {}\n%s\n' \
          'parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t s) { state start { transition accept; } }
control N(inout h_t h, inout m_t m) { apply {} }
control I(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply { s.egress_spec = 1; } }
control E(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply {} }
control D(packet_out p, in h_t h) { apply {} }
V1Switch(P(), N(), I(), E(), N(), D()) main;' >"$tmp/t.p4"
        "$b/p4c-bm2-ss" -o "$tmp/t.json" --p4runtime-files "$tmp/t.p4info.txt" "$tmp/t.p4" >"$tmp/log" 2>&1 \
          || fail "p4c-bm2-ss cannot compile a v1model program: $(head -c 300 "$tmp/log")"
        rm -rf "$tmp" ;;
    esac
  done
}

say "prefix $PREFIX, components ${COMPONENTS[*]}, sources $P4_SOURCES, build dir $P4_BUILD_DIR, $JOBS jobs"
install_deps
mkdir -p "$P4_BUILD_DIR" "$PREFIX" || fail "cannot create $P4_BUILD_DIR or $PREFIX"
for c in "${COMPONENTS[@]}"; do
  t=$(date +%s)
  "build_$c"
  check "$c"
  say "$c: done in $((($(date +%s) - t) / 60))m$((($(date +%s) - t) % 60))s"
done
say "OK: ${COMPONENTS[*]} in $PREFIX; use P4_TOOLCHAIN=$PREFIX"
