/*
 * turquoise: green threads for C (pthread-shaped), preemptive, with blocking
 * calls that park the green thread instead of its worker.
 *
 *   turq_t t;
 *   turq_create(&t, serve, conn);        // or turq_create_attr(&t, NULL, serve, conn)
 *   turq_join(t, NULL);
 *
 * Errors are return values (0 or an errno code), as with pthreads, for every
 * function here (turq_sem_* too, unlike sem_*: no -1 and errno). Link with
 * -lturquoise (it contains liblinger: do not link both).
 *
 * turq_mutex_t, turq_cond_t, turq_sem_t and turq_ec_t (an event count) are
 * turquoise::sync's primitives: a green thread that waits on one parks (its
 * worker runs other work), an OS thread blocks, on the same object. Their
 * storage is the caller's; a NULL, uninitialised or destroyed object is
 * refused with EINVAL, and destroying one that is locked or waited on with
 * EBUSY. As with pthreads, destroying an object while another thread may
 * still start a call on it, or moving or copying it, is the caller's error.
 */

#ifndef TURQUOISE_H
#define TURQUOISE_H

/* Generated from crates/turquoise/src/ffi.rs by cbindgen (crates/headers). Do not edit: run `make header` after changing the C API; the test `headers_are_current` fails while this file is stale. */

#include <stddef.h>
#include <stdint.h>
#include <time.h>
// Declared at file scope, so that the prototypes below name this struct
// under -std=c99, where <time.h> leaves it undeclared (it is POSIX's).
struct timespec;

// `turq_join`'s value for a thread that was cancelled (as `PTHREAD_CANCELED`).
#define TURQ_CANCELED ((void *)-1)

// Static initialisers (as PTHREAD_MUTEX_INITIALIZER): the object is made at
// its first use. The numbers are the kinds' magic numbers in ffi.rs.
#define TURQ_MUTEX_INITIALIZER { { 0x746d7478u, 0, 0 } }
#define TURQ_COND_INITIALIZER { { 0x74636e64u, 0, 0 } }
#define TURQ_EC_INITIALIZER { { 0x74657663u, 0, 0 } }

// `turq_attr_setdetachstate`: the thread can be joined (the default).
#define TURQ_CREATE_JOINABLE 0

// `turq_attr_setdetachstate`: nobody joins the thread; it is forgotten at its end.
#define TURQ_CREATE_DETACHED 1

// The largest value of a `turq_sem_t` (as `SEM_VALUE_MAX`).
#define TURQ_SEM_VALUE_MAX (unsigned int)INT32_MAX

// Condition variable attributes: none yet (pass NULL).
typedef struct turq_condattr_t turq_condattr_t;

// Mutex attributes: none yet (pass NULL).
typedef struct turq_mutexattr_t turq_mutexattr_t;

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

// The storage of a `turq_mutex_t`, `turq_cond_t`, `turq_sem_t` or
// `turq_ec_t` (the fields are not part of the API; all are accessed
// atomically once initialised).
typedef struct turq_sync_object_t {
  // The kind's magic number while initialised (`DYING` during a destroy,
  // `DEAD` after it).
  uint32_t state;
  // Calls in progress on the object.
  uint32_t users;
  // The Rust object's `Box`, or 0 until the first use after a static initialiser.
  uintptr_t obj;
} turq_sync_object_t;

// A mutex (`TURQ_MUTEX_INITIALIZER`, or `turq_mutex_init`): waiting parks
// a green thread and blocks an OS thread. Error-checking: it records its
// holder (the green thread, else the OS thread).
typedef struct turq_mutex_t {
  struct turq_sync_object_t o;
} turq_mutex_t;

// A condition variable (`TURQ_COND_INITIALIZER`, or `turq_cond_init`).
typedef struct turq_cond_t {
  struct turq_sync_object_t o;
} turq_cond_t;

// A counting semaphore (`turq_sem_init`).
typedef struct turq_sem_t {
  struct turq_sync_object_t o;
} turq_sem_t;

// An event count (`TURQ_EC_INITIALIZER`, or `turq_ec_init`): a version
// number (modulo 2^31) that waiters sleep on until it changes.
typedef struct turq_ec_t {
  struct turq_sync_object_t o;
} turq_ec_t;

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

// A yield check, for a green thread made cooperative
// (`turq_attr_setslice(attr, 0)`: it switches only when it waits or
// yields): yields if its slice has passed since it last ran, else returns
// at once (a call and one thread-local load). Call it in long loops, so
// that the worker's other threads get their turn. Does nothing in a
// preemptive green thread, an ordinary thread, or a no-yield scope.
// Always 0.
int turq_checkpoint(void);

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
// first `turq_create` starts it otherwise (with `TURQ_WORKERS`,
// `TURQ_SLICE_US` and `TURQ_GRANULARITY_US` if set). With `TURQ_DUMP_SIGNAL` set (`SIGQUIT`, `USR1`,
// a number...), that signal makes the process write its live green threads
// to stderr (or append them to `TURQ_DUMP_FILE`) and go on. 0, `EBUSY`
// (already started), `EAGAIN`.
int turq_runtime_init(uint32_t workers,
                      uint64_t slice_us);

// Makes `m` an unlocked mutex. `attr` must be NULL (no attributes yet).
// 0 or `EINVAL`. Initialising a mutex in use is the caller's error (the
// old one is leaked).
//
// # Safety
// `m` is NULL or points to writable `turq_mutex_t` storage, not accessed
// by others meanwhile.
int turq_mutex_init(struct turq_mutex_t *m, const struct turq_mutexattr_t *attr);

// Locks `m`: parks a green thread, blocks an OS thread, until it is free.
// A green thread stopped by its slice while it holds it keeps it, and the
// others of its worker that want it park (no worker is blocked). 0,
// `EINVAL` (NULL, not initialised, destroyed), `EDEADLK` (the caller holds
// it), `EIO` (the calling green thread was cancelled meanwhile: not held).
//
// # Safety
// `m` is NULL or points to a `turq_mutex_t` (initialised or not).
int turq_mutex_lock(struct turq_mutex_t *m);

// Locks `m` if it is free now: 0, `EBUSY` (held, by the caller too), `EINVAL`.
//
// # Safety
// As `turq_mutex_lock`.
int turq_mutex_trylock(struct turq_mutex_t *m);

// Locks `m`, waiting until the `CLOCK_REALTIME` time `abstime` at most
// (as `pthread_mutex_timedlock`): 0, `ETIMEDOUT`, `EINVAL` (also for a
// NULL or malformed `abstime`), `EDEADLK`, `EIO`.
//
// # Safety
// As `turq_mutex_lock`; `abstime` is NULL or readable.
int turq_mutex_timedlock(struct turq_mutex_t *m, const struct timespec *abstime);

// Unlocks `m`: 0, `EPERM` (the caller does not hold it), `EINVAL`.
//
// # Safety
// As `turq_mutex_lock`.
int turq_mutex_unlock(struct turq_mutex_t *m);

// Frees `m`'s resources: 0, `EBUSY` (locked, or a call on it is in
// progress), `EINVAL` (not initialised, or already destroyed).
//
// # Safety
// As `turq_mutex_lock`.
int turq_mutex_destroy(struct turq_mutex_t *m);

// Makes `c` a condition variable. `attr` must be NULL (no attributes yet:
// timed waits take `CLOCK_REALTIME` times). 0 or `EINVAL`.
//
// # Safety
// `c` is NULL or points to writable `turq_cond_t` storage, not accessed by
// others meanwhile.
int turq_cond_init(struct turq_cond_t *c, const struct turq_condattr_t *attr);

// Unlocks `m` (which the caller holds), waits for a signal or broadcast
// on `c` (parks a green thread, blocks an OS thread), and locks `m` again.
// Wake-ups may be spurious: wait in a loop. 0, `EPERM` (the caller does
// not hold `m`), `EINVAL`, `EIO` (the calling green thread was cancelled
// meanwhile: `m` may not be held).
//
// # Safety
// `c` and `m` are NULL or point to a `turq_cond_t` and a `turq_mutex_t`
// (initialised or not).
int turq_cond_wait(struct turq_cond_t *c, struct turq_mutex_t *m);

// `turq_cond_wait` until the `CLOCK_REALTIME` time `abstime` at most:
// `ETIMEDOUT` then (with `m` locked again), else as `turq_cond_wait`.
//
// # Safety
// As `turq_cond_wait`; `abstime` is NULL or readable.
int turq_cond_timedwait(struct turq_cond_t *c,
                        struct turq_mutex_t *m,
                        const struct timespec *abstime);

// Wakes one waiter of `c`, if any. 0 or `EINVAL`.
//
// # Safety
// `c` is NULL or points to a `turq_cond_t` (initialised or not).
int turq_cond_signal(struct turq_cond_t *c);

// Wakes every waiter of `c`. 0 or `EINVAL`.
//
// # Safety
// As `turq_cond_signal`.
int turq_cond_broadcast(struct turq_cond_t *c);

// Frees `c`'s resources: 0, `EBUSY` (a thread waits on it), `EINVAL`.
//
// # Safety
// As `turq_cond_signal`.
int turq_cond_destroy(struct turq_cond_t *c);

// Makes `s` a semaphore of value `value`. 0, or `EINVAL` (NULL, or
// `value` above `TURQ_SEM_VALUE_MAX`). Unlike `sem_init`, the `turq_sem_*`
// functions return the error number (0 on success), as pthread's do, and
// leave `errno` alone.
//
// # Safety
// `s` is NULL or points to writable `turq_sem_t` storage, not accessed by
// others meanwhile.
int turq_sem_init(struct turq_sem_t *s, unsigned int value);

// Decrements `s`, waiting while it is 0 (parks a green thread, blocks an
// OS thread; waiters are served in order). 0, `EINVAL`, `EIO` (the calling
// green thread was cancelled meanwhile: not decremented).
//
// # Safety
// `s` is NULL or points to a `turq_sem_t` (initialised or not).
int turq_sem_wait(struct turq_sem_t *s);

// Decrements `s` if it is above 0 now: 0, `EAGAIN`, `EINVAL`.
//
// # Safety
// As `turq_sem_wait`.
int turq_sem_trywait(struct turq_sem_t *s);

// `turq_sem_wait` until the `CLOCK_REALTIME` time `abstime` at most:
// `ETIMEDOUT` then, else as `turq_sem_wait` (`EINVAL` for a NULL or
// malformed `abstime` too).
//
// # Safety
// As `turq_sem_wait`; `abstime` is NULL or readable.
int turq_sem_timedwait(struct turq_sem_t *s, const struct timespec *abstime);

// Increments `s`, waking its first waiter if any: 0, `EOVERFLOW` (at
// `TURQ_SEM_VALUE_MAX`; concurrent posts may pass it by as many as there
// are posters), `EINVAL`.
//
// # Safety
// As `turq_sem_wait`.
int turq_sem_post(struct turq_sem_t *s);

// Stores `s`'s value in `*value` (0 while threads wait). 0 or `EINVAL`.
//
// # Safety
// As `turq_sem_wait`; `value` is NULL or writable.
int turq_sem_getvalue(struct turq_sem_t *s, int *value);

// Frees `s`'s resources: 0, `EBUSY` (a thread waits on it), `EINVAL`.
//
// # Safety
// As `turq_sem_wait`.
int turq_sem_destroy(struct turq_sem_t *s);

// Makes `ec` an event count at version 0, for any number of producers.
// 0 or `EINVAL`.
//
// An event count replaces a condition variable where the condition is
// data written without a lock: a waiter reads the version
// (`turq_ec_value`), looks at the data, and if it must wait calls
// `turq_ec_wait` with the version it read; a producer changes the data,
// then increments. A change in between is never missed: the wait returns
// at once when the version is no longer the one given. An increment
// nobody waits for is one atomic add.
//
// # Safety
// `ec` is NULL or points to writable `turq_ec_t` storage, not accessed by
// others meanwhile.
int turq_ec_init(struct turq_ec_t *ec);

// Makes `ec` an event count at version 0 for one producer: an increment
// nobody waits for is one plain (not `lock`ed) `add` on x86-64 and a
// branch on the CPU flags it set, and waiters pay for it with an
// asymmetric fence before they sleep. 0 or `EINVAL`.
//
// The contract: one thread at a time calls `turq_ec_inc` and `turq_ec_add`
// on it (the producer may change threads, with the hand-over ordered by
// some other synchronisation). Concurrent increments are not memory-unsafe
// but may be lost, and with them the wake-ups they owed: a waiter may then
// sleep until a later increment. The other functions may be called from
// any thread.
//
// # Safety
// As `turq_ec_init`.
int turq_ec_init_single(struct turq_ec_t *ec);

// Stores `ec`'s version in `*value` (it acquires what the increment that
// made it released). 0 or `EINVAL`.
//
// # Safety
// `ec` is NULL or points to a `turq_ec_t` (initialised or not); `value`
// is NULL or writable.
int turq_ec_value(struct turq_ec_t *ec, uint32_t *value);

// Adds one to `ec`'s version and wakes its waiters. 0 or `EINVAL`.
//
// # Safety
// As `turq_ec_value`.
int turq_ec_inc(struct turq_ec_t *ec);

// Adds `n` (modulo 2^31) to `ec`'s version and wakes its waiters. 0 or
// `EINVAL`.
//
// # Safety
// As `turq_ec_value`.
int turq_ec_add(struct turq_ec_t *ec, uint32_t n);

// Waits until `ec`'s version is not `old` (parks a green thread, blocks
// an OS thread; returns at once if it already differs) and stores the new
// version in `*now` if `now` is not NULL. 0, `EINVAL`, `EIO` (the calling
// green thread was cancelled meanwhile).
//
// # Safety
// As `turq_ec_value`, with `now` NULL or writable.
int turq_ec_wait(struct turq_ec_t *ec, uint32_t old, uint32_t *now);

// `turq_ec_wait` until the `CLOCK_REALTIME` time `abstime` at most:
// `ETIMEDOUT` then (`*now` untouched), else as `turq_ec_wait` (`EINVAL`
// for a NULL or malformed `abstime` too).
//
// # Safety
// As `turq_ec_wait`; `abstime` is NULL or readable.
int turq_ec_timedwait(struct turq_ec_t *ec,
                      uint32_t old,
                      const struct timespec *abstime,
                      uint32_t *now);

// Frees `ec`'s resources: 0, `EBUSY` (a thread waits on it), `EINVAL`.
//
// # Safety
// As `turq_ec_value`.
int turq_ec_destroy(struct turq_ec_t *ec);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* TURQUOISE_H */
