#!/bin/sh
# Installs every build and test dependency on Debian 12. Idempotent: when everything is
# present it only runs one dpkg query (well under a second).
set -e
# `deps.sh` installs what building and testing need; `deps.sh bench` adds PyTorch for the
# side-by-side benches and for regenerating the goldens, with OpenBLAS so that PyTorch runs on
# its best BLAS here rather than the reference one it falls back to; `deps.sh fuzz` adds clang
# and libFuzzer.
# The tests use PyTorch too: the torchvision interop test generates its reference on the spot.
PKGS="gcc make pkg-config libdnnl-dev libcriterion-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev python3-torch python3-torchvision libopenmpi-dev openmpi-bin libzmq3-dev openssh-client iproute2 chromium python3-pil wamerican wngerman wfrench wspanish witalian libprotobuf-c-dev protobuf-c-compiler python3-onnx nodejs"
[ "${1:-}" = fuzz ] && PKGS="$PKGS clang libclang-rt-14-dev libomp-14-dev"
[ "${1:-}" = bench ] && PKGS="$PKGS python3-numpy libopenblas0-pthread"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# ONNX Runtime for the export checks comes from npm (onnxruntime-node, make test-onnx); a node
# that brings its own npm (NodeSource's) must not get Debian's npm, which would conflict with it.
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
if [ "$(id -u)" != 0 ]; then
    SUDO=sudo
    command -v sudo >/dev/null 2>&1 || { echo "deps: need root (or sudo) to install:$missing" >&2; exit 1; }
else
    SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
