#!/usr/bin/env bash
# Runs gnulib's upstream unit tests with each test program's main() inside a
# linger preemptible function (linger-run) and compares every test's outcome
# with a plain run: the real-program proof that preemption at arbitrary points
# is invisible to unmodified programs (the libinger thesis did the same).
#
#   compat/gnulib.sh [--subset | --full] [options]
#
# Sets (a gnulib "testdir" made by gnulib-tool --create-testdir):
#   --subset   (default) ~100 tests over signals, sleeping, select/poll, pipes,
#              fork/exec/posix_spawn, threads, locale/iconv, stdio, strings,
#              math; what CI runs as `compat/gnulib.sh --subset --check`
#   --full     every POSIX module of gnulib (gnulib's posix-modules list) plus
#              the non-POSIX modules whose tests exercise processes, pipes,
#              threads, signals, stack overflow and formatted output (~700 tests)
#
# Each test runs once per mode; the modes are (default) `plain 100us 20us`:
#   plain      the test as the automake harness runs it
#   DURATION   under `linger-run --slice DURATION --children --`, so the test
#              and every program it starts (shell-script tests) are preempted
#              every DURATION and resumed at once
#
# Options:
#   --check          exit 1 if any test's outcome in a sliced mode differs from
#                    the plain run (tests that are flaky in the plain run itself
#                    are reported but do not count)
#   --modes "M..."   the modes, first one the baseline (default "plain 100us 20us")
#   --tests "T..."   only these tests (names as in TESTS: test-foo, test-bar.sh)
#   --reruns N       rerun each differing test N more times in plain and in the
#                    differing mode, to tell flaky-in-plain from ours (default 3)
#   --timeout S      time limit per test in seconds (default 300); a test that
#                    hits it is recorded as TIMEOUT
#   --jobs N         parallel build jobs and parallel tests (default: nproc)
#   --rebuild        throw away the cached testdir and build it again
#   --no-locales     do not generate the locales the tests look for (fr_FR,
#                    fr_FR.UTF-8, ja_JP.EUC-JP, zh_CN.GB18030, tr_TR.UTF-8,
#                    en_US.UTF-8; generated with localedef when running as root)
#   --no-install     do not apt-get install missing tools (fail instead)
#
# Environment:
#   LINGER_RUN_DIR=dir  use dir/linger-run and dir/liblinger_run.so and skip
#                       the cargo build (default: cargo build --release -p
#                       linger-run, then target/release)
#   GNULIB_JOBS, GNULIB_TEST_TIMEOUT, GNULIB_RERUNS  defaults of the options
#
# What it does, from a fresh Debian machine (CI runs as root):
#   1. installs what is missing with apt-get: gnulib, autoconf, automake, gperf, make,
#      gcc, patch, locales, ... (only the packages whose commands are missing);
#   2. generates the test locales (when root and missing);
#   3. creates the testdir with gnulib-tool --create-testdir --single-configure
#      under target/compat/gnulib/SET/src, configures it and builds it with
#      make -jN. Each step is cached with a stamp (set, module list, gnulib
#      version, compiler, locales): a rerun only runs the tests;
#   4. builds linger-run (cargo build --release -p linger-run) and copies
#      linger-run + liblinger_run.so to target/compat/gnulib/bin, so that a
#      rebuild during the run does not change the binary under test;
#   5. per mode, runs `make check` in the testdir's gltests/ with the automake
#      parallel harness; LOG_COMPILER is a wrapper (target/compat/gnulib/bin/
#      run-test) that applies the time limit, runs .sh tests with `sh` as
#      gnulib's patched test-driver does, and adds linger-run in sliced modes
#      (with --stats, to count the preemptions each test actually took).
#      The outcome of each test is read from its .trs file; its log is kept in
#      target/compat/gnulib/SET/results/MODE/;
#   6. reruns the tests that differ (--reruns) and classifies each difference.
#
# Output:
#   progress: one line per test and mode: `[20us 37/101] PASS test-poll`
#   target/compat/gnulib-SET.tsv          test, outcome per mode (PASS, FAIL,
#        SKIP, XFAIL, XPASS, ERROR, TIMEOUT, MISSING), then the number of
#        preemptions per sliced mode (summed over the test's processes), then
#        the wall time of each run in milliseconds
#   target/compat/gnulib-SET-summary.txt  timings, totals per mode, every
#        difference from the plain run with its reruns, tests failing in plain
#   (with --tests: gnulib-SET-partial.tsv and gnulib-SET-partial-summary.txt)
# The last line is `gnulib-SET: N passed, M failed`: N tests whose outcome is
# the same in every mode, M tests that differ (flaky-in-plain ones excluded).
#
# Paths with white space are not supported (autotools and the harness's
# LOG_COMPILER do not quote them).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
script="$root/compat/gnulib.sh"

# ---------------------------------------------------------------------------
# Module lists.

# The CI subset. Every module brings its own tests and those of the modules it
# depends on; the comment says what the tests exercise.
subset_modules=(
    # signals
    sigaction sigprocmask pthread_sigmask raise sigpipe
    # sleeping and time
    sleep nanosleep usleep gettimeofday
    # waiting for descriptors
    select pselect poll
    # pipes and descriptors
    pipe-posix pipe2 dup2 fcntl
    # processes: fork, exec, posix_spawn
    posix_spawn posix_spawnp execvp
    # threads
    pthread-thread pthread-mutex pthread-cond pthread-rwlock pthread-once
    pthread-tss lock tls
    # locale and character sets
    setlocale localeconv iconv mbrtowc
    # stdio (snprintf-posix: floating-point formatting, x87 long double)
    snprintf-posix fflush fseeko getline freopen perror
    # strings
    strstr memmem strverscmp strerror_r-posix
    # math
    frexp ldexp exp log sqrt round
    # stack overflow recovery (its own SIGSEGV handler on an alternate stack)
    c-stack
)

# --full: gnulib's own list of POSIX modules plus these.
full_extra_modules=(
    execute spawn-pipe pipe-filter-ii pipe-filter-gi
    c-stack sigsegv
    lock tls thread cond asyncsafe-spin simple-atomic
    striconv striconveh unistr/u8-mbtouc
    vasnprintf-posix xprintf-posix xvasprintf
    quotearg argmatch xstrtol usleep nstrftime timespec
    hash array-list linked-list crc base64 xmemdup0
    fts openat-safer canonicalize tempname
)

# ---------------------------------------------------------------------------
# Options.

usage() { sed -n '2,/^set -euo/p' "$script" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "compat/gnulib.sh: $*" >&2; exit 2; }

set_name=subset
check=0
modes="plain 100us 20us"
only_tests=""
reruns="${GNULIB_RERUNS:-3}"
limit="${GNULIB_TEST_TIMEOUT:-300}"
jobs="${GNULIB_JOBS:-$(nproc)}"
rebuild=0
locales=1
install=1
while [ $# -gt 0 ]; do
    case "$1" in
        --subset) set_name=subset ;;
        --full) set_name=full ;;
        --check) check=1 ;;
        --modes) modes="${2:?--modes needs a value}"; shift ;;
        --tests) only_tests="${2:?--tests needs a value}"; shift ;;
        --reruns) reruns="${2:?--reruns needs a value}"; shift ;;
        --timeout) limit="${2:?--timeout needs a value}"; shift ;;
        --jobs) jobs="${2:?--jobs needs a value}"; shift ;;
        --rebuild) rebuild=1 ;;
        --no-locales) locales=0 ;;
        --no-install) install=0 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
    shift
done
read -r -a mode_list <<<"$modes"
[ "${#mode_list[@]}" -ge 1 ] || die "--modes is empty"
[ "${mode_list[0]}" = plain ] || die "the first mode must be plain (the baseline)"
for m in "${mode_list[@]:1}"; do
    [[ "$m" =~ ^[0-9]+(ns|us|ms|s)$ ]] || die "mode $m is neither plain nor a duration like 20us"
done
[[ "$reruns" =~ ^[0-9]+$ ]] || die "--reruns takes a number"
[[ "$limit" =~ ^[0-9]+$ ]] || die "--timeout takes a number of seconds"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs takes a positive number"
[[ "$root" =~ [[:space:]] ]] && die "the checkout path contains white space: $root"

out="$root/target/compat"
base="$out/gnulib"
work="$base/$set_name"
src="$work/src"
bin="$base/bin"
mkdir -p "$work" "$bin"

say() { printf '%s\n' "$*"; }
now() { date +%s; }
elapsed() { local s=$(( $(now) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
export FORCE_UNSAFE_CONFIGURE=1 # configure refuses to run as root without it

# ---------------------------------------------------------------------------
# 1. Tools.

ensure_tools() {
    # command -> Debian package
    local -A need=(
        [gnulib-tool]=gnulib [autoconf]=autoconf [automake]=automake
        [aclocal]=automake [m4]=m4 [make]=make [gcc]=gcc [patch]=patch
        [perl]=perl-base [timeout]=coreutils [cmp]=diffutils [diff]=diffutils
        [sha256sum]=coreutils [localedef]=locales [iconv]=libc-bin
        [gperf]=gperf
    )
    local missing=() cmd
    for cmd in "${!need[@]}"; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
    done
    # The C library headers, and the locale sources localedef reads.
    if command -v dpkg >/dev/null 2>&1; then
        dpkg -s libc6-dev >/dev/null 2>&1 || missing+=(libc6-dev)
    fi
    [ "$locales" = 0 ] || [ -d /usr/share/i18n/locales ] || missing+=(locales)
    [ ${#missing[@]} -eq 0 ] && return 0
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    [ "$install" = 1 ] || die "missing packages: ${missing[*]} (and --no-install)"
    [ "$(id -u)" = 0 ] || die "missing packages: ${missing[*]}; run as root or install them"
    command -v apt-get >/dev/null 2>&1 || die "missing packages: ${missing[*]} (and no apt-get)"
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# 2. Locales: the tests use these when configure finds them and skip otherwise.
# name as `locale -a` prints it : localedef arguments
test_locales=(
    "fr_FR:-i fr_FR -f ISO-8859-1 fr_FR"
    "fr_FR.utf8:-i fr_FR -f UTF-8 fr_FR.UTF-8"
    "ja_JP.eucjp:-i ja_JP -f EUC-JP ja_JP.EUC-JP"
    "zh_CN.gb18030:-i zh_CN -f GB18030 zh_CN.GB18030"
    "tr_TR.utf8:-i tr_TR -f UTF-8 tr_TR.UTF-8"
    "en_US.utf8:-i en_US -f UTF-8 en_US.UTF-8"
)
ensure_locales() {
    [ "$locales" = 1 ] || return 0
    local have entry name args
    have="$(locale -a 2>/dev/null || true)"
    for entry in "${test_locales[@]}"; do
        name="${entry%%:*}"
        args="${entry#*:}"
        grep -qx "$name" <<<"$have" && continue
        if [ "$(id -u)" != 0 ]; then
            say "note: locale $name is missing (not root: its tests will skip)"
            continue
        fi
        say "generating locale $name"
        # shellcheck disable=SC2086 # args is a word list
        localedef $args 2>/dev/null || [ $? -eq 1 ] # 1 = warnings only
    done
}

# ---------------------------------------------------------------------------
# 3. The testdir.

gnulib_dir() { dirname "$(readlink -f "$(command -v gnulib-tool)")"; }

modules() {
    if [ "$set_name" = full ]; then
        "$(gnulib_dir)/posix-modules"
        printf '%s\n' "${full_extra_modules[@]}"
    else
        printf '%s\n' "${subset_modules[@]}"
    fi | sed '/^$/d' | sort -u
}

gnulib_version() {
    dpkg-query -W -f='${Version}' gnulib 2>/dev/null || gnulib-tool --version | head -1
}

# Creates, configures and builds the testdir; every step is skipped when its
# stamp matches.
this_run=""
build_testdir() {
    local t0 key ckey fresh=0
    key="$( { echo "$set_name"; modules; gnulib_version; } | sha256sum | cut -c1-16)"
    ckey="$( { echo "$key"; gcc --version | head -1; locale -a 2>/dev/null; } | sha256sum | cut -c1-16)"
    if [ "$rebuild" = 1 ] || [ "$(cat "$work/created.stamp" 2>/dev/null)" != "$key" ]; then
        rm -rf "$src" "$src.tmp" "$work/created.stamp" "$work/configured.stamp" "$work/config.cache"
        say "creating the $set_name testdir with gnulib-tool ($(modules | wc -l) modules; the slow step)"
        t0=$(now)
        # gnulib-tool configures the new tree once to generate sources; share
        # that configure's cache with ours (CONFIG_SITE sets cache_file).
        printf 'cache_file=%s\n' "$work/config.cache" >"$work/config.site"
        mapfile -t mods < <(modules)
        # Under bash gnulib-tool caches modules in associative arrays and uses
        # printf for echo (under dash it forks `cat` for every echo): faster.
        if ! CONFIG_SITE="$work/config.site" bash "$(gnulib_dir)/gnulib-tool" \
            --create-testdir --dir="$src.tmp" \
            --single-configure "${mods[@]}" >"$work/create.log" 2>&1; then
            tail -n 30 "$work/create.log" >&2
            die "gnulib-tool failed; see $work/create.log"
        fi
        mv "$src.tmp" "$src"
        echo "$key" >"$work/created.stamp"
        echo "create $(elapsed "$t0")" >"$work/timing-create"
        this_run+=" create $(elapsed "$t0"),"
        say "created in $(elapsed "$t0")"
    fi
    if [ "$(cat "$work/configured.stamp" 2>/dev/null)" != "$ckey" ]; then
        say "configuring"
        t0=$(now)
        [ -f "$work/config.site" ] || printf 'cache_file=%s\n' "$work/config.cache" >"$work/config.site"
        if ! (cd "$src" && CONFIG_SITE="$work/config.site" ./configure -q) >"$work/configure.log" 2>&1; then
            tail -n 30 "$work/configure.log" >&2
            die "configure failed; see $work/configure.log"
        fi
        echo "$ckey" >"$work/configured.stamp"
        echo "configure $(elapsed "$t0")" >"$work/timing-configure"
        this_run+=" configure $(elapsed "$t0"),"
        fresh=1
        say "configured in $(elapsed "$t0")"
    fi
    say "building (make -j$jobs)"
    t0=$(now)
    if ! make -C "$src" -j"$jobs" >"$work/build.log" 2>&1; then
        tail -n 30 "$work/build.log" >&2
        die "the build failed; see $work/build.log"
    fi
    [ "$fresh" = 1 ] && echo "build $(elapsed "$t0")" >"$work/timing-build"
    this_run+=" build $(elapsed "$t0")"
    say "built in $(elapsed "$t0")"
}

# The harness's list of tests (TESTS in gltests/Makefile).
list_tests() {
    printf 'print-tests:\n\t@echo $(TESTS)\n' >"$work/print-tests.mk"
    make -s -C "$src/gltests" -f Makefile -f "$work/print-tests.mk" print-tests | tr ' ' '\n' | sed '/^$/d'
}

# ---------------------------------------------------------------------------
# 4. linger-run.

ensure_linger_run() {
    local dir
    if [ -n "${LINGER_RUN_DIR:-}" ]; then
        dir="$(cd "$LINGER_RUN_DIR" && pwd)"
    else
        command -v cargo >/dev/null || die "cargo not found (or set LINGER_RUN_DIR)"
        say "building linger-run (cargo build --release -p linger-run)"
        (cd "$root" && cargo build --release -q -p linger-run)
        dir="$root/target/release"
    fi
    for f in linger-run liblinger_run.so; do
        [ -f "$dir/$f" ] || die "missing $dir/$f"
    done
    # A private copy: the binary under test cannot change in the middle of a run.
    cp "$dir/linger-run" "$dir/liblinger_run.so" "$bin/"
}

# The LOG_COMPILER of the harness: `run-test PROGRAM [ARGS...]`, configured by
# COMPAT_* variables (the harness splits LOG_COMPILER on spaces, so the mode
# travels in the environment).
write_wrapper() {
    cat >"$bin/run-test" <<'EOF'
#!/usr/bin/env bash
# Written by compat/gnulib.sh: the automake harness's LOG_COMPILER.
#   COMPAT_SLICE=plain|DURATION  COMPAT_TIMEOUT=seconds
#   COMPAT_LINGER_RUN=path  COMPAT_STATS_DIR=dir (sliced modes)
set -u
# gnulib's patched test-driver runs *.sh tests with sh; so do we.
case "$1" in
    *.sh) cmd=(sh "$@") ;;
    *) cmd=("$@") ;;
esac
name="$(basename "$1")"
if [ "$COMPAT_SLICE" != plain ]; then
    rm -f "$COMPAT_STATS_DIR/$name"
    cmd=("$COMPAT_LINGER_RUN" --slice "$COMPAT_SLICE" --children
         --stats="$COMPAT_STATS_DIR/$name" -- "${cmd[@]}")
fi
start=$SECONDS
t0=$(date +%s%N)
timeout -k 10 "$COMPAT_TIMEOUT" "${cmd[@]}"
rc=$?
echo $(( ($(date +%s%N) - t0) / 1000000 )) >"$COMPAT_STATS_DIR/$name.ms"
if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ $((SECONDS - start)) -ge "$COMPAT_TIMEOUT" ]; then
    echo "compat/gnulib.sh: TIMEOUT: killed after ${COMPAT_TIMEOUT}s" >&2
fi
exit $rc
EOF
    chmod +x "$bin/run-test"
}

# ---------------------------------------------------------------------------
# 5. Running.

# run_mode MODE DEST LABEL TEST...: runs the tests through the harness in MODE,
# leaves TEST<TAB>OUTCOME<TAB>PREEMPTIONS<TAB>MILLISECONDS lines in
# DEST/outcomes and the logs in DEST.
run_mode() {
    local mode="$1" dest="$2" label="$3"
    shift 3
    local tests=("$@") t log trs res pre ms n=${#tests[@]}
    rm -rf "$dest"
    mkdir -p "$dest/stats"
    (
        cd "$src/gltests"
        for t in "${tests[@]}"; do rm -f "$t.log" "$t.trs"; done
        COMPAT_SLICE="$mode" COMPAT_TIMEOUT="$limit" COMPAT_LINGER_RUN="$bin/linger-run" \
            COMPAT_STATS_DIR="$dest/stats" \
            make -k -j"$jobs" check TESTS="${tests[*]}" LOG_COMPILER="$bin/run-test" \
            TEST_SUITE_LOG=compat-suite.log 2>&1 |
            awk -v label="$label" -v n="$n" -v raw="$dest/make.log" '
                { print > raw }
                /^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR): / {
                    k++; printf "[%s %d/%d] %s %s\n", label, k, n, substr($1, 1, length($1) - 1), $2
                    fflush()
                }'
    ) || true
    : >"$dest/outcomes"
    for t in "${tests[@]}"; do
        log="$src/gltests/$t.log"
        trs="$src/gltests/$t.trs"
        res=MISSING
        if [ -f "$trs" ]; then
            res="$(sed -n 's/^:test-result: *//p' "$trs" | head -1)"
            [ -n "$res" ] || res=MISSING
        fi
        if [ -f "$log" ]; then
            mkdir -p "$(dirname "$dest/$t.log")"
            cp "$log" "$dest/$t.log"
            [ "$res" = FAIL ] && grep -q '^compat/gnulib.sh: TIMEOUT' "$log" && res=TIMEOUT
        fi
        pre=-
        if [ "$mode" != plain ]; then
            pre="$(awk -F'preemptions=' 'NF > 1 { split($2, a, " "); s += a[1] } END { print s + 0 }' \
                "$dest/stats/$(basename "$t")" 2>/dev/null || echo 0)"
        fi
        ms="$(cat "$dest/stats/$(basename "$t").ms" 2>/dev/null || echo -)"
        printf '%s\t%s\t%s\t%s\n' "$t" "$res" "$pre" "$ms" >>"$dest/outcomes"
    done
}

# ---------------------------------------------------------------------------
# Main.

t_all=$(now)
ensure_tools
ensure_locales
build_testdir
mapfile -t all_tests < <(list_tests)
if [ -n "$only_tests" ]; then
    read -r -a wanted <<<"$only_tests"
    sel=()
    for t in "${wanted[@]}"; do
        printf '%s\n' "${all_tests[@]}" | grep -qxF "$t" || die "no test $t in the $set_name set"
        sel+=("$t")
    done
    all_tests=("${sel[@]}")
fi
[ ${#all_tests[@]} -gt 0 ] || die "no tests found in $src/gltests"
say "$set_name set: ${#all_tests[@]} tests, modes: ${mode_list[*]}, $jobs at a time, limit ${limit}s each"

if [ "${#mode_list[@]}" -gt 1 ]; then ensure_linger_run; fi
write_wrapper

declare -A outcome preempt millis mode_time
results="$work/results"
for m in "${mode_list[@]}"; do
    t0=$(now)
    say "== $m"
    run_mode "$m" "$results/$m" "$m" "${all_tests[@]}"
    mode_time[$m]="$(elapsed "$t0")"
    while IFS=$'\t' read -r t res pre ms; do
        outcome["$m/$t"]="$res"
        preempt["$m/$t"]="$pre"
        millis["$m/$t"]="$ms"
    done <"$results/$m/outcomes"
    say "$m: done in ${mode_time[$m]}"
done

# Differences from the baseline, then reruns.
base_mode="${mode_list[0]}"
differing=()
for t in "${all_tests[@]}"; do
    for m in "${mode_list[@]:1}"; do
        if [ "${outcome["$m/$t"]}" != "${outcome["$base_mode/$t"]}" ]; then
            differing+=("$t")
            break
        fi
    done
done

declare -A rerun_out # mode/test -> space-separated outcomes of the reruns
if [ ${#differing[@]} -gt 0 ] && [ "$reruns" -gt 0 ]; then
    say "== rerunning ${#differing[@]} differing test(s) $reruns times per mode: ${differing[*]}"
    for ((i = 1; i <= reruns; i++)); do
        for m in "${mode_list[@]}"; do
            run_mode "$m" "$results/rerun-$i/$m" "rerun $i $m" "${differing[@]}"
            while IFS=$'\t' read -r t res _ _; do
                rerun_out["$m/$t"]="${rerun_out["$m/$t"]:-}${rerun_out["$m/$t"]:+ }$res"
            done <"$results/rerun-$i/$m/outcomes"
        done
    done
fi

# Results file.
# A run of chosen tests (--tests) does not overwrite the whole set's results.
suffix=""
[ -n "$only_tests" ] && suffix="-partial"
tsv="$out/gnulib-$set_name$suffix.tsv"
{
    printf 'test'
    for m in "${mode_list[@]}"; do printf '\t%s' "$m"; done
    for m in "${mode_list[@]:1}"; do printf '\tpreemptions_%s' "$m"; done
    for m in "${mode_list[@]}"; do printf '\tms_%s' "$m"; done
    printf '\n'
    for t in "${all_tests[@]}"; do
        printf '%s' "$t"
        for m in "${mode_list[@]}"; do printf '\t%s' "${outcome["$m/$t"]}"; done
        for m in "${mode_list[@]:1}"; do printf '\t%s' "${preempt["$m/$t"]}"; done
        for m in "${mode_list[@]}"; do printf '\t%s' "${millis["$m/$t"]}"; done
        printf '\n'
    done
} >"$tsv"

# Summary.
summary="$out/gnulib-$set_name$suffix-summary.txt"
real_diffs=0
flaky_plain=0
{
    echo "gnulib $set_name set: ${#all_tests[@]} tests; gnulib $(gnulib_version); $(uname -sr); $(nproc) CPUs"
    echo "modes: ${mode_list[*]} (sliced: linger-run --slice D --children); $jobs tests at a time; limit ${limit}s per test"
    env | grep '^LINGER_' | sed 's/^/environment: /' || true
    timings=""
    for step in create configure build; do
        [ -f "$work/timing-$step" ] && timings+=" $(cat "$work/timing-$step"),"
    done
    echo "testdir from scratch:${timings%,}; this run:${this_run}"
    echo
    echo "totals (wall time of the run):"
    for m in "${mode_list[@]}"; do
        printf '  %-6s %-7s' "$m" "${mode_time[$m]}"
        for r in PASS FAIL SKIP XFAIL XPASS ERROR TIMEOUT MISSING; do
            c=0
            for t in "${all_tests[@]}"; do [ "${outcome["$m/$t"]}" = "$r" ] && c=$((c + 1)); done
            [ $c -gt 0 ] && printf ' %s=%d' "$r" "$c"
        done
        if [ "$m" != plain ]; then
            p=0 q=0
            for t in "${all_tests[@]}"; do
                p=$((p + ${preempt["$m/$t"]:-0}))
                [ "${preempt["$m/$t"]:-0}" -gt 0 ] && q=$((q + 1))
            done
            printf '  preemptions=%d (in %d tests)' "$p" "$q"
        fi
        printf '\n'
    done
    echo
    if [ ${#differing[@]} -eq 0 ]; then
        echo "differences from $base_mode: none"
    else
        echo "differences from $base_mode (reruns: $reruns per mode):"
        for t in "${differing[@]}"; do
            line="  $t:"
            for m in "${mode_list[@]}"; do
                line+=" $m=${outcome["$m/$t"]}"
                [ -n "${rerun_out["$m/$t"]:-}" ] && line+=" [${rerun_out["$m/$t"]// /,}]"
                if [ "$m" != "$base_mode" ]; then
                    # In how many of this mode's runs the outcome was not the baseline's.
                    k=0 r=0
                    for o in ${outcome["$m/$t"]} ${rerun_out["$m/$t"]:-}; do
                        r=$((r + 1))
                        [ "$o" != "${outcome["$base_mode/$t"]}" ] && k=$((k + 1))
                    done
                    line+=" (differs $k/$r)"
                fi
            done
            # Flaky in plain: the baseline's own outcomes disagree.
            base_all="${outcome["$base_mode/$t"]} ${rerun_out["$base_mode/$t"]:-}"
            if [ "$(tr ' ' '\n' <<<"$base_all" | sed '/^$/d' | sort -u | wc -l)" -gt 1 ]; then
                line+="  -> flaky in $base_mode (not counted)"
                flaky_plain=$((flaky_plain + 1))
            else
                line+="  -> DIFFERS"
                real_diffs=$((real_diffs + 1))
            fi
            echo "$line"
        done
    fi
    bad=()
    for t in "${all_tests[@]}"; do
        case "${outcome["$base_mode/$t"]}" in PASS|SKIP|XFAIL) ;; *) bad+=("$t=${outcome["$base_mode/$t"]}") ;; esac
    done
    echo
    if [ ${#bad[@]} -gt 0 ]; then echo "not passing in $base_mode: ${bad[*]}"; else echo "not passing in $base_mode: none"; fi
    echo "logs: $results/MODE/TEST.log; table: $tsv"
    echo "total time $(elapsed "$t_all")"
} >"$summary"
cat "$summary"
echo "gnulib-$set_name: $(( ${#all_tests[@]} - real_diffs - flaky_plain )) passed, $real_diffs failed"
if [ "$check" = 1 ] && [ "$real_diffs" -gt 0 ]; then
    exit 1
fi
exit 0
