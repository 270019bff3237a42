#!/usr/bin/env bash
# Runs CPython's own regression test suite (regrtest, `python3.11 -m test`)
# with the interpreter's main() inside a linger preemptible function
# (linger-run) and compares every test module's and every test case's outcome
# with a plain run. Debian's /usr/bin/python3.11 links libpython statically,
# so the whole interpreter (eval loop, objects, GC, the C parts of re, socket,
# select, signal, io, pickle, ...) is preempted at arbitrary points; the
# second real-program proof after compat/gnulib.sh.
#
#   compat/python/regrtest.sh [--subset | --full] [options]
#
# Sets:
#   --subset   (default) ~40 modules over signals, select/poll/epoll,
#              subprocess/fork/exec, threads, time/sleep, os, io, sockets on
#              loopback, and CPU-heavy json/re/decimal/unicode work; what CI
#              runs as `compat/python/regrtest.sh --subset --check`
#              (about 3 minutes for all three modes on 2 cores)
#   --full     every module of the test suite (`-m test --list-tests`) except
#              the excluded ones listed below with their reasons (~15 minutes
#              per mode on 2 cores)
#
# Each module runs once per mode, in its own interpreter, sequentially
# (no -j: the tests run in the interpreter's main thread, the preemptible
# one). The modes are (default) `plain 100us 20us`:
#   plain      /usr/bin/python3.11 -m test ... MODULE
#   DURATION   the same under `linger-run --slice DURATION --`: main() is
#              preempted every DURATION and resumed at once; the child
#              processes the tests start run normally (see --children)
#
# Options:
#   --check          exit 1 if any module's or test case's outcome in a sliced
#                    mode differs from the plain run (differences that the
#                    plain reruns show to be flaky are reported, not counted)
#   --modes "M..."   the modes, the first one plain (default "plain 100us 20us")
#   --tests "T..."   only these modules (test_os test_signal ...); need not be
#                    in the set
#   --reruns N       rerun each differing module N more times in every mode,
#                    to tell flaky-in-plain from ours (default 3): only the
#                    differing test cases (--match) when they explain the
#                    difference, else the whole module
#   --timeout S      regrtest's per-module time limit (faulthandler dumps the
#                    stacks and exits; default 120 for --subset, 600 for
#                    --full); recorded as TIMEOUT. Reruns of single test
#                    cases get at most 120 s.
#   --children       also run the tests' child processes under linger-run
#                    (linger-run --children)
#   --no-install     do not apt-get install missing packages (fail instead)
#
# Environment:
#   LINGER_RUN_DIR=dir  use dir/linger-run and dir/liblinger_run.so and skip
#                       the cargo build (default: cargo build --release -p
#                       linger-run, then target/release)
#   REGRTEST_PYTHON     the interpreter (default /usr/bin/python3.11; it must
#                       be dynamically linked for linger-run to work)
#   LINGER_*            passed through to linger-run and the library
#
# What it does:
#   1. installs python3.11 and libpython3.11-testsuite with apt-get when
#      missing (CI runs as root on a fresh Debian 12). Note that
#      /usr/lib/python3.11/test exists without the testsuite package
#      (libpython3.11-stdlib ships test/support and test/libregrtest), so the
#      check is for the package and test/test_os.py;
#   2. builds linger-run and copies linger-run + liblinger_run.so to
#      target/compat/python/bin, so that a rebuild during the run does not
#      change the binary under test;
#   3. per mode, per module: runs
#        [linger-run --slice D --stats=F --] python3.11 -m test -v
#            --junit-xml F -u RES --timeout S --tempdir T MODULE
#      in a clean environment (PATH=/usr/local/bin:/usr/bin:/bin..., HOME,
#      LANG=C.UTF-8, no PYTHON* variables), stdin from /dev/null, with an outer
#      `timeout` of S+60 seconds in case faulthandler cannot fire;
#      RES = all,-network,-urlfetch,-gui,-audio,-largefile,-curses: everything
#      that works offline and without a terminal or display (cpu, decimal,
#      subprocess, walltime, tzdata included);
#   4. reads each test case's outcome from the JUnit XML (the -v output for
#      failing subtests, which the XML does not record, and for a process that
#      died before writing it) and the module's from regrtest's summary;
#   5. reruns the modules that differ (--reruns) in every mode and classifies
#      each difference.
#
# Output (target/compat/python/):
#   progress: one line per module and mode:
#       [20us 12/41] PASS test_select (3.1s, 21 cases)
#   python-SET.tsv           module, outcome per mode, seconds per mode, cases,
#                            not-passing cases per mode, preemptions per
#                            sliced mode, number of differing cases
#   python-SET-cases.tsv     module, test case, outcome per mode
#   python-SET-summary.txt   environment, totals per mode, every difference
#                            with the outcomes of the reruns
#   SET/results/MODE/MODULE.{log,xml,stats,cases}  raw results per run
# The last line is `python-SET: N same, M differ, K flaky in plain`.
#
# Module outcomes: PASS FAIL ENV_CHANGED SKIP NO_TESTS TIMEOUT CRASH-SIGNAME
# ERROR-rcN; case outcomes: PASS FAIL ERROR SKIP XFAIL XPASS TIMEOUT CRASH
# MISSING (see compat/python/report.py).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
script="$root/compat/python/regrtest.sh"
report="$root/compat/python/report.py"

# ---------------------------------------------------------------------------
# Module lists.

# The CI subset; each line says what the modules exercise. The budget is
# about 4 minutes for the three modes on 2 cores, and a 20 us slice makes
# CPython run several times slower (its interpreter start-up about 10 times),
# so the modules are few and trimmed (subset_ignored below).
subset_modules=(
    # signals: handlers, set_wakeup_fd, setitimer, signals interrupting
    # blocking lock acquires and selects (EINTR and PEP 475 retries)
    test_signal test_threadsignals
    # waiting for descriptors: select, poll, epoll, selectors interrupted by
    # signals and with timeouts
    test_select test_poll test_epoll test_selectors
    # processes: fork+exec from C (_posixsubprocess), pipes, communicate,
    # wait, kill
    test_subprocess
    # os and time: fork, waitpid, file descriptors, sleeps, clocks
    test_os test_posix test_time
    # threads, locks and conditions with timeouts
    test_threading
    # io: buffered and text layers, writes interrupted by signals
    test_io test_fileio
    # sockets on loopback: blocking, non-blocking, timeouts, interrupted
    # sends and receives, socketserver with threads and forks
    test_socket test_socketserver
    # CPU-heavy work in the interpreter itself: regular expressions (_sre),
    # json (the pure-Python and C variants), unicode, long integers, dicts
    test_re test_json test_unicode test_long test_dict
)

# Test cases the subset leaves out (regrtest --ignore patterns, per module):
# their time goes into waiting, for a child process (which linger-run leaves
# alone, so they test nothing of linger here) or for a timeout to expire, or
# they duplicate a variant that stays in. --full runs them all.
declare -A subset_ignored=(
    # bodies run in a child interpreter (assert_python_ok / spawn_python)
    [test_signal]="SiginterruptTest WakeupSignalTests WakeupSocketSignalTests
        test_interprocess_signal test_keyboard_interrupt_exit_code
        test_sigpending test_pthread_kill test_sigwait test_sigwaitinfo
        test_sigtimedwait test_sigtimedwait_poll test_sigtimedwait_timeout
        test_sigwait_thread test_pthread_sigmask test_pthread_kill_main_thread"
    # 10 s of a child's `sleep 1` loop
    [test_poll]="test_poll2"
    # the default selector is epoll (tested as such); select() has test_select
    [test_selectors]="DefaultSelectorTestCase SelectSelectorTestCase"
    # the NoPoll variant repeats ProcessTestCase with select(); the others
    # wait for a child to sleep or die
    [test_subprocess]="ProcessTestCaseNoPoll test_check_output_timeout
        test_communicate_repeated_call_after_stdout_close test_send_signal_dead
        test_kill_dead test_terminate_dead"
    # barrier timeouts wait 1 s each; the shutdown test runs a child
    [test_threading]="BarrierTests test_join_nondaemon_on_shutdown"
    # the pure-Python signal tests repeat the C ones (same system calls);
    # the daemon-thread shutdown tests run in a child
    [test_io]="PySignalsTest test_daemon_threads_shutdown_stdout_deadlock
        test_daemon_threads_shutdown_stderr_deadlock"
    # waiting for timeouts to expire (TCPTimeoutTest and the interrupted
    # timeout tests stay); and three TestUnixDomain cases that pass or skip
    # depending on the temporary path they bind (seen flipping in plain runs
    # and in sliced ones alike)
    [test_socket]="NetworkConnectionBehaviourTest testReadAfterTimeout
        UDPTimeoutTest UDPLITETimeoutTest TCPCloserTest
        testBytesAddr testStrAddr testUnencodableAddr"
)

# --full: everything `-m test --list-tests` lists, except these.
# (test_ssl, test_httplib, test_urllib2_localnet, test_ftplib, test_poplib,
# test_imaplib, test_smtplib, test_xmlrpc, ... stay: they use loopback
# servers; -u -network keeps them offline.)
declare -A full_excluded=(
    # Need the network or a display, or only run on other systems: with the
    # resources above they are skipped anyway; excluded to save the start-up.
    [test_urllib2net]="network only"
    [test_urllibnet]="network only"
    [test_xmlrpc_net]="network only"
    [test_smtpnet]="network only"
    [test_nntplib]="network only (news server)"
    [test_tk]="GUI (tkinter not installed)"
    [test_ttk_guionly]="GUI"
    [test_ttk_textonly]="tkinter not installed"
    [test_tix]="GUI"
    [test_tcl]="tkinter not installed"
    [test_turtle]="GUI"
    [test_idle]="GUI (idlelib, tkinter)"
    [test_winconsoleio]="Windows only"
    [test_winreg]="Windows only"
    [test_winsound]="Windows only"
    [test_startfile]="Windows only"
    [test_msilib]="Windows only"
    [test_launcher]="Windows only"
    [test_kqueue]="BSD/macOS only"
    [test_devpoll]="Solaris only"
    [test_osx_env]="macOS only"
    [test_ossaudiodev]="audio device"
    [test_largefile]="writes multi-GiB files (largefile resource)"
    [test_bigaddrspace]="bigmem tests, need -M"
    [test_bigmem]="bigmem tests, need -M"
    [test_zipfile64]="largefile-style, very slow"
    [test_curses]="needs a terminal"
    # Fail in the plain run on Debian, for packaging reasons.
    [test_ensurepip]="Debian disables ensurepip (no bundled wheels)"
    [test_idle]="Debian's tkinter stub has no Tk (python3-tk not installed)"
    [test_cppext]="builds a C++ extension in a venv; fails on Debian's split packages"
    # Time budget (~15-20 minutes per mode): their work happens in child
    # processes that are started by exec (spawn, forkserver), which linger-run
    # leaves alone; test_multiprocessing_fork, whose workers are forks of the
    # preempted interpreter, stays.
    [test_multiprocessing_spawn]="130 s, workers exec'd: not preempted"
    [test_multiprocessing_forkserver]="80 s, workers exec'd: not preempted"
    [test_concurrent_futures]="155 s, mostly process pools (spawn/forkserver workers)"
)

# Test cases left out of every run (regrtest --ignore patterns).
ignored_cases=(
    # Hangs until the time limit in the plain run on Firecracker VMs: a vsock
    # device exists (so the class is not skipped) but the client's connect
    # to the guest's own CID never completes.
    ThreadedVSOCKSocketStreamTest
)
# Extra resources per module: test_socketserver's servers are on loopback
# only, but the module asks for the "network" resource.
declare -A module_resources=(
    [test_socketserver]=network
)

# ---------------------------------------------------------------------------
# Options.

usage() { sed -n '2,/^set -euo/p' "$script" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "compat/python/regrtest.sh: $*" >&2; exit 2; }

set_name=subset
check=0
modes="plain 100us 20us"
only_tests=""
reruns=3
limit=""
rerun_limit=120
children=0
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
        --children) children=1 ;;
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
if [ -z "$limit" ]; then
    if [ "$set_name" = full ]; then limit=600; else limit=120; fi
fi
[[ "$limit" =~ ^[1-9][0-9]*$ ]] || die "--timeout takes a number of seconds"

python="${REGRTEST_PYTHON:-/usr/bin/python3.11}"
resources="all,-network,-urlfetch,-gui,-audio,-largefile,-curses"
out="$root/target/compat/python"
work="$out/$set_name"
results="$work/results"
bin="$out/bin"
mkdir -p "$work" "$bin"

say() { printf '%s\n' "$*"; }
now() { date +%s; }
elapsed() { local s=$(( $(now) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# ---------------------------------------------------------------------------
# 1. Packages.

ensure_packages() {
    local missing=()
    dpkg -s python3.11 >/dev/null 2>&1 && [ -x /usr/bin/python3.11 ] || missing+=(python3.11)
    # test/ alone is not enough: libpython3.11-stdlib ships test/support.
    dpkg -s libpython3.11-testsuite >/dev/null 2>&1 && [ -f /usr/lib/python3.11/test/test_os.py ] ||
        missing+=(libpython3.11-testsuite)
    if [ "$python" = /usr/bin/python3.11 ] && [ ${#missing[@]} -gt 0 ]; then
        [ "$install" = 1 ] || die "missing packages: ${missing[*]} (and --no-install)"
        [ "$(id -u)" = 0 ] || die "missing packages: ${missing[*]}; run as root or install them"
        say "installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    [ -x "$python" ] || die "no interpreter at $python"
    command -v timeout >/dev/null || die "timeout (coreutils) not found"
}

# ---------------------------------------------------------------------------
# 2. linger-run.

ensure_linger_run() {
    local dir f
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

# ---------------------------------------------------------------------------
# 3. Running.

# The environment of every run: nothing from the caller's Python set-up
# (PYTHONPATH, pyenv shims on PATH, ...), LINGER_* passed through.
clean_env=(env -i
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    HOME="${HOME:-/root}" LANG=C.UTF-8 USER="$(id -un)" LOGNAME="$(id -un)")
while IFS= read -r v; do clean_env+=("$v"); done < <(env | grep '^LINGER_' || true)

# CPU seconds (user + system) of the shell's waited-for children, from the
# output of `times` in FILE (written by the shell itself, not a subshell).
child_cpu() {
    awk 'NR == 2 {
        n = split($0, f, " "); s = 0
        for (i = 1; i <= n; i++) { split(f[i], p, "m"); s += p[1] * 60 + p[2] }
        printf "%.2f\n", s }' "$1"
}

# run_one MODE DEST MODULE [LIMIT [CASE...]]: one regrtest run of one module
# (only the given test cases, if any); leaves DEST/MODULE.{log,xml,rc,time,
# stats,cases} and prints the parsed line.
run_one() {
    local mode="$1" dest="$2" t="$3" lim="${4:-$limit}" cmd t0 t1 c0 c1 rc tmp
    shift 4 || shift $#
    tmp="$dest/tmp-$t"
    rm -rf "$tmp" "$dest/$t".*
    mkdir -p "$tmp"
    local res="$resources" pat
    [ -n "${module_resources[$t]:-}" ] && res+=",${module_resources[$t]}"
    cmd=("$python" -m test -v --junit-xml "$dest/$t.xml" -u "$res"
         --timeout "$lim" --tempdir "$tmp")
    for pat in "${ignored_cases[@]}"; do cmd+=(--ignore "$pat"); done
    if [ "$set_name" = subset ]; then
        for pat in ${subset_ignored[$t]:-}; do cmd+=(--ignore "$pat"); done
    fi
    for pat in "$@"; do cmd+=(--match "$pat"); done
    cmd+=("$t")
    if [ "$mode" != plain ]; then
        local lr=("$bin/linger-run" --slice "$mode" --stats="$dest/$t.stats")
        [ "$children" = 1 ] && lr+=(--children)
        cmd=("${lr[@]}" -- "${cmd[@]}")
    fi
    times >"$dest/$t.cpu"
    c0=$(child_cpu "$dest/$t.cpu")
    t0=$(date +%s.%N)
    set +e
    (cd "$tmp" && "${clean_env[@]}" timeout -k 10 $((lim + 60)) "${cmd[@]}") \
        >"$dest/$t.log" 2>&1 </dev/null
    rc=$?
    set -e
    t1=$(date +%s.%N)
    times >"$dest/$t.cpu"
    c1=$(child_cpu "$dest/$t.cpu")
    rm -f "$dest/$t.cpu"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "$rc outer-timeout" >"$dest/$t.rc"
    else
        echo "$rc" >"$dest/$t.rc"
    fi
    awk -v a="$t0" -v b="$t1" -v c="$c0" -v d="$c1" \
        'BEGIN { printf "%.1f %.1f\n", b - a, d - c }' >"$dest/$t.time"
    rm -rf "$tmp"
    "$python" -I "$report" parse "$dest" "$t" "$mode"
}

# run_mode MODE DEST LABEL MODULE...: every module in MODE, with progress;
# DEST/outcomes gets one parsed line per module.
# A MODULE written MODULE:CASE,CASE... runs only those test cases (reruns),
# with a time limit of at most rerun_limit; its DEST/MODULE.keys lists them.
run_mode() {
    local mode="$1" dest="$2" label="$3"
    shift 3
    local n=$# k=0 spec t line res ncase nbad secs first cases lim
    rm -rf "$dest"
    mkdir -p "$dest"
    : >"$dest/outcomes"
    for spec in "$@"; do
        k=$((k + 1))
        t="${spec%%:*}"
        cases=()
        lim=$limit
        if [ "$spec" != "$t" ]; then
            IFS=, read -r -a cases <<<"${spec#*:}"
            [ "$lim" -gt "$rerun_limit" ] && lim=$rerun_limit
        fi
        line="$(run_one "$mode" "$dest" "$t" "$lim" "${cases[@]}")"
        if [ ${#cases[@]} -gt 0 ]; then
            printf '%s\n' "${cases[@]}" >"$dest/$t.keys"
        else
            echo '*' >"$dest/$t.keys"
        fi
        printf '%s\n' "$line" >>"$dest/outcomes"
        IFS=$'\t' read -r _ res ncase nbad secs _ _ first <<<"$line"
        local what="$t"
        [ ${#cases[@]} -gt 0 ] && what="$t (${#cases[@]} cases)"
        if [ "$nbad" -gt 0 ] 2>/dev/null; then
            say "[$label $k/$n] $res $what (${secs}s, $ncase cases, $nbad not passing: $first)"
        else
            say "[$label $k/$n] $res $what (${secs}s, $ncase cases)"
        fi
    done
}

# ---------------------------------------------------------------------------
# Main.

t_all=$(now)
ensure_packages

mapfile -t listed < <(cd / && "${clean_env[@]}" "$python" -m test --list-tests)
[ ${#listed[@]} -gt 0 ] || die "regrtest lists no tests (is libpython3.11-testsuite installed?)"
declare -A is_listed=()
for t in "${listed[@]}"; do is_listed[$t]=1; done
if [ -n "$only_tests" ]; then
    read -r -a modules <<<"$only_tests"
    for t in "${modules[@]}"; do
        [ -n "${is_listed[$t]:-}" ] || die "regrtest has no test module $t"
    done
elif [ "$set_name" = full ]; then
    modules=()
    for t in "${listed[@]}"; do
        [ -n "${full_excluded[$t]:-}" ] || modules+=("$t")
    done
else
    modules=("${subset_modules[@]}")
    for t in "${modules[@]}"; do
        [ -n "${is_listed[$t]:-}" ] || die "regrtest has no test module $t"
    done
fi
[ "${#mode_list[@]}" -gt 1 ] && ensure_linger_run

rm -rf "$results"
mkdir -p "$results"
{
    echo "$("$python" -VV | tr '\n' ' ')($python, $(dpkg-query -W -f='${Package} ${Version}' libpython3.11-testsuite 2>/dev/null || echo 'testsuite ?'))"
    echo "$(uname -sr); $(nproc) CPUs; regrtest -v --junit-xml -u $resources --timeout $limit, one process per module, sequential"
    echo "ignored test cases (--ignore): ${ignored_cases[*]}"
    if [ "$set_name" = subset ]; then
        for t in "${modules[@]}"; do
            if [ -n "${subset_ignored[$t]:-}" ]; then
                # shellcheck disable=SC2086 # word list, printed on one line
                echo "  $t (subset): $(echo ${subset_ignored[$t]})"
            fi
        done
    fi
    if [ "$children" = 1 ]; then
        echo "sliced modes: linger-run --slice D --children --"
    else
        echo "sliced modes: linger-run --slice D -- (children run normally)"
    fi
    env | grep '^LINGER_' | sed 's/^/environment: /' || true
} >"$results/environment"
say "python $set_name set: ${#modules[@]} modules, modes: ${mode_list[*]}, one at a time, limit ${limit}s each"

declare -A mode_time
for m in "${mode_list[@]}"; do
    t0=$(now)
    say "== $m"
    run_mode "$m" "$results/$m" "$m" "${modules[@]}"
    mode_time[$m]="$(elapsed "$t0")"
    say "$m: done in ${mode_time[$m]}"
done

# MODULE or MODULE:CASE,CASE... (the differing cases only, when they explain
# the difference).
mapfile -t differing < <("$python" -I "$report" diffs "$results" "${mode_list[@]}")
if [ ${#differing[@]} -gt 0 ] && [ "$reruns" -gt 0 ]; then
    say "== rerunning ${#differing[@]} differing module(s) $reruns times per mode: ${differing[*]%%:*}"
    for ((i = 1; i <= reruns; i++)); do
        for m in "${mode_list[@]}"; do
            run_mode "$m" "$results/rerun-$i/$m" "rerun $i $m" "${differing[@]}"
        done
    done
fi

{
    for m in "${mode_list[@]}"; do echo "wall time $m: ${mode_time[$m]}"; done
    echo "total time (with reruns): $(elapsed "$t_all")"
} >>"$results/environment"
set +e
"$python" -I "$report" report "$results" "$set_name" "$out/python-$set_name" "$reruns" "${mode_list[@]}"
status=$?
set -e
[ $status -le 1 ] || die "report.py failed"
if [ "$check" = 1 ] && [ $status -ne 0 ]; then
    exit 1
fi
exit 0
