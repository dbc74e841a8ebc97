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

.PHONY: all deps build venv model run test test-unit test-asan bench fuzz clean

all: build

deps:
	@scripts/install_deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

venv: deps
	@scripts/setup_venv.sh $(VENV)

model: venv
	@mkdir -p $(BUILD) && scripts/model_path.sh $(VENV) > $(BUILD)/model_path.txt
	@echo "model: $$(cat $(BUILD)/model_path.txt)"

run: build model
	@m=$$(cat $(BUILD)/model_path.txt); set -e; \
	echo "== fgemma --help"; $(BUILD)/fgemma --help; \
	echo "== fgemma inspect (first lines)"; $(BUILD)/fgemma inspect "$$m" | head -30; \
	echo "== fgemma run (greedy)"; \
	$(BUILD)/fgemma run -m "$$m" -p "Turn the light on in the kitchen, please." -n 32 --temp 0 -v; \
	echo "== fgemma call: function calling lands with issue 5 (FunctionGemma prompts, parser, grammar); not yet"

test: build model
	cd $(BUILD) && FGEMMA_MODEL=$$(cat model_path.txt) FGEMMA_VENV=$(abspath $(VENV)) \
	  ctest --output-on-failure -j $(JOBS)

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

test-asan: deps model
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFG_SANITIZE=ON \
	  -DFG_BUILD_BENCHMARKS=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && FGEMMA_MODEL=$$(cat $(abspath $(BUILD))/model_path.txt) \
	  FGEMMA_VENV=$(abspath $(VENV)) ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

bench: build
	@for b in $(BUILD)/*_benchmark; do echo "== $$b"; $$b --benchmark_min_time=0.2; done

# libFuzzer on the GGUF reader (clang + ASan/UBSan, every library instrumented); new inputs go
# to $(BUILD_FUZZ)/corpus, crashes to $(BUILD_FUZZ)/crash-*.
fuzz:
	cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DFG_FUZZ=ON -DFG_WERROR=OFF -DFG_BUILD_TESTS=OFF \
	  -DFG_BUILD_BENCHMARKS=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_FUZZ) --target gguf_reader_fuzz -j $(JOBS)
	mkdir -p $(BUILD_FUZZ)/corpus/gguf_reader
	cd $(BUILD_FUZZ) && ./gguf_reader_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	  -dict=$(abspath fuzz/gguf.dict) -print_final_stats=1 \
	  corpus/gguf_reader $(abspath fuzz/corpus/gguf_reader)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
