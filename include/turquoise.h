/*
 * turquoise: green threads for C (pthread-shaped), preemptive, with blocking
 * calls that park the green thread instead of its worker.
 *
 *   turq_t t;
 *   turq_create(&t, serve, conn);        // or turq_create_attr(&t, NULL, serve, conn)
 *   turq_join(t, NULL);
 *
 * Errors are return values (0 or an errno code), as with pthreads. Link with
 * -lturquoise (it contains liblinger: do not link both).
 */

#ifndef TURQUOISE_H
#define TURQUOISE_H

/* Generated from crates/turquoise/src/ffi.rs by cbindgen (crates/turquoise/build.rs). Do not edit: run `TURQUOISE_UPDATE_HEADER=1 cargo build -p turquoise` after changing the C API; the test `header_is_current` fails while this file is stale. */

#include <stddef.h>
#include <stdint.h>
// `turq_join`'s value for a thread that was cancelled (as `PTHREAD_CANCELED`).
#define TURQ_CANCELED ((void *)-1)

// `turq_attr_setdetachstate`: the thread can be joined (the default).
#define TURQ_CREATE_JOINABLE 0

// `turq_attr_setdetachstate`: nobody joins the thread; it is forgotten at its end.
#define TURQ_CREATE_DETACHED 1

// A green thread, as C sees it (0 is none).
typedef uint64_t turq_t;

// A green thread's start routine.
typedef void *(*turq_fn)(void*);

// Attributes of a new green thread (`turq_attr_init` first, then the
// setters; the fields are not part of the API).
typedef struct turq_attr_t {
  // `ATTR_MAGIC` once initialised.
  uint32_t magic;
  int detached;
  int preemptive;
  uintptr_t stack_size;
  uint64_t slice_us;
  char name[32];
} turq_attr_t;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Starts `start(arg)` on a green thread with default attributes; its id
// goes to `*thread`. 0, or `EINVAL` (NULL pointers), `EAGAIN` (no stack or
// memory for it), `ESHUTDOWN` (the runtime has shut down).
//
// # Safety
// `thread` is NULL or writable; `start` is safe to call with `arg` on
// another thread.
int turq_create(turq_t *thread, turq_fn start, void *arg);

// `pthread_create`'s parameters: `attr` may be NULL for the defaults.
//
// # Safety
// As `turq_create`; `attr` is NULL or points to a `turq_attr_t`.
int turq_create_attr(turq_t *thread, const struct turq_attr_t *attr, turq_fn start, void *arg);

// Waits for `thread` to end (parks a green thread, blocks an OS thread)
// and stores its value in `*ret` if `ret` is not NULL: what its function
// returned or passed to `pthread_exit`, or `TURQ_CANCELED` if it was
// cancelled. 0, or `ESRCH` (no such joinable thread: already joined
// or detached, or never created), `EDEADLK` (the caller itself), `EFAULT`
// (it overflowed its stack), `EIO` (it ended by a Rust panic).
//
// # Safety
// `ret` is NULL or writable.
int turq_join(turq_t thread, void **ret);

// Nobody will join `thread`: it is forgotten when it ends. 0 or `ESRCH`.
int turq_detach(turq_t thread);

// Cancels `thread` at its next turn (deferred, like
// `PTHREAD_CANCEL_DEFERRED` with every switch a cancellation point): a
// thread that waits is unwound; one stopped in the middle of its code is
// reclaimed (see `docs/safety.md`). `turq_join` then gives `TURQ_CANCELED`.
// 0 or `ESRCH` (not joinable).
int turq_cancel(turq_t thread);

// Ends the calling green thread with `value` (what `turq_join` gets), as
// `pthread_exit` ends a pthread: its cleanup handlers and destructors run,
// its worker goes on. On an ordinary thread it is `pthread_exit`.
//
// # Safety
// As `pthread_exit`: nothing below the caller's frames may be needed again.
void turq_exit(void *value) __attribute__((noreturn));

// Gives the worker to the other runnable work (an OS thread yields to
// the OS). Always 0.
int turq_yield(void);

// The calling green thread, or 0 on an ordinary thread.
turq_t turq_self(void);

// Non-zero if `a` and `b` are the same thread.
int turq_equal(turq_t a, turq_t b);

// Sets `attr` to the defaults: joinable, preemptive with the runtime's
// slice, linger's stack size, no name. 0 or `EINVAL` (NULL).
//
// # Safety
// `attr` is NULL or writable.
int turq_attr_init(struct turq_attr_t *attr);

// Makes `attr` unusable until initialised again. 0 or `EINVAL`.
//
// # Safety
// `attr` is NULL or points to a `turq_attr_t`.
int turq_attr_destroy(struct turq_attr_t *attr);

// Usable stack size in bytes (0: the default; rounded up to 64 KiB at
// least). `EINVAL` above 1 GiB.
//
// # Safety
// `attr` is NULL or points to a `turq_attr_t`.
int turq_attr_setstacksize(struct turq_attr_t *attr, uintptr_t bytes);

// # Safety
// `attr` is NULL or points to a `turq_attr_t`; `bytes` is NULL or writable.
int turq_attr_getstacksize(const struct turq_attr_t *attr, uintptr_t *bytes);

// The thread's slice in microseconds: how long it runs before it is
// stopped and put behind the other runnable work. 0: cooperative (stopped
// never; it switches only when it waits or yields).
//
// # Safety
// `attr` is NULL or points to a `turq_attr_t`.
int turq_attr_setslice(struct turq_attr_t *attr, uint64_t us);

// `TURQ_CREATE_JOINABLE` or `TURQ_CREATE_DETACHED`; else `EINVAL`.
//
// # Safety
// `attr` is NULL or points to a `turq_attr_t`.
int turq_attr_setdetachstate(struct turq_attr_t *attr, int state);

// A name for dumps and tracing (at most 31 bytes are kept).
//
// # Safety
// `attr` is NULL or points to a `turq_attr_t`; `name` is NULL or a
// NUL-terminated string.
int turq_attr_setname(struct turq_attr_t *attr, const char *name);

// Writes the live green threads to `fd`, one line each: id, name, state,
// what it waits on, worker and counters (as `TURQ_DUMP_SIGNAL` does).
// 0, or the errno of a failed `write`.
int turq_dump(int fd);

// Starts the runtime green threads run on, with `workers` OS threads (0:
// one per CPU) and a default slice of `slice_us` (0: 2 ms). Optional: the
// first `turq_create` starts it otherwise (with `TURQ_WORKERS` and
// `TURQ_SLICE_US` if set). With `TURQ_DUMP_SIGNAL` set (`SIGQUIT`, `USR1`,
// a number...), that signal makes the process write its live green threads
// to stderr (or append them to `TURQ_DUMP_FILE`) and go on. 0, `EBUSY`
// (already started), `EAGAIN`.
int turq_runtime_init(uint32_t workers, uint64_t slice_us);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* TURQUOISE_H */
