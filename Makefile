# Thin wrappers over CMake/CTest. The two commands a fresh machine needs:
#   make run    build, install the default model, and run a function call on it
#   make test   build and run every test
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
VENV := $(BUILD)/venv
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 60

.PHONY: all deps build install venv model run test test-unit test-asan bench plot fuzz fuzz-text fuzz-input llama-cpp clean \
	cross cross-deps cross-aarch64 cross-armv7 cross-i686 cross-x86 test-i686

all: build

deps:
	@scripts/install_deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Headers, libfgemma.so (C ABI), libfgemma_cpp.a (C++ API), the JNI library and jar, the CLI,
# a CMake package and pkg-config files under PREFIX (docs/bindings.md).
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

venv: deps
	@scripts/setup_venv.sh $(VENV) scripts/requirements-bench.txt

model: venv
	@mkdir -p $(BUILD) && scripts/model_path.sh $(VENV) > $(BUILD)/model_path.txt
	@echo "model: $$(cat $(BUILD)/model_path.txt)"

run: build model
	@m=$$(cat $(BUILD)/model_path.txt); set -e; \
	echo "== fgemma --help"; $(BUILD)/fgemma --help; \
	echo "== fgemma inspect (first lines)"; $(BUILD)/fgemma inspect "$$m" | head -30; \
	echo "== fgemma run (greedy)"; \
	$(BUILD)/fgemma run -m "$$m" -p "Turn the light on in the kitchen, please." -n 32 --temp 0 -v; \
	echo "== fgemma call (examples/smart_home.json, grammar-constrained, greedy, the shipped call adapter)"; \
	FGEMMA_MODEL="$$m" $(BUILD)/fgemma call --tools examples/smart_home.json --stats \
	  "Turn the light on in the kitchen, please."; \
	echo "== the same without the adapter (--no-lora): the base model was never taught to call"; \
	FGEMMA_MODEL="$$m" $(BUILD)/fgemma call --no-lora --tools examples/smart_home.json \
	  "Turn the light on in the kitchen, please."

# The real-model tests (label model) run one at a time after the rest: each runs the model on
# 2 threads (-t 2), and two at once on 2 cores take up to 3x as long each, not 2x (a job's
# workers wait for a descheduled thread): on an AVX2 CPU, CallAdapterRealTest's
# AnAppsRequestsAsExamplesOfItsTools took 597 s beside another model test in CI, 202 s alone.
test: build model
	cd $(BUILD) && export FGEMMA_MODEL=$$(cat model_path.txt) FGEMMA_VENV=$(abspath $(VENV)); \
	  rc=0; ctest --output-on-failure -j $(JOBS) -LE model || rc=1; \
	  ctest --output-on-failure -L model || rc=1; exit $$rc

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

test-asan: deps model
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFG_SANITIZE=ON \
	  -DFG_BUILD_BENCHMARKS=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && FGEMMA_MODEL=$$(cat $(abspath $(BUILD))/model_path.txt) \
	  FGEMMA_VENV=$(abspath $(VENV)) ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# The shipped adapters: `fgemma tune` on the project's corpus (data/calls/train.jsonl), on this
# machine's CPU, in stages: the calls (3 epochs: models/fgemma-tune-lora.gguf, where an app's
# `fgemma tune` starts); one epoch of the calls and the tool prior together at a low learning
# rate (docs/tuning.md: the prior's examples diverge at the calls' 1e-3); then the prior ranks
# each request's tool against the rest of its catalog (--prior-negatives), 900 steps and then
# 1,500 more from another seed (models/fgemma-call-lora.gguf, what `fgemma call` applies).
# About 2.5 h in all. Not run by CI; the files are committed.
ADAPTER ?= models/fgemma-call-lora.gguf
TUNE_ADAPTER ?= models/fgemma-tune-lora.gguf
TUNE_FLAGS ?= --epochs 3 --prefix-store 16384 -t 2
PRIOR_FLAGS ?= --objective both --epochs 1 --batch-tokens 64 --lr 5e-5 --prefix-store 16384 -t 2
RANK_FLAGS ?= --objective channel --prior-negatives 64 --batch-tokens 64 --lr 5e-5 \
  --prefix-store 16384 -t 2
adapter: build model
	@mkdir -p $(dir $(ADAPTER))
	$(BUILD)/fgemma tune -m "$$(cat $(BUILD)/model_path.txt)" --data data/calls/train.jsonl \
	  -o $(TUNE_ADAPTER) --checkpoint $(BUILD)/adapter.ckpt --init-lora none $(TUNE_FLAGS)
	$(BUILD)/fgemma tune -m "$$(cat $(BUILD)/model_path.txt)" --data data/calls/train.jsonl \
	  -o $(BUILD)/adapter_prior.gguf --checkpoint $(BUILD)/adapter_prior.ckpt \
	  --init-lora $(TUNE_ADAPTER) $(PRIOR_FLAGS)
	$(BUILD)/fgemma tune -m "$$(cat $(BUILD)/model_path.txt)" --data data/calls/train.jsonl \
	  -o $(BUILD)/adapter_rank1.gguf --checkpoint $(BUILD)/adapter_rank1.ckpt \
	  --init-lora $(BUILD)/adapter_prior.gguf $(RANK_FLAGS) --seed 1 --max-steps 900
	$(BUILD)/fgemma tune -m "$$(cat $(BUILD)/model_path.txt)" --data data/calls/train.jsonl \
	  -o $(ADAPTER) --checkpoint $(BUILD)/adapter_rank2.ckpt \
	  --init-lora $(BUILD)/adapter_rank1.gguf $(RANK_FLAGS) --seed 2 --max-steps 1500

bench: build
	@for b in $(BUILD)/*_benchmark; do echo "== $$b"; $$b --benchmark_min_time=0.2; done

# docs/benchmarks.png from bench/compare.sh results files (-o FILE -l LABEL), one row each.
PLOT_RESULTS ?= bench/results/2026-12-02-Q4_K_M.json
plot: venv
	$(VENV)/bin/python bench/plot.py $(PLOT_RESULTS) -o docs/benchmarks.png

# The fuzz build: clang, libFuzzer with ASan and UBSan on every library (CMake's FG_FUZZ).
FUZZ_CONFIGURE = cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DFG_FUZZ=ON -DFG_WERROR=OFF -DFG_BUILD_TESTS=OFF \
	  -DFG_BUILD_BENCHMARKS=OFF $(CMAKE_FLAGS)

# libFuzzer on the GGUF reader (clang + ASan/UBSan, every library instrumented); new inputs go
# to $(BUILD_FUZZ)/corpus, crashes to $(BUILD_FUZZ)/crash-*.
fuzz:
	$(FUZZ_CONFIGURE)
	cmake --build $(BUILD_FUZZ) --target gguf_reader_fuzz model_lora_fuzz -j $(JOBS)
	mkdir -p $(BUILD_FUZZ)/corpus/gguf_reader $(BUILD_FUZZ)/corpus/model_lora
	cd $(BUILD_FUZZ) && ./gguf_reader_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	  -dict=$(abspath fuzz/gguf.dict) -print_final_stats=1 \
	  corpus/gguf_reader $(abspath fuzz/corpus/gguf_reader)
	cd $(BUILD_FUZZ) && ./model_lora_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
	  -dict=$(abspath fuzz/gguf.dict) -print_final_stats=1 \
	  corpus/model_lora $(abspath fuzz/corpus/model_lora)

# llama.cpp's own tools (llama-bench, llama-cli, llama-completion, llama-server,
# llama-export-lora) from the pinned llama-cpp-python sdist's source, for the benchmarks and the
# LoRA goldens (~15 min on 2 cores; cached; not part of `make test`).
llama-cpp:
	@scripts/build_llama_cpp.sh $(BUILD)

# FunctionGemma text: the call parser (model output in, calls or a Status out), the tool
# catalog parser/renderer (catalog JSON in) and the call grammar (walks driven by the input).
fuzz-text:
	$(FUZZ_CONFIGURE)
	cmake --build $(BUILD_FUZZ) --target text_call_parser_fuzz text_tool_catalog_fuzz \
	  text_call_grammar_fuzz -j $(JOBS)
	mkdir -p $(BUILD_FUZZ)/corpus/text_call_parser $(BUILD_FUZZ)/corpus/text_tool_catalog \
	  $(BUILD_FUZZ)/corpus/text_call_grammar
	cd $(BUILD_FUZZ) && ./text_call_parser_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	  -dict=$(abspath fuzz/text_call_parser.dict) -print_final_stats=1 \
	  corpus/text_call_parser $(abspath fuzz/corpus/text_call_parser)
	cd $(BUILD_FUZZ) && ./text_tool_catalog_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	  -print_final_stats=1 corpus/text_tool_catalog $(abspath fuzz/corpus/text_tool_catalog)
	cd $(BUILD_FUZZ) && ./text_call_grammar_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=512 \
	  -print_final_stats=1 corpus/text_call_grammar

# Untrusted input the CLI and the server take: `fgemma serve`'s request bodies (chat and
# completions, under small limits), `fgemma tune`'s training data (JSONL, with and without a
# catalog for short-form lines), and a request's words as the typo mender rewrites them.
fuzz-input:
	$(FUZZ_CONFIGURE)
	cmake --build $(BUILD_FUZZ) --target serve_openai_fuzz call_training_data_fuzz \
	  call_typos_fuzz -j $(JOBS)
	mkdir -p $(BUILD_FUZZ)/corpus/serve_openai $(BUILD_FUZZ)/corpus/call_training_data \
	  $(BUILD_FUZZ)/corpus/call_typos
	cd $(BUILD_FUZZ) && ./serve_openai_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	  -dict=$(abspath fuzz/json.dict) -print_final_stats=1 \
	  corpus/serve_openai $(abspath fuzz/corpus/serve_openai)
	cd $(BUILD_FUZZ) && ./call_training_data_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	  -dict=$(abspath fuzz/json.dict) -print_final_stats=1 \
	  corpus/call_training_data $(abspath fuzz/corpus/call_training_data)
	cd $(BUILD_FUZZ) && ./call_typos_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=1024 \
	  -print_final_stats=1 corpus/call_typos $(abspath fuzz/corpus/call_typos)

# Cross builds of every module, the CLI and the tests, running the CROSS_LABELS tests: aarch64 and
# armv7 (NEON) under qemu user-mode emulation (the toolchain's CMAKE_CROSSCOMPILING_EMULATOR, which
# ctest prepends), i686 (-m32) natively, and x86-64 under qemu-x86_64 as older CPUs (one build,
# run once per CROSS_X86_CPUS model: Nehalem has SSE4.2 and no AVX, Haswell AVX2 and no
# AVX-512). Tests that need the real model get it from $(BUILD)/model_path.txt when `make model`
# has written it, and skip with a reason otherwise.
# Extra packages: scripts/install_cross_deps.sh. `make -k cross` keeps going to the other targets
# when one fails.
BUILD_AARCH64 ?= build-aarch64
BUILD_ARMV7 ?= build-armv7
BUILD_I686 ?= build-i686
BUILD_X86 ?= build-x86
CROSS_X86_CPUS ?= Nehalem Haswell
CROSS_LABELS ?= unit
CROSS_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE=Release -DFG_BUILD_BENCHMARKS=OFF $(CMAKE_FLAGS)

cross: cross-aarch64 cross-armv7 cross-i686 cross-x86

cross-deps:
	@scripts/install_cross_deps.sh

# $(call cross_run,build dir,toolchain)
define cross_run
	cmake -S . -B $(1) $(CROSS_FLAGS) -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/$(2).cmake
	cmake --build $(1) -j $(JOBS)
	cd $(1) && FGEMMA_MODEL=$$(cat $(abspath $(BUILD))/model_path.txt 2>/dev/null) \
	  ctest --output-on-failure -j $(JOBS) -L '$(CROSS_LABELS)'
endef

cross-aarch64: cross-deps
	$(call cross_run,$(BUILD_AARCH64),aarch64-linux-gnu)

cross-armv7: cross-deps
	$(call cross_run,$(BUILD_ARMV7),armv7-linux-gnueabihf)

cross-i686: cross-deps
	$(call cross_run,$(BUILD_I686),i686-linux-gnu)

# The emulator (cmake/toolchains/qemu-x86_64-cpu.sh) reads the CPU model from $$QEMU_CPU.
cross-x86:
	@scripts/install_cross_deps.sh x86
	cmake -S . -B $(BUILD_X86) $(CROSS_FLAGS) -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/x86_64-qemu.cmake
	cmake --build $(BUILD_X86) -j $(JOBS)
	set -e; for cpu in $(CROSS_X86_CPUS); do echo "== qemu-x86_64 -cpu $$cpu"; \
	  (cd $(BUILD_X86) && QEMU_CPU=$$cpu FGEMMA_MODEL=$$(cat $(abspath $(BUILD))/model_path.txt 2>/dev/null) \
	    ctest --output-on-failure -j $(JOBS) -L '$(CROSS_LABELS)'); done

# The whole project as a 32-bit x86 process (-m32): every library, the CLI and the unit and e2e
# tests (the footprint target: fgemma must fit a 32-bit address space).
test-i686: cross-deps model
	cmake -S . -B $(BUILD_I686) $(CROSS_FLAGS) -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/i686-linux-gnu.cmake
	cmake --build $(BUILD_I686) -j $(JOBS)
	cd $(BUILD_I686) && FGEMMA_MODEL=$$(cat $(abspath $(BUILD))/model_path.txt) \
	  FGEMMA_VENV=$(abspath $(VENV)) ctest --output-on-failure -j $(JOBS) -L 'unit|e2e'

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ) $(BUILD_AARCH64) $(BUILD_ARMV7) $(BUILD_I686) \
	  $(BUILD_X86)
