# The two entry points (see README): `make tour` and `make test`.
CARGO ?= cargo

.PHONY: tour test test-rust test-c test-run test-compat test-valgrind test-stalls compat bench header

tour:
	$(CARGO) run --release -q -p linger --example tour

# Each part in turn, with its time (CI keeps the whole under ~15 minutes).
TEST_PARTS = test-rust test-c test-run test-compat test-valgrind
test:
	@for t in $(TEST_PARTS); do \
		s=$$(date +%s); \
		$(MAKE) --no-print-directory $$t || exit 1; \
		echo "make test: $$t passed in $$(( $$(date +%s) - s )) s"; \
	done

test-rust:
	$(CARGO) test --release --workspace

test-c:
	bash tests/c/run.sh

# Unmodified programs under linger-run: each behaviour of tests/run/*.c must
# be the same plainly, under --slice 20us, via LD_PRELOAD and unsliced.
test-run:
	bash tests/run/run.sh

# Real upstream test suites, plain and under linger-run --slice 20us (the
# harsher slice), compared test by test: the CI subsets. `make compat` runs
# the full sets under 100us and 20us.
test-compat:
	bash compat/gnulib.sh --subset --check --modes "plain 20us"
	bash compat/python/regrtest.sh --subset --check --modes "plain 20us"

compat:
	bash compat/gnulib.sh --full
	bash compat/python/regrtest.sh --full

# The runtime leaks nothing across completion, panic, cancellation (unwound
# and reclaimed) and stack overflow; valgrind also checks every access.
test-valgrind:
	$(CARGO) build --release -q -p linger --example leakcheck
	RUST_BACKTRACE=0 valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
		--error-exitcode=99 --suppressions=valgrind/linger.supp \
		target/release/examples/leakcheck 30
	@echo "valgrind: leakcheck clean"
	LINGER_VALGRIND=1 LINGER_NO_STATIC=1 bash tests/c/run.sh

# The Rust and C tests, ROUNDS times, on a machine made noisy by
# tests/stalls/stall.c (random stalls of up to STALL_US on every CPU, as a
# busy VM host gives): catches tests that assume a deadline cannot come early
# in a function's run. Not part of `make test`: several minutes, and root.
ROUNDS ?= 3
STALL_US ?= 1500
test-stalls:
	mkdir -p target
	$(CC) -O2 -pthread -o target/stall tests/stalls/stall.c
	$(CARGO) build --release -q --workspace --tests
	@target/stall $(STALL_US) & pid=$$!; trap "kill $$pid" EXIT; \
	for r in $$(seq 1 $(ROUNDS)); do \
		echo "== round $$r of $(ROUNDS) under stalls of up to $(STALL_US) us"; \
		$(CARGO) test --release -q --workspace >target/stalls-rust.log 2>&1 || { tail -40 target/stalls-rust.log; exit 1; }; \
		bash tests/c/run.sh || exit 1; \
	done

# linger-run is needed by the benchmark's "run" section (real programs).
bench:
	$(CARGO) build --release -p linger-run
	$(CARGO) run --release -p linger-bench -- --write-docs

header:
	LINGER_UPDATE_HEADER=1 $(CARGO) build -p linger
