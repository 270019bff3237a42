/*
 * linger: lightweight preemptible functions (C API).
 *
 *   linger_t l = linger_launch(work, 100, &state);   // run for at most 100 us
 *   while (!l.is_complete) { ...; linger_resume(&l, 100); }
 *
 * Errors never abort: functions return an error state or -1 and set errno.
 */

#ifndef LINGER_H
#define LINGER_H

/* Generated from crates/linger/src/ffi.rs and src/state/stats.rs by cbindgen (crates/headers). Do not edit: run `make header` after changing the C API; the test `headers_are_current` fails while this file is stale. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// `linger_opts_t::no_libset`: fail the launch with `EAGAIN`.
#define LINGER_NO_LIBSET_FAIL 0

// `linger_opts_t::no_libset`: run with the shared libraries.
#define LINGER_NO_LIBSET_SHARE 1

// `linger_opts_t::no_libset`: wait up to `libset_wait_us` for a libset.
#define LINGER_NO_LIBSET_WAIT 2

// A preemptible function as seen from C.
//
// - Completed: `is_complete` is true and the function owns nothing.
// - Paused: `is_complete` is false and `continuation` is non-NULL.
// - Cancelled (by `linger_cancel`, or abandoned after a stack overflow):
//   `is_cancelled` is true and `continuation` is NULL.
// - Failed launch: all three are false/NULL and `errno` says why.
typedef struct linger_t {
  // The function returned.
  bool is_complete;
  // The function was cancelled and can never run again.
  bool is_cancelled;
  // Opaque handle of the paused function, or NULL.
  void *continuation;
} linger_t;

// Per-launch options for `linger_launch_opts` (zero-initialise for defaults).
typedef struct linger_opts_t {
  // Usable stack size in bytes; 0 for the default (`LINGER_STACK_SIZE`, 256 KiB).
  uintptr_t stack_size;
  // May be resumed on a thread other than the launching one. Only for
  // functions that use no thread-local storage (`__thread`, `errno` kept
  // across a resume, ...): compiled code caches TLS addresses.
  bool migratable;
  // Keep the program's signals blocked on the calling thread while the
  // function is stopped, so that they are handled on its stack when it
  // resumes (for callers that resume at once; see `Builder::hold_signals`).
  // Not together with `migratable` (the launch fails with `EINVAL`).
  bool hold_signals;
  // Leave a function blocked in a system call alone when its deadline
  // passes, and stop it shortly after the call returns (for callers that
  // would only resume it at once; see `Builder::preempt_blocked`).
  bool leave_blocked;
  // Run the function in a libset of its own, so that deadlines inside
  // the isolated libraries are taken there (see `linger_isolate` and
  // `Builder::isolated`). Cancelling it resets the libset: nothing the
  // isolated libraries made or allocated inside the function may be used
  // outside it.
  bool isolated;
  // With `isolated`, when every libset is in use: `LINGER_NO_LIBSET_FAIL`
  // (0, the launch fails with `EAGAIN`), `LINGER_NO_LIBSET_SHARE` (run with
  // the shared libraries, deferred inside them), or `LINGER_NO_LIBSET_WAIT`
  // (wait up to `libset_wait_us`, then fail with `EAGAIN`). Other values:
  // `EINVAL`.
  int no_libset;
  // See `no_libset`.
  uint64_t libset_wait_us;
  // When the function is cancelled where it stopped at an arbitrary
  // instruction, give its whole stack back for reuse instead of keeping
  // the live part mapped for good. Only if nothing outside the function
  // keeps a pointer into its stack (see `Builder::reuse_stack_on_cancel`).
  bool reuse_stack;
  // A deadline may stop the function in a futex wait inside libc's
  // synchronisation functions (`pthread_mutex_lock`, `pthread_cond_wait`,
  // `sem_wait`...; see `Builder::stop_in_futex_waits`).
  bool stop_in_futex_waits;
} linger_opts_t;

// How one preemption went (see `last_preemption`); in C,
// `linger_preemption_t`.
typedef struct linger_preemption_t {
  // Time from the deadline to the stop, in nanoseconds.
  uint64_t overrun_ns;
  // The deadline first found the function in code that must not be
  // interrupted, and the stop waited for it to leave.
  bool deferred;
  // It was stopped in a futex wait (of libc's synchronisation functions,
  // `Builder::stop_in_futex_waits`, or of std's, `stop_in_std_waits`):
  // it is still waiting, and waits again when resumed.
  bool in_wait;
} linger_preemption_t;

// Counters of the calling thread, from `linger::stats()` in Rust or
// `linger_stats()` in C (where this is `linger_stats_t`).
typedef struct linger_stats_t {
  // Functions launched.
  uint64_t launches;
  // Functions that returned (including after resumes).
  uint64_t completions;
  // Voluntary `pause()` calls that handed back control.
  uint64_t pauses;
  // Times a function was preempted because its deadline passed.
  uint64_t preemptions;
  // Of those, preemptions taken late at the end of a no-preempt scope
  // (critical section, runtime code).
  uint64_t deferred_preemptions;
  // Deadline signals that found the function in code that must not be
  // interrupted (libc, loader, std, a critical scope) and were deferred.
  uint64_t deferrals;
  // Timer signals that arrived early or when nothing was running.
  uint64_t spurious_signals;
  // Cancellations that unwound the function's stack, running destructors.
  uint64_t cancels_unwound;
  // Cancellations that reclaimed the stack without unwinding (function was
  // preempted at an arbitrary instruction, or stopped in C code).
  uint64_t cancels_reclaimed;
  // Functions abandoned after overflowing their stack.
  uint64_t stack_overflows;
  // Panics propagated out of preemptible functions (Rust only).
  uint64_t panics;
  // Largest delay between a deadline and the preemption, in nanoseconds.
  uint64_t worst_overrun_ns;
  // Deadlines that found a function blocked in a system call and left it
  // waiting until the call returned (`Builder::preempt_blocked(false)`).
  uint64_t blocked_deadlines;
  // Deferred deadlines taken exactly when the deferred call returned to
  // the function's own code (a return trap), not by a timer retry.
  uint64_t return_traps;
  // Stack overflows inside library code that finished on the emergency
  // reserve before the function was abandoned (also counted in
  // `stack_overflows` when the caller receives them).
  uint64_t library_overflows;
  // Libsets reset after their isolated function was cancelled or
  // abandoned (see `Builder::isolated`).
  uint64_t libset_resets;
  // Heap blocks those resets freed (what the isolated libraries had
  // allocated for the cancelled calls).
  uint64_t libset_blocks_freed;
  // Preemptions taken in a futex wait inside libc's synchronisation
  // functions (`Builder::stop_in_futex_waits`; also counted in
  // `preemptions`).
  uint64_t futex_stops;
  // Where the deadline of the worst overrun first found the function in
  // code that must not be stopped (the address of the instruction it
  // interrupted: `dladdr` names the library), 0 if that deadline was
  // not deferred. What to make preemptible, or isolate, to shorten it.
  uint64_t worst_overrun_at;
} linger_stats_t;

// The C function type run by `linger_launch`.
typedef void (*linger_fn)(void*);

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Isolates libraries for functions launched with `isolated` set: `libs`
// is `"all"` (every library that can be copied) or names separated by
// commas (`"libpng,libz"`); NULL means `LINGER_ISOLATE`, or `"all"`. Once
// per process (the same selection again succeeds). Returns 0, or -1 with
// `errno`: `EINVAL` (a bad selection, or a different selection
// than the first), `ENOENT` (a library is not loaded), `ENOTSUP` (a
// library named cannot be copied: the executable, the loader, glibc's
// other libraries and the C++ runtime (`libm`, `libpthread`, `libstdc++`,
// `libgcc_s`...), one loaded by `LD_PRELOAD`, or one whose variables the
// program uses directly). libc is accepted when named (`"libc"`, or
// `"libc,libpng16"`), and left shared by `"all"`. Optional: the first
// isolated launch does it.
//
// # Safety
// `libs` is NULL or a NUL-terminated string.
int linger_isolate(const char *libs);

// Runs `func(arg)` on its own stack for at most `timeout_us` microseconds
// (slices shorter than the cost of arming the timer plus `LINGER_RETRY_US`
// are rounded up to it). `0` only sets the function up; `UINT64_MAX` means
// no limit. On failure the
// result has `is_complete == false` and `continuation == NULL`, and `errno`
// is set: `EINVAL` (NULL `func`), `ENOMEM` (no memory for the stack or for
// the handle; a function that had started is then cancelled), `EAGAIN` (no timer),
// `EFAULT` (stack overflow: the function was abandoned, `is_cancelled` set),
// `EDEADLK` (called from a signal handler, or from a Rust `Drop` run by a
// panic: not allowed there, nothing was done).
//
// `pthread_exit` inside the function (or a cancellation of the thread
// acted on there) unwinds the function, running its cleanup handlers, and
// then ends the calling thread from this call (or from `linger_resume`)
// with the same value, running the caller's handlers: as if the function
// had been an ordinary call.
//
// Async-signal-safety: `linger_launch`, `linger_launch_opts`,
// `linger_resume` and `linger_cancel` are not async-signal-safe and refuse
// calls from a signal handler the program installed (`EDEADLK`).
// `linger_yielded`, `linger_is_preemptible` and `linger_stats` are safe
// there. `linger_pause` and `linger_critical_begin`/`_end` belong to the
// function's own flow: don't call them from a handler.
struct linger_t linger_launch(void (*func)(void*), uint64_t timeout_us, void *arg);

// Like `linger_launch`, with options (`opts` may be NULL).
//
// # Safety
// `opts` must be NULL or point to a readable `linger_opts_t`.
struct linger_t linger_launch_opts(void (*func)(void*),
                                   uint64_t timeout_us,
                                   void *arg,
                                   const struct linger_opts_t *opts);

// Continues a paused function for at most `timeout_us` microseconds (`0`
// does nothing, `UINT64_MAX` means no limit). Returns 0 (check
// `is_complete`), or -1 with `errno`: `EINVAL` (NULL, failed launch, or not a
// live continuation), `ECANCELED` (cancelled), `EBUSY` (already running),
// `EXDEV` (launched on another thread, not migratable), `EFAULT` (stack
// overflow: now cancelled), `EAGAIN` (timer), `EDEADLK` (from a signal
// handler, or while unwinding; see `linger_launch`). Resuming a completed function
// returns 0 and does nothing.
//
// # Safety
// `l` must be NULL or point to a writable `linger_t`.
int32_t linger_resume(struct linger_t *l, uint64_t timeout_us);

// Cancels a paused function and frees everything the runtime holds for it.
// A C function is never unwound (that is not defined through C frames): it
// simply never runs again, as if its thread had been killed at the
// instruction where it stopped. Whatever it allocated stays allocated, locks
// it held stay held, and memory it was writing, including the caller's
// (`arg` and anything reachable from it), is left exactly as far as the
// write had got: a structure half-way through an update stays that way, so
// let functions write caller memory only inside `linger_critical_begin`/
// `linger_critical_end`, or discard that memory after a cancel. The live part
// of its stack stays mapped and is never reused (pointers to its locals that
// it handed out stay valid); the rest is released. Returns 0; on a completed or never-launched `linger_t`, 0 and
// nothing happens. Returns -1 with `errno` for NULL (`EINVAL`), an already
// cancelled function (`EALREADY`), a stale or made-up handle (`EINVAL`),
// one that is running (`EBUSY`), or a call from a signal handler (`EDEADLK`).
//
// # Safety
// `l` must be NULL or point to a writable `linger_t`.
int32_t linger_cancel(struct linger_t *l);

// Inside a preemptible function: return to the caller now. Elsewhere: nothing.
void linger_pause(void);

// True if the function paused itself with `linger_pause` (false for NULL).
//
// # Safety
// `l` must be NULL or point to a readable `linger_t`.
bool linger_yielded(const struct linger_t *l);

// True when called from inside a preemptible function.
bool linger_is_preemptible(void);

// Opens a no-preemption scope (nestable); a deadline that passes inside it is
// taken at the matching outermost `linger_critical_end`.
void linger_critical_begin(void);

// Closes a scope opened by `linger_critical_begin`. Returns 0, or -1 with
// `EINVAL` if no scope is open.
int32_t linger_critical_end(void);

// Copies the calling thread's most recent preemption into `out`. Returns 1,
// 0 if this thread has seen none (`out` untouched), or -1 with `EINVAL` for
// NULL.
//
// # Safety
// `out` must be NULL or point to a writable `linger_preemption_t`.
int32_t linger_last_preemption(struct linger_preemption_t *out);

// Copies the calling thread's counters into `out`. Returns 0, or -1 with
// `EINVAL` for NULL.
//
// # Safety
// `out` must be NULL or point to a writable `linger_stats_t`.
int32_t linger_stats(struct linger_stats_t *out);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* LINGER_H */
