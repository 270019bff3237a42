//! Which parts of libc stay the program's when libc itself is isolated.
//!
//! Naming `libc` in the selection gives each libset its own copy of libc
//! (the copy the namespace loads anyway), so that code an isolated function
//! runs inside libc (`memcpy`, `printf` into its own buffers, `qsort`, ...)
//! is preemptible too. What is process-wide cannot be copied; the list is
//! derived for glibc 2.36 (libpthread, libdl and librt live in libc.so.6
//! since 2.34) and `docs/safety.md` ("gotcha") gives the reasons:
//!
//! - [`shared`] functions are always the program's (calls to them from a
//!   libset go to the program's libc, where linger defers as before);
//! - [`file_arg`] functions take a `FILE *` and go to the copy only when
//!   that stream is the copy's own (its `stdin`, `stdout`, `stderr`); a
//!   stream the caller opened stays the caller's libc's, with its lock;
//! - [`shared_variable`] variables are aliased to the program's;
//! - [`mirrored`] functions run in the copy, then in the program's libc.
//!
//! Plain data, no unsafe code: the tables are tested against the libc on
//! the machine.

/// Prefixes of functions that stay the program's.
const SHARED_PREFIXES: &[&str] = &[
    // Threads and their synchronisation (the thread list, robust mutex
    // lists and cancellation are the process's).
    "pthread_", "__pthread_", "_pthread_", "sem_", "thrd_", "mtx_", "cnd_", "tss_", "__nptl", "__libc_pthread",
    // The loader and TLS.
    "dl", "_dl_", "__libc_dl", "__tls_",
    // The heap.
    "malloc", "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign", "__libc_valloc",
    "__libc_pvalloc", "__libc_free", "mallinfo", "mallopt", "mcheck", "mprobe", "mtrace", "muntrace",
    // Processes and exit (atexit lists, atfork handlers, stdio flushed at exit).
    "posix_spawn", "exec", "__cxa_", "__libc_start", "argp_", "__libc_freeres",
    // Signal dispositions and masks.
    "sig", "__sig", "bsd_signal", "sysv_signal", "__sysv_signal", "ssignal", "gsignal",
    // The environment, user and group ids (setxid signals every thread).
    "setenv", "unsetenv", "putenv", "clearenv", "setuid", "setgid", "seteuid", "setegid", "setreuid",
    "setregid", "setresuid", "setresgid", "setgroups", "initgroups",
    // Name services and the resolver: they load modules and keep caches.
    "getpw", "getgr", "getsp", "gethost", "getaddrinfo", "getnameinfo", "freeaddrinfo", "gai_", "getserv",
    "getproto", "getnet", "getrpc", "getalias", "setpw", "endpw", "setgr", "endgr", "setsp", "endsp",
    "sethost", "endhost", "setserv", "endserv", "setproto", "endproto", "setnet", "endnet", "setrpc", "endrpc",
    "setalias", "endalias", "innetgr", "getgrouplist", "res_", "__res_", "__dn_", "dn_", "__h_errno", "herror",
    "hstrerror", "iconv", "ether_", "rcmd", "rexec", "rresvport", "ruserok", "__nss", "_nss",
    // Helper threads.
    "timer_create", "timer_delete", "mq_notify", "aio_", "lio_listio",
    // Messages the program's textdomain translates.
    "gettext", "dgettext", "dcgettext", "ngettext", "dngettext", "dcngettext", "textdomain", "bindtextdomain",
    "bind_textdomain_codeset", "__dcgettext", "__dgettext",
    // State the program reads directly through variables that a
    // position-independent executable takes by COPY relocation.
    "getopt", "__getopt", "tzset", "localtime", "mktime", "timelocal", "ctime", "__tz",
];

/// Exact names of functions that stay the program's.
const SHARED_NAMES: &[&str] = &[
    // The heap, and what returns memory the caller frees or reallocates.
    "free", "cfree", "calloc", "realloc", "reallocarray", "valloc", "pvalloc", "memalign", "posix_memalign",
    "aligned_alloc", "strdup", "strndup", "__strdup", "__strndup", "wcsdup", "asprintf", "vasprintf", "__asprintf",
    "__asprintf_chk", "__vasprintf_chk", "getline", "getdelim", "__getdelim", "realpath", "canonicalize_file_name",
    "get_current_dir_name", "getcwd", "__getcwd_chk", "tempnam", "scandir", "scandir64", "scandirat", "scandirat64",
    "glob", "glob64", "globfree", "globfree64", "wordexp", "wordfree", "brk", "sbrk", "__sbrk",
    // Streams the caller may use: made by the program's libc.
    "fopen", "fopen64", "fdopen", "freopen", "freopen64", "fmemopen", "open_memstream", "open_wmemstream",
    "fopencookie", "tmpfile", "tmpfile64", "popen", "pclose", "_IO_fopen", "_IO_fdopen", "_IO_popen",
    "_IO_proc_open", "_IO_proc_close", "fcloseall", "_flushlbf", "_IO_flush_all",
    // Processes and exit.
    "fork", "vfork", "_Fork", "__fork", "system", "clone", "__clone", "clone3", "daemon", "exit", "_exit", "_Exit",
    "quick_exit", "at_quick_exit", "on_exit", "abort", "__register_atfork", "__libc_single_threaded",
    "error", "error_at_line", "err", "errx", "verr", "verrx", "__assert_fail", "__assert_perror_fail", "__assert",
    // Signals sent to this thread or process.
    "raise", "kill", "tgkill", "killpg", "pause",
    // errno's address (the copies' errno is aliased to the program's).
    "__errno_location",
    // (Locale objects and the thread's locale, `newlocale` and `uselocale`,
    // are the copy's, as its global locale is: its functions read the
    // thread's locale from its own thread-local word and cache conversion
    // steps in the locale's data, so a locale made by the program's libc
    // would be half-read by the copy's code, and glibc's read-only C locale
    // would be written. A reset sets that word back to the global locale
    // on each thread's next entry: `libset::thread_ready`.)
    // Unwinding and backtraces load libgcc_s.
    "backtrace", "backtrace_symbols", "backtrace_symbols_fd", "__libc_dlopen_mode", "__libc_dlsym",
    // The clock of the calling thread's timer, and the break.
    "__curbrk",
];

/// Does the function `name` of libc stay the program's?
pub(crate) fn shared(name: &str) -> bool {
    SHARED_NAMES.contains(&name) || SHARED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Does a call to `name` reach both libcs: the copy's, whose state the
/// copy's functions use, then the program's with the same arguments? Only
/// `setlocale`: the global locale is the process's, and both the copy's
/// functions and those [`shared`] above (`asprintf`, `gettext`, `error`)
/// read it (`libset::setlocale_both`).
pub(crate) fn mirrored(name: &str) -> bool {
    name == "setlocale"
}

/// Variables of libc that stay the program's in every libset: the copies'
/// own references to them are pointed at the program's.
pub(crate) fn shared_variable(name: &str) -> bool {
    matches!(
        name,
        "environ" | "__environ" | "_environ" | "__libc_single_threaded" | "__curbrk" | "optarg" | "optind" | "opterr"
            | "optopt" | "tzname" | "__tzname" | "timezone" | "__timezone" | "daylight" | "__daylight"
            | "program_invocation_name" | "program_invocation_short_name" | "__progname" | "__progname_full"
            | "__libc_enable_secure" | "__libc_stack_end" | "_dl_argv" | "_rtld_global" | "_rtld_global_ro"
    ) || name.starts_with("__malloc") || name.ends_with("_hook") || name.starts_with("_thread_db")
}

/// Functions that use a standard stream without being given it.
const IMPLICIT_STREAM: &[&str] = &[
    "printf", "vprintf", "puts", "putchar", "putchar_unlocked", "getchar", "getchar_unlocked", "gets", "scanf",
    "vscanf", "__isoc99_scanf", "__isoc99_vscanf", "perror", "psignal", "psiginfo", "wprintf", "vwprintf",
    "putwchar", "putwchar_unlocked", "getwchar", "getwchar_unlocked", "wscanf", "vwscanf", "__isoc99_wscanf",
    "__isoc99_vwscanf", "__printf_chk", "__vprintf_chk", "__wprintf_chk", "__vwprintf_chk", "__gets_chk", "warn",
    "warnx", "vwarn", "vwarnx", "_IO_printf", "_IO_puts",
];

/// Does `name` read or write `stdin`, `stdout` or `stderr` implicitly?
pub(crate) fn implicit_stream(name: &str) -> bool {
    IMPLICIT_STREAM.contains(&name)
}

/// Is `name` one of libc's standard streams (the variable or the FILE)?
pub(crate) fn std_stream(name: &str) -> bool {
    matches!(name, "stdin" | "stdout" | "stderr" | "_IO_2_1_stdin_" | "_IO_2_1_stdout_" | "_IO_2_1_stderr_")
}

/// Functions that take a stream, with the stream's argument (1-based,
/// always in a register: 5 at most). From the prototypes in glibc 2.36's
/// headers (`stdio.h`, `stdio_ext.h`, `wchar.h`, `mntent.h`, `pwd.h`,
/// `grp.h`, `shadow.h`, fortified and `__isoc99_` variants) and libio's
/// exported `_IO_` entry points.
const FILE_ARGS: &[(&str, u8)] = &[
    ("_IO_fclose", 1), ("_IO_feof", 1), ("_IO_ferror", 1), ("_IO_fflush", 1), ("_IO_fgetpos", 1),
    ("_IO_fgetpos64", 1), ("_IO_fgets", 3), ("_IO_flockfile", 1), ("_IO_fprintf", 1), ("_IO_fputs", 2),
    ("_IO_fread", 4), ("_IO_fsetpos", 1), ("_IO_fsetpos64", 1), ("_IO_ftell", 1), ("_IO_ftrylockfile", 1),
    ("_IO_funlockfile", 1), ("_IO_fwrite", 4), ("_IO_getc", 1), ("_IO_getline", 1), ("_IO_getline_info", 1),
    ("_IO_padn", 1), ("_IO_peekc_locked", 1), ("_IO_putc", 2), ("_IO_seekoff", 1), ("_IO_seekpos", 1),
    ("_IO_setbuffer", 1), ("_IO_setvbuf", 1), ("_IO_sgetn", 1), ("_IO_ungetc", 2), ("_IO_vfprintf", 1),
    ("_IO_vfscanf", 1), ("__fbufsize", 1), ("__fgets_chk", 4), ("__fgets_unlocked_chk", 4), ("__fgetws_chk", 4),
    ("__fgetws_unlocked_chk", 4), ("__flbf", 1), ("__fpending", 1), ("__fprintf_chk", 1), ("__fread_chk", 5),
    ("__fread_unlocked_chk", 5), ("__freadable", 1), ("__freading", 1), ("__fsetlocking", 1), ("__fwprintf_chk", 1),
    ("__fwritable", 1), ("__fwriting", 1), ("__isoc99_fscanf", 1), ("__isoc99_fwscanf", 1),
    ("__isoc99_vfscanf", 1), ("__isoc99_vfwscanf", 1), ("__overflow", 1), ("__uflow", 1), ("__underflow", 1),
    ("__vfprintf_chk", 1), ("__vfwprintf_chk", 1), ("__woverflow", 1), ("__wuflow", 1), ("__wunderflow", 1),
    ("addmntent", 1), ("clearerr", 1), ("clearerr_unlocked", 1), ("endmntent", 1), ("fclose", 1), ("feof", 1),
    ("feof_unlocked", 1), ("ferror", 1), ("ferror_unlocked", 1), ("fflush", 1), ("fflush_unlocked", 1),
    ("fgetc", 1), ("fgetc_unlocked", 1), ("fgetgrent", 1), ("fgetgrent_r", 1), ("fgetpos", 1), ("fgetpos64", 1),
    ("fgetpwent", 1), ("fgetpwent_r", 1), ("fgets", 3), ("fgets_unlocked", 3), ("fgetspent", 1), ("fgetspent_r", 1),
    ("fgetwc", 1), ("fgetwc_unlocked", 1), ("fgetws", 3), ("fgetws_unlocked", 3), ("fileno", 1),
    ("fileno_unlocked", 1), ("flockfile", 1), ("fprintf", 1), ("fputc", 2), ("fputc_unlocked", 2), ("fputs", 2),
    ("fputs_unlocked", 2), ("fputwc", 2), ("fputwc_unlocked", 2), ("fputws", 2), ("fputws_unlocked", 2),
    ("fread", 4), ("fread_unlocked", 4), ("fscanf", 1), ("fseek", 1), ("fseeko", 1), ("fseeko64", 1),
    ("fsetpos", 1), ("fsetpos64", 1), ("ftell", 1), ("ftello", 1), ("ftello64", 1), ("ftrylockfile", 1),
    ("funlockfile", 1), ("fwide", 1), ("fwprintf", 1), ("fwrite", 4), ("fwrite_unlocked", 4), ("fwscanf", 1),
    ("getc", 1), ("getc_unlocked", 1), ("getmntent", 1), ("getmntent_r", 1), ("getw", 1), ("getwc", 1),
    ("getwc_unlocked", 1), ("printf_size", 1), ("putc", 2), ("putc_unlocked", 2), ("putgrent", 2),
    ("putpwent", 2), ("putspent", 2), ("putw", 2), ("putwc", 2), ("putwc_unlocked", 2), ("rewind", 1),
    ("setbuf", 1), ("setbuffer", 1), ("setlinebuf", 1), ("setvbuf", 1), ("ungetc", 2), ("ungetwc", 2),
    ("vfprintf", 1), ("vfscanf", 1), ("vfwprintf", 1), ("vfwscanf", 1),
];

/// The stream argument of `name`, if it takes one (and is not [`shared`]).
pub(crate) fn file_arg(name: &str) -> Option<u8> {
    FILE_ARGS.iter().find(|(n, _)| *n == name).map(|&(_, a)| a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_threads_and_the_loader_stay_the_programs() {
        for f in ["malloc", "free", "posix_memalign", "pthread_mutex_lock", "pthread_create", "dlopen", "fork", "exit", "sigaction", "setenv", "getaddrinfo", "strdup", "fopen", "getopt_long", "localtime_r", "__errno_location"] {
            assert!(shared(f), "{f}");
        }
        for f in ["memcpy", "strlen", "printf", "qsort", "snprintf", "strtod", "inflate", "getenv", "fwrite", "puts", "setlocale", "newlocale", "uselocale", "freelocale", "nl_langinfo"] {
            assert!(!shared(f), "{f}");
        }
    }

    #[test]
    fn stream_arguments_are_in_registers_and_not_shared_functions() {
        assert_eq!(file_arg("fwrite"), Some(4));
        assert_eq!(file_arg("fputs"), Some(2));
        assert_eq!(file_arg("memcpy"), None);
        for (n, a) in FILE_ARGS {
            assert!((1..=5).contains(a), "{n}");
            // A stream function is dispatched by its stream, never shared
            // wholesale (those that make streams are, and take none).
            assert!(!shared(n), "{n} is both");
        }
    }

    #[test]
    fn every_named_function_exists_in_this_libc() {
        let info = crate::base::elf::Info::read("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
        let defined: std::collections::HashSet<&str> = info.exports.iter().map(|e| e.name.as_str()).collect();
        let missing: Vec<&str> =
            FILE_ARGS.iter().map(|f| f.0).chain(IMPLICIT_STREAM.iter().copied()).filter(|n| !defined.contains(n)).collect();
        assert!(missing.is_empty(), "{missing:?}");
        for n in ["malloc", "fopen", "pthread_create", "setlocale", "getline"] {
            assert!(defined.contains(n), "{n}");
        }
    }
}
