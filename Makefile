# mtc — front door. `make run` and `make test` set up everything they need
# (Debian packages through scripts/install-deps.sh), configure, build and go.

BUILD_DIR ?= build
LLVM_DIR  ?= /usr/lib/llvm-22
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=

FULL_CMAKE_ARGS = -G Ninja \
	-DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_C_COMPILER=$(LLVM_DIR)/bin/clang \
	-DCMAKE_CXX_COMPILER=$(LLVM_DIR)/bin/clang++ \
	-DLLVM_USE_LINKER=lld \
	-DMLIR_DIR=$(LLVM_DIR)/lib/cmake/mlir \
	-DLLVM_EXTERNAL_LIT=$(LLVM_DIR)/bin/lit
CONFIGURE = cmake -S . -B $(BUILD_DIR) $(FULL_CMAKE_ARGS) $(CMAKE_FLAGS)

# The runtime alone (docs/building.md): lib/, runtime/ and mtc-unittests,
# configured with MTC_BUILD_COMPILER=OFF, so without LLVM, MLIR or ANTLR on any
# include path. Building it is the check that no llvm/ or mlir/ header has
# entered lib/ or runtime/ (`make test` makes that check with GCC:
# check-runtime-gcc). Same compiler and flags as the full build, so ccache
# serves its objects from build/.
RUNTIME_BUILD_DIR ?= build-runtime
RUNTIME_CMAKE_FLAGS ?=
CONFIGURE_RUNTIME = cmake -S . -B $(RUNTIME_BUILD_DIR) -G Ninja \
	-DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_C_COMPILER=$(LLVM_DIR)/bin/clang \
	-DCMAKE_CXX_COMPILER=$(LLVM_DIR)/bin/clang++ \
	-DMTC_BUILD_COMPILER=OFF \
	$(RUNTIME_CMAKE_FLAGS)

# The runtime alone once more, compiled by GCC (docs/building.md): GCC
# refuses what clang accepts as extensions, warns where clang does not, and is
# often the only compiler of a GPU machine. Every warning is an error here.
# `make check-runtime-gcc` builds mtc-run and mtc-unittests (what a GPU
# machine needs, and the unit tests) and runs the unit tests; `make test`
# builds mtc-run alone (test-runtime-gcc); `make build-runtime-gcc` builds
# everything of the runtime-only tree. No object is shared with the clang
# trees: a cold ccache compiles the runtime once more.
RUNTIME_GCC_BUILD_DIR ?= build-runtime-gcc
GCC_CC  ?= gcc
GCC_CXX ?= g++
RUNTIME_GCC_CMAKE_FLAGS ?=
RUNTIME_GCC_TARGETS ?= mtc-run mtc-unittests
CONFIGURE_RUNTIME_GCC = cmake -S . -B $(RUNTIME_GCC_BUILD_DIR) -G Ninja \
	-DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_C_COMPILER=$(GCC_CC) \
	-DCMAKE_CXX_COMPILER=$(GCC_CXX) \
	-DMTC_BUILD_COMPILER=OFF \
	-DMTC_WARNINGS_AS_ERRORS=ON \
	$(RUNTIME_GCC_CMAKE_FLAGS)

# mtc and mtc-run under AddressSanitizer + UndefinedBehaviorSanitizer, run on
# hostile inputs (docs/testing.md, "Sanitised runs"). lib/ and runtime/ (every
# reader of input, the executors, the kernels) and mtc-run are instrumented;
# the compiler side and mtc's command-line layer keep the flags of build/, so
# ccache serves them from there. SANITIZE_LIT_TESTS are
# lit paths (folders or files) of test/, run against the sanitised binaries;
# a test fails on any sanitizer report.
SANITIZE_BUILD_DIR ?= build-asan
SANITIZE ?= address,undefined
SANITIZE_DIRS ?= lib;runtime;tools/mtc-run
SANITIZE_LIT_TESTS ?= test/sanitize test/bundle \
	test/tools/tokenize-errors.test test/tools/tokenize-sft.test \
	test/tools/plan-errors.test test/tools/simulate.test
CONFIGURE_SANITIZE = cmake -S . -B $(SANITIZE_BUILD_DIR) $(FULL_CMAKE_ARGS) \
	"-DMTC_SANITIZE=$(SANITIZE)" "-DMTC_SANITIZE_DIRS=$(SANITIZE_DIRS)" \
	$(CMAKE_FLAGS)

.PHONY: all deps configure build build-runtime run test check-runtime \
	build-runtime-gcc check-runtime-gcc test-runtime-gcc sanitize \
	check-sanitize check-lit check-unit fuzz docs clean format

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	$(CONFIGURE)

configure: deps
	$(CONFIGURE)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

$(RUNTIME_BUILD_DIR)/build.ninja:
	$(CONFIGURE_RUNTIME)

build-runtime: deps $(RUNTIME_BUILD_DIR)/build.ninja
	cmake --build $(RUNTIME_BUILD_DIR) -j $(JOBS)

$(RUNTIME_GCC_BUILD_DIR)/build.ninja:
	$(CONFIGURE_RUNTIME_GCC)

build-runtime-gcc: deps $(RUNTIME_GCC_BUILD_DIR)/build.ninja
	cmake --build $(RUNTIME_GCC_BUILD_DIR) -j $(JOBS)

# The unit tests of lib/ and runtime/ and the mtc-run check: not the
# emulator's suites (label cuda: ASan builds of the kernels, not among
# RUNTIME_GCC_TARGETS, hence their _NOT_BUILT placeholders) nor bench-builds.
check-runtime-gcc: deps $(RUNTIME_GCC_BUILD_DIR)/build.ninja
	cmake --build $(RUNTIME_GCC_BUILD_DIR) -j $(JOBS) --target $(RUNTIME_GCC_TARGETS)
	cd $(RUNTIME_GCC_BUILD_DIR) && ctest --output-on-failure -j $(JOBS) \
		-LE cuda -E '_NOT_BUILT$$|^bench-builds$$'

# What `make test` builds with GCC: mtc-run, so every file of lib/ and
# runtime/ that a GPU machine runs, every warning an error; and the check that
# mtc-run needs nothing of LLVM (mtc-run-deps). The unit tests compiled by GCC
# are `make check-runtime-gcc` (their files are test code; build/ runs them).
test-runtime-gcc: deps $(RUNTIME_GCC_BUILD_DIR)/build.ninja
	cmake --build $(RUNTIME_GCC_BUILD_DIR) -j $(JOBS) --target mtc-run
	cd $(RUNTIME_GCC_BUILD_DIR) && ctest --output-on-failure -R '^mtc-run-deps$$'

$(SANITIZE_BUILD_DIR)/build.ninja:
	$(CONFIGURE_SANITIZE)

sanitize: deps $(SANITIZE_BUILD_DIR)/build.ninja
	cmake --build $(SANITIZE_BUILD_DIR) -j $(JOBS) --target mtc mtc-run

check-sanitize: sanitize
	$(LLVM_DIR)/bin/lit -sv $(addprefix $(SANITIZE_BUILD_DIR)/,$(SANITIZE_LIT_TESTS))

# The main job on the embedded default: train examples/tiny-llama.mt on the
# shipped corpus (data/corpus.txt, two Jane Austen novels) for about three
# minutes on two cores, then print a sample from the trained model.
RUN_DIR ?= $(BUILD_DIR)/run
RUN_FLAGS ?= --steps 600 --batch 8 --seq 128 --lr 2e-3 --warmup 30 \
	--eval-every 100 --seed 1
run: build
	@mkdir -p $(RUN_DIR)
	$(BUILD_DIR)/bin/mtc compile examples/tiny-llama.mt --emit=summary | tail -3
	$(BUILD_DIR)/bin/mtc train examples/tiny-llama.mt --data data/corpus.txt \
		$(RUN_FLAGS) --out $(RUN_DIR)/checkpoint --metrics $(RUN_DIR)/metrics.jsonl \
		--sample-prompt "It is a truth universally acknowledged" --sample-tokens 300

# Everything: the full build; the runtime alone built by GCC
# (test-runtime-gcc, which is also the proof that lib/ and runtime/ build
# without LLVM, MLIR or ANTLR); the sanitised runs on hostile inputs; then
# every test of the full build (unit tests, lit tests, bounded fuzzing runs of
# the parsers). `make check-runtime` (the runtime alone with clang) is left
# out: the full build compiles the same files with the same flags and runs
# the same unit tests.
test: build test-runtime-gcc check-sanitize
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

check-runtime: build-runtime
	cd $(RUNTIME_BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

check-lit: build
	cmake --build $(BUILD_DIR) --target check-mtc-lit

check-unit: build
	cmake --build $(BUILD_DIR) --target check-mtc-unit

fuzz: build
	cmake --build $(BUILD_DIR) --target check-mtc-fuzz

# Generated reference: build/docs/Dialects/MtDialect.md, build/docs/Passes/MtcPasses.md.
docs: build
	cmake --build $(BUILD_DIR) --target mlir-doc

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(RUNTIME_BUILD_DIR) $(RUNTIME_GCC_BUILD_DIR) \
		$(SANITIZE_BUILD_DIR)
