# Thin wrapper over CMake: `make` builds build/mlwatch.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all test asan fuzz clean format lint image

all:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: all
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMLWATCH_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	ctest --test-dir build-asan --output-on-failure -j $(JOBS)

# libFuzzer targets (clang).
fuzz:
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLWATCH_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS)

# The container image (OCI archive in build/image/; docs/deploy-image.md).
image:
	scripts/build-image.sh

format:
	git ls-files '*.c' '*.h' '*.cc' | xargs clang-format -i

lint:
	scripts/lint.sh

clean:
	rm -rf build build-asan build-fuzz
