#!/bin/sh
# test/install/run.sh — the library as an embedder gets it, from a `make install DESTDIR=...`
# tree (made by `make test-install` before this runs):
#   1. the installed libdygraph.so exports exactly include/'s DG_API functions and needs none of
#      CUDA, cuDNN, NCCL or MPI (ldd), with no RUNPATH;
#   2. README.md's training loop, custom layer and custom op (tools: readme_programs.py) built by
#      each of README's three link lines (pkg-config shared, pkg-config static, the build tree)
#      and run; the shared programs load none of those libraries either (LD_DEBUG);
#   3. the C++ program test/cxx/api_cxx.cc by g++ and clang++, C++11 and C++17, shared and
#      static through pkg-config;
#   4. the install tree without its modules: CPU programs still link and run, and asking for a
#      GPU is an error naming the missing module.
# usage: run.sh BUILD_DIR STAGE_DIR PREFIX
set -eu
BUILD=$(cd "$1" && pwd); STAGE=$(cd "$2" && pwd); PREFIX=$3
ROOT=$(pwd)
LIBDIR=$STAGE$PREFIX/lib
WORK=$BUILD/install/work
rm -rf "$WORK"; mkdir -p "$WORK/bin"
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }

# pkg-config reads the staged .pc files as if the tree were installed at its prefix
cat >"$WORK/bin/pkg-config" <<EOS
#!/bin/sh
exec /usr/bin/pkg-config --define-variable=prefix=$STAGE$PREFIX "\$@"
EOS
chmod +x "$WORK/bin/pkg-config"
export PATH="$WORK/bin:$PATH" PKG_CONFIG_PATH="$LIBDIR/pkgconfig" PKG_CONFIG_LIBDIR="$LIBDIR/pkgconfig"

# 1. the shared library itself
python3 "$ROOT/tools/check_exports.py" "$LIBDIR/libdygraph.so.0" "$STAGE$PREFIX/include" || fail "exports"
FOREIGN='libcuda|libcudart|libcudnn|libcublas|libnccl|libmpi|libopen-pal|libopen-rte|libzmq'
if ldd "$LIBDIR/libdygraph.so.0" | grep -E "$FOREIGN"; then fail "libdygraph.so needs the libraries above"; fi
if readelf -d "$LIBDIR/libdygraph.so.0" | grep -E "RPATH|RUNPATH"; then fail "libdygraph.so carries a run path"; fi
pass "libdygraph.so: exports = include/, no CUDA/cuDNN/NCCL/MPI/ZeroMQ dependency, no run path"

# 2. README's programs by README's link lines
python3 "$ROOT/test/install/readme_programs.py" "$ROOT/README.md" "$WORK/readme" || fail "README programs"
cat "$WORK/readme/custom_op.c" "$ROOT/test/install/custom_op_main.c" >"$WORK/readme/custom_op_full.c"
ln -s "$ROOT/include" "$WORK/readme/include"; ln -s "$BUILD" "$WORK/readme/build"
kinds="shared static tree"
for prog in train custom_layer custom_op_full; do
    i=0
    for kind in $kinds; do
        i=$((i + 1))
        line=$(sed -n "${i}p" "$WORK/readme/link_lines.sh" | sed "s/train/$prog/g")
        [ -n "$line" ] || fail "README has no link line $i"
        (cd "$WORK/readme" && sh -c "$line -Wall -Werror" && mv "$prog" "$prog.$kind") || fail "$kind: $line"
        out=$(cd "$WORK/readme" && LD_LIBRARY_PATH="$LIBDIR" DG_NUM_THREADS=2 "./$prog.$kind" 2>&1) || { echo "$out"; fail "$prog.$kind exited non-zero"; }
        if [ $kind = shared ]; then
            LD_LIBRARY_PATH="$LIBDIR" ldd "$WORK/readme/$prog.$kind" | grep -q "$LIBDIR/libdygraph.so.0" || fail "$prog.$kind does not use the staged libdygraph.so"
            loaded=$(cd "$WORK/readme" && LD_LIBRARY_PATH="$LIBDIR" LD_DEBUG=files DG_NUM_THREADS=2 "./$prog.$kind" 2>&1 >/dev/null | grep -E "file=.*($FOREIGN)" || true)
            [ -z "$loaded" ] || { echo "$loaded"; fail "$prog.$kind (CPU only) loaded CUDA/NCCL/MPI libraries"; }
        else
            ldd "$WORK/readme/$prog.$kind" | grep -q "libdygraph" && fail "$prog.$kind links libdygraph.so, not the static library"
        fi
        echo "$out" | tail -1 | sed "s/^/    $prog.$kind: /"
    done
done
pass "README's training loop, custom layer and custom op, each built by README's 3 link lines, ran"

# 3. C++
for cxx in g++ clang++; do
    command -v $cxx >/dev/null || { echo "    $cxx not installed: skipped"; continue; }
    for std in c++11 c++17; do
        for kind in shared static; do
            pc=dygraph; [ $kind = static ] && pc="--static dygraph-static"
            $cxx -std=$std -Wall -Wextra -Werror "$ROOT/test/cxx/api_cxx.cc" -o "$WORK/api_cxx" $(pkg-config --cflags --libs $pc) -lgomp \
                || fail "$cxx -std=$std $kind"
            LD_LIBRARY_PATH="$LIBDIR" "$WORK/api_cxx" >/dev/null || fail "$cxx -std=$std $kind: the program failed"
        done
    done
done
pass "C++ (g++ and clang++ where present; C++11 and C++17; shared and static through pkg-config)"

# 4. no modules at all
BARE=$BUILD/install/bare
rm -rf "$BARE"; mkdir -p "$BARE"
cp -a "$STAGE$PREFIX/." "$BARE/"
rm -f "$BARE"/lib/libdygraph-*.so.*
cc "$ROOT/test/install/gpu_request.c" -o "$WORK/gpu_request" -I"$BARE/include" -L"$BARE/lib" -ldygraph
LD_LIBRARY_PATH="$BARE/lib" DG_MODULE_PATH=/nonexistent "$WORK/gpu_request" | sed 's/^/    /' || fail "without modules"
(cd "$WORK/readme" && LD_LIBRARY_PATH="$BARE/lib" DG_NUM_THREADS=2 ./train.shared >/dev/null) || fail "train without modules"
pass "install tree without its modules: CPU programs run, a GPU request (device, layer_to) names the missing module"
