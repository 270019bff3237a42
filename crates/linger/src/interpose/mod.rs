//! libc functions that would notice preemption, and their wrappers.
//!
//! The preemption signal interrupts whatever the function is doing, system
//! calls included. Most calls restart transparently (our handler uses
//! SA_RESTART), but some never do (signal(7), "Interruption of system calls
//! and library functions by signal handlers"), some return short counts, and
//! a program can switch preemption off by accident through the signal API.
//! These wrappers, exported under the libc names so that they interpose the
//! program's calls (libc's internal calls are unaffected), keep all of that
//! invisible:
//!
//! - [`sleep`]: the sleep family sleeps its full duration;
//! - [`io`]: reads, writes, socket calls and SysV IPC: no EINTR and no short
//!   transfer caused by preemption;
//! - [`wait`]: `poll`, `select`, `epoll_wait` and friends, and the calls that
//!   wait for signals: retried with the remaining timeout;
//! - [`signals`]: `sigaction`, `signal`, masks and signal sets: the
//!   preemption signal cannot be replaced, ignored or blocked, and the
//!   program's own handlers are counted so that the retries above never hide
//!   an EINTR the program caused itself;
//! - [`child`]: `waitpid` and the rest of the `wait` family: no EINTR;
//! - [`exec`]: the `exec` family: the new image starts with no preemption
//!   signal pending, no timer and default disposition;
//! - [`child_env`]: with `linger-run --children`, every image the program
//!   starts (`exec`, `posix_spawn`, `system`, `popen`) gets linger-run's
//!   variables, which the program itself does not see;
//! - [`loader`]: `dlclose`: the code table stops describing the code before
//!   it is unmapped;
//! - [`context`]: `setcontext`, `swapcontext` and the `longjmp` family:
//!   a mask they restore never blocks the preemption signal;
//! - [`stack`]: `pthread_getattr_np` describes the stack the caller is
//!   really on;
//! - [`fds`]: `close`, `dup2`, `dup3`, `close_range`: tell the park seam's
//!   close observer which numbers were closed or replaced; with `socket`,
//!   `pipe`, `dup`, `fcntl`, `ioctl` and `setsockopt`, keep [`fd_modes`]'
//!   table of what parked calls must honour (`O_NONBLOCK`, socket
//!   timeouts) without asking the kernel at each park;
//! - [`exit`]: `pthread_exit` inside a function tells the function's base
//!   its value (`crate::machine::exit`).
//!
//! Every blocking wrapper marks its call with [`call::blocking`], so the handler may
//! stop the function at the system call instruction itself, where the libc
//! wrapper below holds no lock. Outside a preemptible function the wrappers
//! cost one thread-local load and then call libc as is.

pub(crate) mod call;
pub(crate) mod child;
pub(crate) mod child_env;
pub(crate) mod context;
pub(crate) mod exec;
pub(crate) mod exit;
pub(crate) mod fd_modes;
pub(crate) mod fds;
pub(crate) mod files;
pub(crate) mod io;
pub(crate) mod loader;
pub mod park;
pub(crate) mod parking;
pub(crate) mod paths;
pub(crate) mod signals;
pub(crate) mod sleep;
pub(crate) mod stack;
pub(crate) mod wait;

/// Resolves the real functions ahead of time, outside any preemptible
/// function (dlsym takes the loader's lock).
pub(crate) fn prepare() {
    sleep::prepare();
    stack::prepare();
    child::prepare();
    child_env::prepare();
    io::prepare();
    files::prepare();
    paths::prepare();
    fds::prepare();
    wait::prepare();
    signals::prepare();
    exec::prepare();
    loader::prepare();
    context::prepare();
    crate::machine::exit::prepare();
}
