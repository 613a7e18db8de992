# Resurgo — developer entry points. Every target first runs
# scripts/bootstrap.sh, which installs what is missing (system packages when
# root, the .venv virtualenv) and returns at once when nothing is.
#
#   make demo    build everything, run the heat2d demo (kill + restart)
#   make test    the whole suite: ctest (C++, Fortran, quick crash, stress
#                and fuzz campaigns), pytest (incl. the corruption campaign),
#                the GPU check against the fake CUDA driver, then test-asan
#                and test-tsan
#   make test-suite  ctest, pytest and the fake-driver GPU check only
#   make test-asan, make test-tsan   C++ tests and quick campaigns under
#                ASan+UBSan / TSan (make build-asan, build-tsan: their builds)
#   make soak    the long campaigns (docs/reliability.md); logs in build/soak
#   make bench   run bench/host_checkpoint.py (BENCH_ARGS="--sizes 256MiB");
#                BENCH=compression_fork runs bench/compression_fork.py,
#                BENCH="host_checkpoint compression_fork" both (bench/README.md);
#                BENCH=tracking_overhead and BENCH=incremental drive C++
#                programs: make build first
#   make build   configure + build the C++ library, tests, examples (build/cpp)
#   make python  (re)install the Python package into .venv, editable
#   make install PREFIX=/opt/resurgo   install the C/C++/Fortran library
#   make gpu-prepare  fetch the build dependencies into .gpu for an offline GPU machine
#                (then scripts/gpu_check.sh there: docs/gpu.md)
#   make clean   remove build/ (keeps .venv); make distclean also removes .venv

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
MAKEFLAGS += --no-print-directory
.DEFAULT_GOAL := test

BUILD_DIR  ?= build/cpp
PY_BUILD   ?= build/python
BUILD_TYPE ?= RelWithDebInfo
VENV       := .venv
,          := ,
VENV_PY    := $(VENV)/bin/python
PREFIX     ?= /usr/local
BENCH      ?= host_checkpoint
BENCH_ARGS ?=
CMAKE_ARGS ?=

# Parallel jobs: the number of cores, at most 8 (a C++20 compile takes about
# 1 GiB of memory). Override with `make JOBS=n`.
NPROC := $(shell nproc 2>/dev/null || echo 2)
JOBS  ?= $(shell n=$(NPROC); if [ $$n -gt 8 ]; then n=8; fi; if [ $$n -lt 1 ]; then n=1; fi; echo $$n)

# ccache, when present (bootstrap installs it): the build trees of one
# `make test` share the objects they compile alike, so the Python extension
# (built with build/cpp's flags, below) and the fake-driver GPU check reuse
# build/cpp's instead of compiling the library twice more. The cache lives
# in build/ccache (a fresh clone starts empty); the build directory is kept
# out of its key, as two trees compile the same sources, and paths under
# the clone are written relative to it (the trees' batches of the library,
# below, are generated files of each tree).
ifneq ($(shell command -v ccache 2>/dev/null),)
export CMAKE_C_COMPILER_LAUNCHER   := ccache
export CMAKE_CXX_COMPILER_LAUNCHER := ccache
export CCACHE_DIR                  := $(CURDIR)/build/ccache
export CCACHE_NOHASHDIR            := 1
export CCACHE_BASEDIR              := $(CURDIR)
endif
# One compiler name in every build tree (ccache's key holds it; pip's build
# would pick g++ where CMake picks c++); CC or CXX set by the user win.
export CC  := $(if $(filter environment command line,$(origin CC)),$(CC),cc)
export CXX := $(if $(filter environment command line,$(origin CXX)),$(CXX),c++)

# Inputs of the Python extension: a change to any of them re-runs pip.
PY_INPUTS := $(shell find python src include cmake -type f \
               -not -path '*/__pycache__/*' -not -name '*.pyc' 2>/dev/null) \
             $(wildcard pyproject.toml) CMakeLists.txt

.PHONY: all deps bench-deps gpu-prepare build python test test-suite build-asan build-tsan test-asan test-tsan soak demo bench install clean distclean

all: build python

deps:
	@scripts/bootstrap.sh

# The benchmarks' baselines need more system packages than the tests.
bench-deps:
	@RESURGO_BENCH_PACKAGES=1 scripts/bootstrap.sh

# Debian packages and wheels of the build dependencies, in .gpu, for a GPU
# machine without network or package manager (needs .venv: make deps).
gpu-prepare:
	@scripts/gpu_prepare.sh

# Every tree compiles the library one batch per folder (RESURGO_UNITY_LIBRARY,
# on by default, src/CMakeLists.txt): half the compile time of file by file.
# Ninja, as pip's build of the Python package uses: both trees then compile
# from their top folder, so that ccache, with the paths made relative, finds
# the same command for the same batch in both.
GENERATOR := $(if $(shell command -v ninja 2>/dev/null),-G Ninja)

$(BUILD_DIR)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DRESURGO_WERROR=ON $(CMAKE_ARGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS)

# scikit-build-core keeps its build tree in build/python, so a re-install
# only recompiles what changed. The editable install imports python/resurgo
# itself, whose bytecode pip does not compile as it does an installed
# package's: compiled here, or a process under PYTHONDONTWRITEBYTECODE
# compiles every module of the package at each import.
$(PY_BUILD)/.installed: $(PY_INPUTS) $(VENV)/.resurgo-requirements | deps
	@echo "python: building the extension and installing resurgo into $(VENV) (editable)"
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(VENV_PY) -m pip install -q --disable-pip-version-check \
	  --no-build-isolation --config-settings=build-dir=$(PY_BUILD) \
	  --config-settings=cmake.build-type=$(BUILD_TYPE) --config-settings=cmake.define.RESURGO_WERROR=ON -e .
	$(VENV_PY) -m compileall -q python/resurgo
	@mkdir -p $(PY_BUILD) && touch $@

# The virtualenv and its stamp are made by bootstrap (deps).
$(VENV)/.resurgo-requirements: | deps

python: deps $(PY_BUILD)/.installed

# One after the other: the sanitizer trees compiled beside ctest and pytest
# at nice 19 made those tests nearly twice as slow and saved nothing in all
# (bench/results/ci_time.md, 5c2f1bc).
test: test-suite test-asan test-tsan

# The GPU check against the fake CUDA driver proves scripts/gpu_check.sh
# (docs/gpu.md, "Running the GPU checks"); its summary is printed when a
# step fails. pytest runs beside it: pytest keeps one core busy, and the
# check's build takes the other's idle time.
GPU_CHECK_OUT := build/gpu-check/out
# The check's build tree two folders below the clone, as build/cpp is: ccache
# writes the include paths relative to the build tree, so the library's
# batches that include no dependency of the check's prefix
# are build/cpp's objects (bench/results/ci_time.md measures the gain).
GPU_CHECK_BUILD := build/gpu-check-build

# ctest runs one test more than there are jobs: its tests wait on fsync,
# on children and on mpirun much of their time, and at -j$(JOBS) the cores
# were partly idle (bench/results/ci_time.md measures the phase).
CTEST_JOBS := $(shell echo $$(($(JOBS) + 1)))

test-suite: deps build python
	scripts/gpu_prepare.sh
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(CTEST_JOBS) || \
	  { sh scripts/failed_test_output.sh $(BUILD_DIR); exit 1; }
	JOBS=2 scripts/together.sh "$(VENV_PY) -m pytest tests/python -q" \
	  "JOBS=$(JOBS) GPU_CHECK_BUILD=$(GPU_CHECK_BUILD) scripts/gpu_check.sh --fake-driver $(GPU_CHECK_OUT) || { cat $(GPU_CHECK_OUT)/summary.md; exit 1; }"

# The GPU suites that run a second time against the fake CUDA driver
# (tests/cpp/fake_cuda/suites.txt; the fake_cuda.* ctest registration runs the same).
FAKE_CUDA_TESTS := $(shell grep -v '^\#' tests/cpp/fake_cuda/suites.txt | paste -sd: -)

# Sanitizer builds of the library and the GoogleTest suite (no Python).
# Debug information is line tables only (-g1): enough for the reports' stack
# traces, and cheaper to compile than full -g (bench/ci_time.sh measures
# the phases of make test). The test programs
# run side by side (scripts/together.sh), the GoogleTest binary in one
# shard per job: each is single-threaded most of the time.
# ASan+UBSan check the library: build/cpp's GoogleTest program, whose files
# need no instrumentation, runs on the ASan tree's libresurgo.so (found
# through LD_LIBRARY_PATH before the program's RUNPATH; the ASan runtime,
# which must come first, preloaded), so its test files are not compiled a
# second time. TSan must see every synchronization, the tests' own atomics
# and shared pointers included, or it reports races that are none: its
# tree compiles the GoogleTest files instrumented.
# The ASan+UBSan library is compiled at -O0: optimizing code full of UBSan's
# checks is the longest part of its build, and its test programs are short
# (bench/ci_time.sh measures both). TSan's stays at -O1: its runs are the
# longest of make test. A new tree uses Ninja, which
# builds the listed programs side by side (make builds one goal at a time).
# Each tree has its compiler (a tree configured with another is made anew).
# $(call sanitizer_build,build dir,-fsanitize= list,library -O,GoogleTest target,C++ compiler).
define sanitizer_build
	if [ -f $(1)/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=$(5)$$' $(1)/CMakeCache.txt; then rm -rf $(1); fi
	cmake -S . -B $(1) $$([ -f $(1)/CMakeCache.txt ] || echo '$(GENERATOR)') -DCMAKE_CXX_COMPILER=$(5) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DRESURGO_BUILD_EXAMPLES=OFF -DRESURGO_BUILD_FORTRAN=OFF \
	  -DCMAKE_CXX_FLAGS="-fsanitize=$(2) -fno-omit-frame-pointer -fno-sanitize-recover=all $(3)" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=$(2)" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=$(2)"
	cmake --build $(1) -j$(JOBS) --target resurgo $(4) resurgo_fake_cuda crash_campaign auto_crash_campaign stress_campaign power_tests power_campaign
endef

# $(call sanitized_tests,build dir,runtime options,GoogleTest program).
define sanitized_tests
	JOBS=$(JOBS) scripts/together.sh \
	  $(foreach shard,$(shell seq 0 $$(($(JOBS) - 1))),"GTEST_TOTAL_SHARDS=$(JOBS) GTEST_SHARD_INDEX=$(shard) $(2) LD_LIBRARY_PATH=$(1)/src $(3)") \
	  "$(2) LD_LIBRARY_PATH=$(1)/src:$(1)/tests/cpp/fake_cuda $(3) --gtest_filter='$(FAKE_CUDA_TESTS)'" \
	  "$(2) $(1)/tests/fault/auto_crash_campaign --trials 20" \
	  "$(2) $(1)/tests/fault/crash_campaign --trials 60" \
	  "$(2) $(1)/tests/power/power_campaign --states 800" \
	  "$(2) $(1)/tests/power/power_tests" \
	  "$(2) $(1)/tests/fault/stress_campaign --seconds 5"
endef

# The ASan+UBSan tree is compiled by clang (bootstrap installs it): at -O0
# with both sanitizers it compiled the library's largest batch (job/) in
# 16 s of CPU against GCC's 32 s, and GCC with TSan at -O1 (the TSan tree's
# compiler) in 20 s against clang's 24 s (medians of 5,
# bench/results/compile_cost.md). build/cpp's GoogleTest program (GCC, not
# instrumented; both compilers use libstdc++) runs on the clang-built
# library with clang's shared ASan runtime preloaded, which holds the UBSan
# handlers too; the tree's own programs link the runtime statically and
# export it to the library. ODR indicators: the library registers its own
# copies of the globals the program also defines (vtables), so their
# redzones are not laid over the program's copies (without them ASan
# reported overflows there).
ASAN_CXX     = $(or $(shell command -v clang++ 2>/dev/null),clang++)
ASAN_RUNTIME = $(shell $(ASAN_CXX) -print-file-name=libclang_rt.asan-$(shell uname -m).so)
TSAN_CXX     = $(shell command -v $(CXX) 2>/dev/null)

build-asan: deps
	$(call sanitizer_build,build/asan,address$(,)undefined,-O0 -fsanitize-address-use-odr-indicator,,$(ASAN_CXX))

build-tsan: deps
	$(call sanitizer_build,build/tsan,thread,-O1,resurgo_tests,$(TSAN_CXX))

test-asan: build build-asan
	$(call sanitized_tests,build/asan,ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1,LD_PRELOAD=$(ASAN_RUNTIME) $(BUILD_DIR)/tests/cpp/resurgo_tests)

test-tsan: build-tsan
	$(call sanitized_tests,build/tsan,TSAN_OPTIONS=halt_on_error=1,build/tsan/tests/cpp/resurgo_tests)

# Long campaigns (docs/reliability.md), each log kept in build/soak.
SOAK_LOGS              := build/soak
SOAK_CRASH_TRIALS      ?= 10000
SOAK_CORRUPTION_TRIALS ?= 20000
SOAK_STRESS_SECONDS    ?= 300
SOAK_IO_FAULT_RUNS     ?= 3000
SOAK_POWER_STATES      ?= 100000

soak: deps build python
	@mkdir -p $(SOAK_LOGS)
	$(BUILD_DIR)/tests/fault/crash_campaign --trials $(SOAK_CRASH_TRIALS) 2>&1 | tee $(SOAK_LOGS)/crash.log
	$(VENV_PY) tests/fault/corruption_campaign.py --trials $(SOAK_CORRUPTION_TRIALS) 2>&1 | tee $(SOAK_LOGS)/corruption.log
	$(BUILD_DIR)/tests/fault/stress_campaign --seconds $(SOAK_STRESS_SECONDS) 2>&1 | tee $(SOAK_LOGS)/stress.log
	RESURGO_IO_FAULT_RUNS=$(SOAK_IO_FAULT_RUNS) RESURGO_IO_FAULT_SEED=$$RANDOM$$RANDOM \
	  $(BUILD_DIR)/tests/cpp/resurgo_tests --gtest_filter=IoFaultTest.RandomSingleFaults 2>&1 | tee $(SOAK_LOGS)/io_fault.log
	bash tests/fuzz/run.sh soak 2>&1 | tee $(SOAK_LOGS)/fuzz.log
	$(BUILD_DIR)/tests/power/power_campaign --states $(SOAK_POWER_STATES) --semantics both 2>&1 | tee $(SOAK_LOGS)/power.log
	ctest --test-dir $(BUILD_DIR) -C soak -R '_soak$$' --output-on-failure 2>&1 | tee $(SOAK_LOGS)/auto_mpi_kills.log

demo: deps build python
	$(VENV_PY) examples/heat2d/demo.py --binary $(BUILD_DIR)/examples/heat2d/heat2d

bench: bench-deps python
	@for b in $(BENCH); do echo "$(VENV_PY) bench/$$b.py $(BENCH_ARGS)"; \
	  $(VENV_PY) bench/$$b.py $(BENCH_ARGS) || exit 1; done

# The library alone, in a build tree of its own (no tests, examples or
# Python; the development tree $(BUILD_DIR) is left as it is): needs the
# compilers and the libraries of scripts/bootstrap.sh's system step, not
# .venv. The CLI comes with the Python package (docs/install.md).
INSTALL_BUILD_DIR ?= build/install
install:
	cmake -S . -B $(INSTALL_BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DRESURGO_BUILD_TESTS=OFF -DRESURGO_BUILD_EXAMPLES=OFF $(CMAKE_ARGS)
	cmake --build $(INSTALL_BUILD_DIR) -j$(JOBS)
	cmake --install $(INSTALL_BUILD_DIR) --prefix $(PREFIX)

clean:
	rm -rf build python/*.egg-info

distclean: clean
	rm -rf $(VENV)
