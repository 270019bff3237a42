#!/usr/bin/env bash
# What must keep working inside a preemptible function: runs ordinary,
# self-checking programs (tests/run/*.c, *.cc; each knows nothing of linger)
# plainly and under linger-run, and requires the same outcome everywhere.
#
#   tests/run/run.sh                 everything
#   tests/run/run.sh sig exec cli    only the cases whose name contains one of
#                                    the words ("cli": the linger-run command
#                                    line checks)
#
# Each case runs in four modes:
#   plain    the program alone
#   slice    target/release/linger-run --stats --slice 20us --preempt-blocked
#            -- PROGRAM (main is stopped in its waits too)
#   preload  LD_PRELOAD=.../liblinger_run.so LINGER_RUN_SLICE=50us
#            LINGER_RUN_STATS=1 PROGRAM (waits are left alone, the default)
#   noslice  target/release/linger-run -- PROGRAM (no time limit)
# and passes when the plain run ends as the case expects (exit status or
# signal) and every other mode ends the same way with byte-identical stdout
# and, unless the case says otherwise, stderr (the stats line removed). Cases
# marked pre=N must also report at least N preemptions (the last stats line)
# in the slice and preload modes: proof that main really was interrupted.
# Cases marked waits (a program blocked in one call, tests/run/waits.c) also
# run in a fifth mode,
#   waits    target/release/linger-run --stats --slice 20us -- PROGRAM, with
#            WAIT_MS=1000 (each call blocks for 1 s)
# where the call must use less than 10 ms of CPU time (WAIT_CPU_LIMIT_US,
# checked by the program, also set in every mode but slice) and the stats
# show no deferral storm (fewer than 200 deferrals: a storm is thousands).
#
# Environment:
#   LINGER_TEST_ITERS=N    cap every loop in the programs at N (quick runs)
#   LINGER_TEST_SLACK=K    multiply generous upper time bounds by K
#   LINGER_TEST_TIMEOUT=S  per-run time limit in seconds (default 20)
#   LINGER_RUN_MODES="..." the modes to run (default: plain slice preload noslice)
#   LINGER_RUN_SKIP="..."  skip the cases whose name contains one of the words
#                          (e.g. to loop over the rest: the hanging cases each
#                          cost the full time limit)
#   LINGER_RUN_DIR=dir     use linger-run and liblinger_run.so from dir and skip
#                          the cargo build
#   LINGER_RUN_OUT=dir     where binaries and logs go (default target/run-tests;
#                          give concurrent runs different directories)
#   CC, CXX                compilers (default cc, c++)
#
# Prints one line per run: `ok NAME MODE` or `FAIL NAME MODE (why)` followed
# by the relevant output; ends with `N passed, M failed`; exits 1 if any
# failed. Binaries and every run's stdout/stderr/status go to
# target/run-tests/ (logs/NAME.MODE.{out,err,status}); run.sh needs bash 5
# ($EPOCHREALTIME).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
src="$root/tests/run"
out="${LINGER_RUN_OUT:-$root/target/run-tests}"
logs="$out/logs"
mkdir -p "$out" "$logs"
ulimit -c 0 # no core files from the cases that die of a signal

CC="${CC:-cc}"
CXX="${CXX:-c++}"
CFLAGS=(-Wall -Wextra -Werror -O2 -g -pthread -I"$src")
limit="${LINGER_TEST_TIMEOUT:-20}"
modes=(${LINGER_RUN_MODES:-plain slice preload noslice})
filters=("$@")
started=$SECONDS

skips=(${LINGER_RUN_SKIP:-})
wanted() {
    local w
    for w in "${skips[@]}"; do
        [[ "$1" == *"$w"* ]] && return 1
    done
    [ ${#filters[@]} -eq 0 ] && return 0
    for w in "${filters[@]}"; do
        [[ "$1" == *"$w"* ]] && return 0
    done
    return 1
}

passed=0
failed=0
failed_names=()

pass() {
    echo "ok $1"
    passed=$((passed + 1))
}

# Known differences, each explained in docs/compatibility.md ("Known
# differences"): they still run, are reported as `known NAME MODE (why)` and
# do not fail the run. Remove an entry when its cause is fixed.
declare -A known=(
    [jmp.alarm]="the CPU loop runs inside a signal handler, which linger never preempts"
)
knowns=0

# fail NAME WHY [FILE...]: reports a failure with the tail of each file.
fail() {
    local name="$1" why="$2"
    shift 2
    local key="${name%% *}"
    if [ -n "${known[$key]:-}" ]; then
        echo "known $name ($why): ${known[$key]}"
        knowns=$((knowns + 1))
        return
    fi
    echo "FAIL $name ($why)"
    local f
    for f in "$@"; do
        [ -s "$f" ] || continue
        echo "    ${f#"$root"/}:"
        tail -n 12 "$f" | cut -c1-300 | sed 's/^/    | /'
    done
    failed=$((failed + 1))
    failed_names+=("$name")
}

# ---------------------------------------------------------------- build ----
if [ -n "${LINGER_RUN_DIR:-}" ]; then
    bindir="$(cd "$LINGER_RUN_DIR" && pwd)"
else
    bindir="${CARGO_TARGET_DIR:-$root/target}/release"
    echo "building linger-run (cargo build --release -p linger-run)"
    if ! cargo build --release -q -p linger-run; then
        echo "cargo build --release -p linger-run failed" >&2
        exit 2
    fi
fi
lr="$bindir/linger-run"
lib="$bindir/liblinger_run.so"
for f in "$lr" "$lib"; do
    [ -e "$f" ] || { echo "missing $f" >&2; exit 2; }
done

build_failed=0
# compile OUTPUT COMPILER ARGS...: builds one file; reports a failure.
compile() {
    local name="$1" log="$out/$(basename "$1").build.log"
    shift
    rm -f "$name"
    if ! "$@" -o "$name" >"$log" 2>&1; then
        fail "build $(basename "$name")" "does not compile" "$log"
        build_failed=1
        return 1
    fi
}
compile "$out/launch" "$CC" -Wall -Wextra -Werror -O2 "$src/support/launch.c" || exit 2
compile "$out/libplugin.so" "$CC" -Wall -Wextra -Werror -O2 -shared -fPIC "$src/support/plugin.c" || true
compile "$out/libmarker.so" "$CC" -Wall -Wextra -Werror -O2 -shared -fPIC "$src/support/marker.c" || true
compile "$out/env_probe" "$CC" -Wall -Wextra -Werror -O2 "$src/support/env_probe.c" || true
for f in "$src"/*.c; do
    compile "$out/$(basename "$f" .c)" "$CC" "${CFLAGS[@]}" "$f" -ldl -lm -lrt -lz || true
done
for f in "$src"/*.cc; do
    compile "$out/$(basename "$f" .cc)" "$CXX" "${CFLAGS[@]}" "$f" || true
done

# ------------------------------------------------------------ launching ----
# launch LOGBASE ENV... -- CMD...: runs CMD with the time limit, stdin from
# /dev/null, stdout/stderr/status into LOGBASE.{out,err,status}.
launch() {
    local base="$1"
    shift
    local envs=()
    while [ "$1" != "--" ]; do
        envs+=("$1")
        shift
    done
    shift
    rm -f "$base.out" "$base.err" "$base.status"
    local t0=$EPOCHREALTIME
    "$out/launch" "$limit" "$base.status" "${envs[@]}" "$@" </dev/null >"$base.out" 2>"$base.err" || true
    [ -s "$base.status" ] || echo "launch failed" >"$base.status"
    # wall time of the run, for the report
    took="$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f s", b - a }')"
}

status_of() { cat "$1.status"; }

# stat_of FIELD LOGBASE: a counter of the stats line (the last one wins:
# forked children may print their own first)
stat_of() {
    { grep -E '^linger-run: stats: ' "$2.err" || true; } | tail -n 1 | sed -nE "s/.* $1=([0-9]+).*/\\1/p"
}
preemptions_of() { stat_of preemptions "$1"; }
deferrals_of() { stat_of deferrals "$1"; }

# ---------------------------------------------------------------- cases ----
# case NAME EXPECT OPTIONS PROGRAM [ARGS...]
#   EXPECT   "exit N" or "signal N" (of the plain run; every mode must agree)
#   OPTIONS  comma-separated: pre=N (minimum preemptions in slice/preload),
#            nostderr (stderr not compared), children (linger modes use
#            --children / LINGER_RUN_CHILDREN=1; the program is told so
#            through EXPECT_LINGER_CHILDREN=1), marker (an unrelated library
#            is preloaded in every mode; EXPECT_PRELOAD_MARKER names it),
#            waits (the waits mode too, see the header), isolate (the
#            isolate mode too: linger-run --stats --slice 20us --isolate all;
#            with pre=N, at least N preemptions there, and fewer deadlines
#            deferred than a quarter of them: proof that main was stopped
#            inside its copies of the libraries, not after their calls
#            returned as in the slice mode), isolate-libc (the isolate-libc
#            mode too: --isolate libc, libc itself copied; these C programs
#            use stdout themselves, so their printf stays the program's:
#            the mode checks that output, exit and threads stay right), "-"
run_case() {
    local name="$1" expect="$2" opts="$3" prog="$4"
    shift 4
    local args=("$@")
    wanted "$name" || return 0
    if [ ! -x "$out/$prog" ]; then
        fail "$name" "not built"
        return 0
    fi
    local pre=0 cmp_err=1 children="" marker="" waits="" isolate="" isolate_libc=""
    local o
    IFS=',' read -ra o <<<"$opts"
    for x in "${o[@]}"; do
        case "$x" in
        pre=*) pre="${x#pre=}" ;;
        nostderr) cmp_err="" ;;
        children) children=1 ;;
        marker) marker=1 ;;
        waits) waits=1 ;;
        isolate) isolate=1 ;;
        isolate-libc) isolate_libc=1 ;;
        -) ;;
        *) echo "bad option $x in case $name" >&2; exit 2 ;;
        esac
    done
    # reduced runs (LINGER_TEST_ITERS) only require that preemption happened
    if [ -n "${LINGER_TEST_ITERS:-}" ] && [ "$pre" -gt 1 ]; then pre=1; fi
    local ref="$logs/$name.plain"
    local mode case_modes=("${modes[@]}")
    if [ -n "$waits" ] && [ -z "${LINGER_RUN_MODES:-}" ]; then
        case_modes+=(waits)
    fi
    if [ -n "$isolate" ] && [ -z "${LINGER_RUN_MODES:-}" ]; then
        case_modes+=(isolate)
    fi
    if [ -n "$isolate_libc" ] && [ -z "${LINGER_RUN_MODES:-}" ]; then
        case_modes+=(isolate-libc)
    fi
    for mode in "${case_modes[@]}"; do
        local base="$logs/$name.$mode" envs=() cmd=()
        if [ -n "$marker" ]; then
            envs+=("EXPECT_PRELOAD_MARKER=libmarker.so")
        fi
        if [ -n "$waits" ] && [ "$mode" != slice ]; then
            envs+=("WAIT_CPU_LIMIT_US=10000")
        fi
        case "$mode" in
        isolate)
            cmd=("$lr" --stats --slice 20us --isolate all -- "$out/$prog" "${args[@]}")
            ;;
        isolate-libc)
            # These programs are PIEs holding COPYs of stdout and stderr:
            # linger-run reports them on the stats line (copy_relocated=),
            # never on the program's stderr, which is compared as usual.
            cmd=("$lr" --stats --slice 20us --isolate libc -- "$out/$prog" "${args[@]}")
            ;;
        waits)
            envs+=("WAIT_MS=1000")
            cmd=("$lr" --stats --slice 20us -- "$out/$prog" "${args[@]}")
            ;;
        plain)
            [ -n "$marker" ] && envs+=("LD_PRELOAD=$out/libmarker.so")
            cmd=("$out/$prog" "${args[@]}")
            ;;
        slice | noslice)
            [ -n "$marker" ] && envs+=("LD_PRELOAD=$out/libmarker.so")
            cmd=("$lr")
            [ "$mode" = slice ] && cmd+=(--stats --slice 20us --preempt-blocked)
            [ -n "$children" ] && { cmd+=(--children); envs+=("EXPECT_LINGER_CHILDREN=1"); }
            cmd+=(-- "$out/$prog" "${args[@]}")
            ;;
        preload)
            if [ -n "$marker" ]; then
                envs+=("LD_PRELOAD=$lib:$out/libmarker.so")
            else
                envs+=("LD_PRELOAD=$lib")
            fi
            envs+=(LINGER_RUN_SLICE=50us LINGER_RUN_STATS=1)
            [ -n "$children" ] && envs+=(LINGER_RUN_CHILDREN=1 EXPECT_LINGER_CHILDREN=1)
            cmd=("$out/$prog" "${args[@]}")
            ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
        esac
        launch "$base" "${envs[@]}" -- "${cmd[@]}"
        local st
        st="$(status_of "$base")"
        # stderr without linger-run's own lines: the stats, the note on
        # what held the deadlines, and the one that an exec'd image runs
        # without it
        grep -vE '^linger-run: (stats: |most deadlines waited for code that is not stopped |.* replaces itself with .* \(exec\))' "$base.err" >"$base.err.cmp" || true
        if [ "$mode" = plain ]; then
            if [ "$st" != "$expect" ]; then
                fail "$name plain" "$st, expected $expect; $took" "$base.err" "$base.out"
            else
                pass "$name plain ($took)"
            fi
            continue
        fi
        local why=""
        if [ "$st" != "$expect" ]; then
            why="$st, expected $expect"
        elif [ -f "$ref.out" ] && ! cmp -s "$ref.out" "$base.out"; then
            why="stdout differs from the plain run"
            diff "$ref.out" "$base.out" | head -n 20 >"$base.diff" || true
        elif [ -n "$cmp_err" ] && [ -f "$ref.err.cmp" ] && ! cmp -s "$ref.err.cmp" "$base.err.cmp"; then
            why="stderr differs from the plain run"
            diff "$ref.err.cmp" "$base.err.cmp" | head -n 20 >"$base.diff" || true
        elif [ "$pre" -gt 0 ] && { [ "$mode" = slice ] || [ "$mode" = preload ] || [ "$mode" = isolate ] || [ "$mode" = isolate-libc ]; }; then
            local n d
            n="$(preemptions_of "$base")"
            d="$(deferrals_of "$base")"
            if [ -z "$n" ]; then
                why="no stats line on stderr"
            elif [ "$n" -lt "$pre" ]; then
                why="only $n preemptions (at least $pre expected)"
            elif [ "$mode" = isolate ] && [ $((4 * d)) -ge "$n" ]; then
                why="$d deadlines deferred for $n preemptions: main was not stopped inside its copies"
            fi
        elif [ "$mode" = waits ]; then
            local d
            d="$(deferrals_of "$base")"
            if [ -z "$d" ]; then
                why="no stats line on stderr"
            elif [ "$d" -ge 200 ]; then
                why="a deferral storm: $d deferrals while it waited"
            fi
        fi
        if [ -n "$why" ]; then
            fail "$name $mode" "$why; $took" "$base.diff" "$base.err" "$base.out"
        else
            local note=""
            if [ "$mode" = slice ] || [ "$mode" = preload ] || [ "$mode" = isolate ] || [ "$mode" = isolate-libc ]; then
                local n
                n="$(preemptions_of "$base")"
                [ -n "$n" ] && note=", preemptions=$n, deferrals=$(deferrals_of "$base")"
            elif [ "$mode" = waits ]; then
                note=", deferrals=$(deferrals_of "$base")"
            fi
            pass "$name $mode ($took$note)"
        fi
        rm -f "$base.diff"
    done
}

# ------------------------------------------------------- command line ------
# cli NAME EXPECT STDERR_CHECK CMD...: runs a linger-run command line.
#   STDERR_CHECK: "usage" (exactly one non-empty line, stdout empty),
#   "stats" (exactly one stats line, well formed), "names:WORD" (stderr
#   mentions WORD), "-" (nothing checked)
cli() {
    local name="cli $1" expect="$2" check="$3"
    shift 3
    wanted "$name" || return 0
    local base
    base="$logs/$(echo "$name" | tr -c 'a-zA-Z0-9_.\n-' '_')"
    launch "$base" -- "$@"
    local st why=""
    st="$(status_of "$base")"
    if [[ "$expect" == "nonzero" ]]; then
        [[ "$st" == "exit 0" || "$st" != exit* ]] && why="$st, expected a non-zero exit status"
    elif [ "$st" != "$expect" ]; then
        why="$st, expected $expect"
    fi
    if [ -z "$why" ]; then
        case "$check" in
        usage)
            if [ "$(wc -l <"$base.err")" -ne 1 ] || [ ! -s "$base.err" ]; then
                why="stderr should be exactly one line"
            elif [ -s "$base.out" ]; then
                why="stdout should be empty"
            fi
            ;;
        stats)
            local lines
            lines="$(grep -cE '^linger-run: stats: preemptions=[0-9]+ deferred=[0-9]+ deferrals=[0-9]+ worst_overrun_us=[0-9]+ waits_left=[0-9]+( [a-z_]+=[^ ]+)*$' "$base.err" || true)"
            [ "$lines" = 1 ] || why="expected exactly one well-formed stats line on stderr"
            ;;
        names:*)
            grep -qF -- "${check#names:}" "$base.err" || why="stderr does not mention ${check#names:}"
            ;;
        out:*)
            [ "$(cat "$base.out")" = "${check#out:}" ] || why="stdout is not '${check#out:}'"
            ;;
        -) ;;
        esac
    fi
    if [ -n "$why" ]; then
        fail "$name" "$why" "$base.err" "$base.out"
    else
        pass "$name"
    fi
}

run_cli() {
    local version
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
    cli "bad duration" "exit 2" usage "$lr" --slice bogus -- /bin/true
    cli "zero duration" "exit 2" usage "$lr" --slice 0 -- /bin/true
    cli "zero duration with unit" "exit 2" usage "$lr" --slice 0us -- /bin/true
    cli "negative duration" "exit 2" usage "$lr" --slice -5us -- /bin/true
    cli "unknown unit" "exit 2" usage "$lr" --slice 5parsecs -- /bin/true
    cli "missing duration" "exit 2" usage "$lr" --slice
    cli "unknown option" "exit 2" usage "$lr" --bogus -- /bin/true
    cli "no program" "exit 2" usage "$lr"
    cli "no program after --" "exit 2" usage "$lr" --
    cli "no program after options" "exit 2" usage "$lr" --stats --slice 1ms --
    cli "slice 100ns" "exit 0" - "$lr" --slice 100ns -- /bin/true
    cli "slice 50us" "exit 0" - "$lr" --slice 50us -- /bin/true
    cli "slice 3ms" "exit 0" - "$lr" --slice 3ms -- /bin/true
    cli "slice 2s" "exit 0" - "$lr" --slice 2s -- /bin/true
    cli "stats line" "exit 0" stats "$lr" --stats -- /bin/true
    cli "stats line with slice" "exit 7" stats "$lr" --stats --slice 20us -- "$out/exit_status" return
    # dash's `sh -c` ends by `_exit`, which skips `atexit`: the line comes anyway
    cli "stats line at _exit" "exit 0" stats "$lr" --stats -- /bin/sh -c 'true'
    cli "exec away is said" "exit 0" "names:replaces itself with /bin/true (exec)" "$lr" --slice 1ms -- /bin/sh -c 'exec /bin/true'
    cli "exec away with stats" "exit 0" stats "$lr" --stats -- /bin/sh -c 'exec /bin/true'
    cli "nonexistent program" "exit 127" "names:/nonexistent/program" "$lr" -- /nonexistent/program
    cli "program not in PATH" "exit 127" "names:no-such-program-xyz" "$lr" -- no-such-program-xyz
    cli "program not executable" "exit 126" "names:not an executable" "$lr" -- /etc/passwd
    cli "version" "exit 0" "out:linger-run $version" "$lr" --version
    cli "argv0=NAME" "exit 0" "out:my-name|" "$lr" --argv0=my-name -- /bin/sh -c 'printf "%s|" "$0"' 
    cli "PATH lookup" "exit 0" "out:hello" "$lr" --slice 20us -- echo hello
    cli "exit 42" "exit 42" - "$lr" -- /bin/sh -c 'exit 42'
    cli "exit 42 with slice" "exit 42" - "$lr" --slice 20us -- /bin/sh -c 'exit 42'
    cli "death by SIGSEGV" "signal 11" - "$lr" --slice 20us -- /bin/sh -c 'kill -SEGV $$'
    cli "death by SIGKILL" "signal 9" - "$lr" -- /bin/sh -c 'kill -KILL $$'
    cli "arguments pass through" "exit 0" "out:a  b|--slice|-x|" "$lr" --slice 1ms -- /bin/sh -c 'printf "%s|" "$@"' sh "a  b" --slice -x
    cli "stderr passes through" "exit 0" "names:to stderr" "$lr" -- /bin/sh -c 'echo to stderr >&2'
    cli "argv0" "exit 0" "out:my-name|" "$lr" --argv0 my-name -- /bin/sh -c 'printf "%s|" "$0"'
    cli "argv0 with slice" "exit 0" "out:other name|" "$lr" --slice 20us --argv0 "other name" -- /bin/sh -c 'printf "%s|" "$0"'
    cli "argv0 default" "exit 0" "out:/bin/sh|" "$lr" -- /bin/sh -c 'printf "%s|" "$0"'
    cli "missing argv0" "exit 2" usage "$lr" --argv0
    cli "missing isolate" "exit 2" usage "$lr" --isolate
    cli "empty isolate" "exit 2" usage "$lr" --isolate , -- /bin/true
    cli "isolate the loader" "exit 125" "names:ld-linux" "$lr" --isolate ld-linux-x86-64 -- /bin/true
    cli "isolate libc" "exit 0" "out:libc|isolated|" "$lr" --isolate libc --slice 20us -- /bin/sh -c 'printf "%s|" libc isolated'
    cli "isolate a library not loaded" "exit 125" "names:libnosuchlibrary" "$lr" --isolate libnosuchlibrary -- /bin/true
    # The assembler uses libbfd's variables: named, it is refused; with
    # `all` it stays shared and the assembler works.
    if command -v as >/dev/null; then
        cli "isolate a library whose variables the program uses" "exit 125" "names:_bfd_std_section" "$lr" --isolate libbfd -- as --version
        cli "isolate all with such a library" "exit 0" - "$lr" --isolate all --slice 20us -- as -o /dev/null /dev/null
    fi
}
if wanted "cli"; then
    run_cli
fi

# ------------------------------------------------------------ children ----
# kids NAME CMD...: a program that prints its own environment and starts
# children, each of which runs support/env_probe (it says whether it runs
# under linger-run). Without --children, linger-run's run must print exactly
# what the plain run prints (the program's environment, and children that
# are not sliced and see no LINGER_RUN_* variable); with --children, every
# child must be sliced, and the output be otherwise the same (the program's
# environment, and children that see no LINGER_RUN_* variable). Programs
# that are not installed are skipped.
kids() {
    local name="children.$1"
    shift
    wanted "$name" || return 0
    if ! command -v "$1" >/dev/null; then
        echo "skip $name ($1 is not installed)"
        return 0
    fi
    local base="$logs/$name" why=""
    launch "$base.plain" PROBE="$out/env_probe" -- "$@"
    launch "$base.slice" PROBE="$out/env_probe" -- "$lr" --slice 100us -- "$@"
    launch "$base.children" PROBE="$out/env_probe" -- "$lr" --children --slice 100us -- "$@"
    local m
    for m in plain slice children; do
        [ "$(status_of "$base.$m")" = "exit 0" ] || why="$m: $(status_of "$base.$m")"
    done
    if [ -z "$why" ] && ! grep -q ': sliced=0 vars=0$' "$base.plain.out"; then
        why="the plain run started no probe"
    elif [ -z "$why" ] && ! cmp -s "$base.plain.out" "$base.slice.out"; then
        why="without --children, the output differs from the plain run's"
        diff "$base.plain.out" "$base.slice.out" >"$base.diff" || true
    elif [ -z "$why" ] && grep -q ': sliced=0' "$base.children.out"; then
        why="with --children, a child ran normally"
    elif [ -z "$why" ] && ! cmp -s "$base.plain.out" <(sed 's/: sliced=1 /: sliced=0 /' "$base.children.out"); then
        why="with --children, the output differs from the plain run's in more than the children's slicing"
        diff "$base.plain.out" "$base.children.out" >"$base.diff" || true
    fi
    if [ -n "$why" ]; then
        fail "$name" "$why" "$base.diff" "$base.slice.err" "$base.slice.out" "$base.children.out"
    else
        pass "$name ($(grep -c ': sliced=1' "$base.children.out") children sliced with --children)"
    fi
    rm -f "$base.diff"
}
run_kids() {
    # shellcheck disable=SC2016 # expanded by the program, not here
    kids bash bash -c 'export -p; "$PROBE" bash; ("$PROBE" subshell); "$PROBE" pipe | cat; eval "\"\$PROBE\" eval"'
    # shellcheck disable=SC2016
    kids dash dash -c 'export -p; "$PROBE" dash; "$PROBE" pipe | cat'
    kids python /usr/bin/python3 -c 'import os, subprocess, sys
for k, v in sorted(os.environ.items()): print("env", k, v)
sys.stdout.flush()
subprocess.run([os.environ["PROBE"], "subprocess"], check=True)
os.system(os.environ["PROBE"] + " os.system")
print(os.popen(os.environ["PROBE"] + " os.popen").read(), end="")'
    # shellcheck disable=SC2016
    kids perl perl -e '$| = 1; print "env $_=$ENV{$_}\n" for sort keys %ENV; system($ENV{PROBE}, "system") == 0 or die; system("$ENV{PROBE} system-shell") == 0 or die'
    kids own_env "$out/own_env" "$out/env_probe"
}
if wanted "children"; then
    run_kids
fi

# ------------------------------------------------------------- the cases ----
run_case sleeps "exit 0" - sleeps
run_case multiplex "exit 0" - multiplex
run_case sigwaits "exit 0" - sigwaits
for p in sysv mq sem pthread locks; do
    run_case "ipc.$p" "exit 0" - ipc "$p"
done
run_case futex "exit 0" - futex
for p in wait waitpid wait3 wait4 waitid sigsuspend pause sigwait sigwaitinfo sigtimedwait \
    flock fcntl ofd lockf msgrcv msgsnd semop semtimedop mq_receive mq_send \
    pthread_join mutex cond rwlock barrier sem_wait futex read fgets fifo system; do
    run_case "waits.$p" "exit 0" waits waits "$p"
done
for p in accept connect recv send bulk; do
    run_case "sockets.$p" "exit 0" - sockets "$p"
done
run_case io "exit 0" isolate-libc io
for p in procmask pthread pselect; do
    run_case "sig_block.$p" "exit 0" pre=200 sig_block "$p"
done
# Its CPU loop runs inside a signal handler, which linger never preempts (the
# handler's call chain holds glibc's __restore_rt; docs/safety.md): only the
# code around it is.
run_case "sig_block.sa_mask" "exit 0" pre=20 sig_block sa_mask
for p in ign dfl handler every shell; do
    run_case "sig_disp.$p" "exit 0" pre=200 sig_disp "$p"
done
run_case sig_own "exit 0" pre=20 sig_own
run_case sig_async.stack "exit 0" - sig_async stack
run_case sig_async.count "exit 0" pre=20,isolate-libc sig_async count
run_case sig_async.jump "exit 0" pre=200 sig_async jump
run_case fork "exit 0" pre=20,isolate-libc fork
run_case exec "exit 0" - exec
run_case exec.marker "exit 0" marker exec
run_case exec.children "exit 0" children exec
run_case threads_tls "exit 0" pre=20,isolate-libc threads_tls
run_case exit.return "exit 7" pre=5,isolate-libc exit_status return
run_case exit.exit "exit 3" pre=5,isolate-libc exit_status exit
run_case exit._exit "exit 5" - exit_status _exit
run_case exit.quick_exit "exit 6" - exit_status quick_exit
run_case exit.abort "signal 6" - exit_status abort
run_case exit.segv "signal 11" - exit_status segv
run_case exit.sigterm "signal 15" - exit_status sigterm
run_case exit.kill_segv "signal 11" - exit_status kill_segv
run_case exit.sigpipe "signal 13" - exit_status sigpipe
run_case exit.raise_rtmax3 "signal 61" - exit_status raise_rtmax3 # SIGRTMAX-3 = 61 (glibc, Linux)
run_case exit.thread_exit "exit 9" - exit_status thread_exit
run_case exit.pthread_exit "exit 0" - exit_status pthread_exit
# linger-run reports the overflow on stderr (plain: nothing): only the signal is compared
run_case exit.overflow "signal 11" nostderr exit_status overflow
for p in longjmp handler handler_longjmp alarm segv; do
    run_case "jmp.$p" "exit 0" pre=200 jmp "$p"
done
for p in buffer fnptrs sigaction sigset; do
    run_case "stale_stack.$p" "exit 0" pre=200 stale_stack "$p"
done
run_case cxx_exceptions "exit 0" pre=20 cxx_exceptions
run_case cxx_exceptions.uncaught "signal 6" - cxx_exceptions uncaught
run_case cxx_exceptions.noexcept "signal 6" - cxx_exceptions noexcept
run_case cxx_exceptions.terminate_handler "exit 17" - cxx_exceptions terminate_handler
run_case stack.bytes "exit 0" pre=20 stack bytes
run_case stack.frames "exit 0" pre=20 stack frames
run_case stack.getattr "exit 0" - stack getattr
run_case stack.catch "exit 0" pre=20 stack catch
for p in locale iconv getaddrinfo dlopen misc; do
    run_case "libs.$p" "exit 0" pre=20 libs "$p"
done
run_case zlib_work "exit 0" pre=200,isolate,isolate-libc zlib_work
run_case stdio_malloc.printf "exit 0" pre=20,isolate-libc stdio_malloc printf
run_case stdio_malloc.malloc "exit 0" pre=20,isolate-libc stdio_malloc malloc

if [ ${#failed_names[@]} -gt 0 ]; then
    echo "failed: ${failed_names[*]}"
fi
echo "$passed passed, $failed failed, $knowns known differences ($((SECONDS - started)) s)"
[ "$failed" -eq 0 ]
