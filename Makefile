# The two entry points (see README): `make tour` and `make test`.
CARGO ?= cargo

.PHONY: deps tour test test-rust test-c test-install test-run test-as-safe test-compat test-compat-isolate test-valgrind test-package test-doc test-asan test-stalls compat bench bench-turquoise bench-gotcha bench-green bench-sync header \
	lib install uninstall

# libpng, zlib and sqlite3 headers (the tour's bomb, the isolation tests).
deps:
	@bash scripts/deps.sh

tour: deps
	$(CARGO) run --release -q -p linger --example tour
	$(CARGO) run --release -q -p turquoise --example hol_tour
	$(CARGO) run --release -q -p turquoise --example green_tour
	$(CARGO) run --release -q -p turquoise --example sync_tour

# Each part in turn, with its time (CI keeps the whole under ~15 minutes).
TEST_PARTS = test-rust test-package test-doc test-c test-install test-run test-as-safe test-compat test-valgrind
test: deps
	@for t in $(TEST_PARTS); do \
		s=$$(date +%s); \
		$(MAKE) --no-print-directory $$t || exit 1; \
		echo "make test: $$t passed in $$(( $$(date +%s) - s )) s"; \
	done

# The crates a Rust user depends on, packaged as `cargo publish` would
# and each built from its package alone (against the others' packages):
# a path dependency without a version, a file outside a crate or a
# missing licence fails here.
PUBLISHED = linger-gotcha linger turquoise-macros turquoise
PACKAGE_DIR = $(or $(CARGO_TARGET_DIR),target)/package-check
test-package:
	@# In a target directory of its own, made anew: cargo takes a package
	@# of a registry as unchanged while its version is (the unpacked
	@# sources and the builds of an earlier run would be reused).
	for p in $(PUBLISHED); do rm -rf "$${CARGO_HOME:-$$HOME/.cargo}"/registry/src/-*/$$p-$(VERSION); done
	rm -rf $(PACKAGE_DIR)
	CARGO_TARGET_DIR=$(PACKAGE_DIR) $(CARGO) package --allow-dirty $(addprefix -p ,$(PUBLISHED))
	$(CARGO) check -q -p turquoise --no-default-features --lib --tests

# The published crates' documentation as docs.rs would build it: every
# public item documented, no link that is broken or points at a private
# item, no other rustdoc warning.
test-doc:
	RUSTDOCFLAGS="-D warnings -D missing_docs -D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links" \
		$(CARGO) doc --no-deps $(addprefix -p ,$(PUBLISHED))

# The C libraries first: their crates' tests read the built libraries
# (a workspace test run does not build a cdylib that no test links).
test-rust:
	$(CARGO) build --release -p linger-c -p turquoise-c
	$(CARGO) test --release --workspace

test-c:
	bash tests/c/run.sh

# `make install` into a temporary directory; an example built from it with
# pkg-config, shared and static, must run.
test-install:
	bash tests/c/install.sh

# Unmodified programs under linger-run: each behaviour of tests/run/*.c must
# be the same plainly, under --slice 20us, via LD_PRELOAD and unsliced.
test-run:
	bash tests/run/run.sh

# libas-safe: unmodified C programs whose signal handlers call printf and
# malloc, run with LD_PRELOAD=liblinger_as_safe.so (alone and with
# linger-run): they must finish, handlers must see the siginfo and masks the
# kernel would give them, and no signal may be lost.
test-as-safe:
	bash tests/as-safe/run.sh

# Real upstream test suites, plain and under linger-run --slice 20us (the
# harsher slice), compared test by test: the CI subsets. `make compat` runs
# the full sets under 100us and 20us.
test-compat:
	bash compat/gnulib.sh --subset --check --modes "plain 20us"
	bash compat/python/regrtest.sh --subset --check --modes "plain 20us"

# The same subsets with main()'s libraries isolated (linger-run --isolate
# through LINGER_ISOLATE; with --children in gnulib's shell-script tests,
# the programs they start too): libc itself by default, `ISOLATE=all` for
# every library but libc. Not part of `make test`; docs/compatibility.md.
ISOLATE ?= libc
test-compat-isolate:
	LINGER_ISOLATE=$(ISOLATE) bash compat/gnulib.sh --subset --check --modes "plain 20us"
	LINGER_ISOLATE=$(ISOLATE) bash compat/python/regrtest.sh --subset --check --modes "plain 20us"

compat:
	bash compat/gnulib.sh --full
	bash compat/python/regrtest.sh --full

# The runtime leaks nothing across completion, panic, cancellation (unwound
# and reclaimed) and stack overflow; nor does turquoise's runtime across
# thousands of tasks with timers, channels, locks, TCP and aborts; valgrind
# also checks every access.
test-valgrind:
	$(CARGO) build --release -q -p linger --example leakcheck
	RUST_BACKTRACE=0 valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
		--error-exitcode=99 --suppressions=valgrind/linger.supp \
		target/release/examples/leakcheck 30
	@echo "valgrind: leakcheck clean"
	$(CARGO) build --release -q -p turquoise --example hazards
	RUST_BACKTRACE=0 valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
		--show-possibly-lost=no --error-exitcode=99 --suppressions=valgrind/linger.supp \
		target/release/examples/hazards 1000 2
	@echo "valgrind: turquoise hazards clean"
	$(CARGO) build --release -q -p turquoise --example green_leakcheck
	RUST_BACKTRACE=0 valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
		--show-possibly-lost=no --error-exitcode=99 --suppressions=valgrind/linger.supp \
		target/release/examples/green_leakcheck 40 2
	@echo "valgrind: green threads clean"
	LINGER_VALGRIND=1 LINGER_NO_STATIC=1 bash tests/c/run.sh

# AddressSanitizer on the lock-free reclamation and what it stands on:
# turquoise's hazard pointers (readers flat out while writers retire nodes:
# no use-after-free), fences, event counts, the parking primitives,
# activities and rings (use from green threads, OS threads and tasks at once;
# the sanitizer's leak check included). Nightly, with std rebuilt
# instrumented (-Zbuild-std: the rust-src component, fetched once), in a
# target directory of its own. Not part of `make test`: about 5 minutes
# from cold on 2 cores (4 of them the build), about 1 once built.
ASAN_TARGET_DIR ?= target/asan
test-asan:
	rustup component add rust-src --toolchain nightly
	RUSTFLAGS=-Zsanitizer=address CARGO_TARGET_DIR=$(ASAN_TARGET_DIR) \
		cargo +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu --release -p turquoise \
		--test hazard --test fence --test event_count --test sync --test activities --test ring

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

# The hyper head-of-line benchmark (paper Figure 4) and turquoise's cost per
# poll: about 8 minutes; replaces its section of docs/benchmarks.md.
bench-turquoise:
	$(CARGO) run --release -p turquoise-bench -- --write-docs

# gotcha's library isolation: the libpng decompression bomb (paper Figure 5)
# and the cost of calls into isolated libraries (paper Table 3), about 6
# minutes; replaces section 8 of docs/benchmarks.md (`--quick`: well under
# a minute, stdout only).
bench-gotcha:
	$(CARGO) build --release -p gotcha-bench
	$${CARGO_TARGET_DIR:-target}/release/gotcha-bench --write-docs
	$${CARGO_TARGET_DIR:-target}/release/gotcha-bench --libc --write-docs

# Issue 12's benchmarks of green threads (turquoise::thread): seed 002's
# web server (a green thread per connection against pthreads, an epoll loop,
# tokio and Go, 100 to 10,000 connections, with and without 1% long
# requests) and microbenchmarks against goroutines and pthreads; about 30
# minutes; replaces section 9 of docs/benchmarks.md (`--quick`: well under a
# minute, stdout only). Go is built from crates/green-bench/go with `go
# build`, or skipped when `go` is missing.
bench-green:
	$(CARGO) build --release -p green-bench
	$${CARGO_TARGET_DIR:-target}/release/green-bench --write-docs

# Issue 13's benchmarks of turquoise::sync: event counts against Concurrency
# Kit's ck_ec (crates/sync-bench/c/ck_bench.c, built with `cc ... -lck` when
# the benchmark runs; needs libck-dev, else the ck columns are skipped with
# a note: `apt-get install libck-dev`), asymmetric fences, locks and
# channels against std, parking_lot, crossbeam, tokio and Go (built from
# crates/sync-bench/go with `go build`, skipped when `go` is missing); about
# 2 minutes; replaces section 10 of docs/benchmarks.md (`--quick`: a few
# seconds, stdout only).
bench-sync:
	$(CARGO) build --release -p sync-bench
	$${CARGO_TARGET_DIR:-target}/release/sync-bench --write-docs

# include/linger.h and include/turquoise.h from the C API sources (cbindgen
# runs here only, not in linger's or turquoise's build).
header:
	$(CARGO) run -q -p linger-headers

# The C library. `make lib` builds it in the tree: target/release/liblinger.so
# (soname liblinger.so.MAJOR, set in crates/linger-c/build.rs) and liblinger.a,
# plus the soname link that programs linked in the tree load, and
# linger-uninstalled.pc for pkg-config. `make install` copies it out (without
# building when it is built already, so that `sudo make install` needs no
# cargo); `make uninstall` removes what it installed.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml)
SONAME := liblinger.so.$(firstword $(subst ., ,$(VERSION)))
REALNAME := liblinger.so.$(VERSION)
# libturquoise (green threads for C): carries linger, so a program links one.
TSONAME := libturquoise.so.$(firstword $(subst ., ,$(VERSION)))
TREALNAME := libturquoise.so.$(VERSION)
# What liblinger.a needs from the system, as `cargo rustc -p linger-c
# --crate-type staticlib -- --print native-static-libs` reports it (less -lc).
LIBS_PRIVATE := -lgcc_s -lutil -lrt -lpthread -lm -ldl
# Cargo's output, wherever CARGO_TARGET_DIR puts it.
REL := $(or $(CARGO_TARGET_DIR),target)/release
# The uninstalled .pc files' libdir: relative to the tree (${prefix}) when
# the target directory is in it.
REL_PC := $(if $(filter /%,$(REL)),$(REL),$${prefix}/$(REL))
# Installed libraries lose their debug information (10.9 and 16.7 MB to
# about 1.8 and 2.3 MB) and keep their symbol tables (backtraces, and
# the names linger's rules match); INSTALL_STRIP=0 keeps everything.
STRIP ?= strip
INSTALL_STRIP ?= 1
strip_debug = $(if $(filter 1,$(INSTALL_STRIP)),$(STRIP) --strip-debug $(1),true)
# linger.pc with prefix $(1), libdir $(2), includedir $(3), into $(4) (from
# template $(5), linger's by default).
pc = sed -e 's|@prefix@|$(1)|' -e 's|@libdir@|$(2)|' -e 's|@includedir@|$(3)|' \
	-e 's|@version@|$(VERSION)|' -e 's|@libs_private@|$(LIBS_PRIVATE)|' \
	$(or $(5),crates/linger/linger.pc.in) >$(4)

lib:
	$(CARGO) build --release -p linger-c -p turquoise-c
	ln -sf liblinger.so $(REL)/$(SONAME)
	ln -sf libturquoise.so $(REL)/$(TSONAME)
	$(call pc,$(CURDIR),$(REL_PC),$${prefix}/include,$(REL)/linger-uninstalled.pc)
	$(call pc,$(CURDIR),$(REL_PC),$${prefix}/include,$(REL)/turquoise-uninstalled.pc,crates/turquoise/turquoise.pc.in)

$(REL)/liblinger.so $(REL)/liblinger.a $(REL)/libturquoise.so $(REL)/libturquoise.a:
	$(MAKE) --no-print-directory lib

# libdir and includedir are written relative to ${prefix} when they are under
# it, so that `pkg-config --define-prefix` can relocate a DESTDIR copy.
install: $(REL)/liblinger.so $(REL)/liblinger.a $(REL)/libturquoise.so $(REL)/libturquoise.a
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(REL)/liblinger.so $(DESTDIR)$(LIBDIR)/$(REALNAME)
	$(call strip_debug,$(DESTDIR)$(LIBDIR)/$(REALNAME))
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/liblinger.so
	install -m 644 $(REL)/liblinger.a $(DESTDIR)$(LIBDIR)/liblinger.a
	$(call strip_debug,$(DESTDIR)$(LIBDIR)/liblinger.a)
	install -m 644 include/linger.h $(DESTDIR)$(INCLUDEDIR)/linger.h
	$(call pc,$(PREFIX),$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR)),$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR)),$(DESTDIR)$(PKGCONFIGDIR)/linger.pc)
	install -m 755 $(REL)/libturquoise.so $(DESTDIR)$(LIBDIR)/$(TREALNAME)
	$(call strip_debug,$(DESTDIR)$(LIBDIR)/$(TREALNAME))
	ln -sf $(TREALNAME) $(DESTDIR)$(LIBDIR)/$(TSONAME)
	ln -sf $(TSONAME) $(DESTDIR)$(LIBDIR)/libturquoise.so
	install -m 644 $(REL)/libturquoise.a $(DESTDIR)$(LIBDIR)/libturquoise.a
	$(call strip_debug,$(DESTDIR)$(LIBDIR)/libturquoise.a)
	install -m 644 include/turquoise.h $(DESTDIR)$(INCLUDEDIR)/turquoise.h
	$(call pc,$(PREFIX),$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR)),$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR)),$(DESTDIR)$(PKGCONFIGDIR)/turquoise.pc,crates/turquoise/turquoise.pc.in)
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null; then ldconfig || true; fi

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/liblinger.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
		$(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/liblinger.a \
		$(DESTDIR)$(INCLUDEDIR)/linger.h $(DESTDIR)$(PKGCONFIGDIR)/linger.pc \
		$(DESTDIR)$(LIBDIR)/libturquoise.so $(DESTDIR)$(LIBDIR)/$(TSONAME) \
		$(DESTDIR)$(LIBDIR)/$(TREALNAME) $(DESTDIR)$(LIBDIR)/libturquoise.a \
		$(DESTDIR)$(INCLUDEDIR)/turquoise.h $(DESTDIR)$(PKGCONFIGDIR)/turquoise.pc
