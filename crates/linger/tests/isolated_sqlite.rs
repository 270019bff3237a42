//! sqlite3 isolated: queries preempted every 20-100 us inside sqlite and
//! cancelled at random points, while the caller uses its own sqlite
//! between the slices.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Once;
use std::time::Duration;

use linger::{Builder, Linger};

/// A builder for isolated launches.
fn isolated() -> Builder {
    // SAFETY: the functions here open, use and close their own sqlite
    // connection inside themselves and return a number.
    unsafe { Builder::new().isolated(true) }
}

#[link(name = "sqlite3")]
extern "C" {
    fn sqlite3_open(path: *const c_char, db: *mut *mut c_void) -> c_int;
    fn sqlite3_close(db: *mut c_void) -> c_int;
    fn sqlite3_exec(db: *mut c_void, sql: *const c_char, cb: *const c_void, arg: *mut c_void, err: *mut *mut c_char) -> c_int;
    fn sqlite3_prepare_v2(db: *mut c_void, sql: *const c_char, n: c_int, stmt: *mut *mut c_void, tail: *mut *const c_char) -> c_int;
    fn sqlite3_bind_int64(stmt: *mut c_void, i: c_int, v: i64) -> c_int;
    fn sqlite3_step(stmt: *mut c_void) -> c_int;
    fn sqlite3_reset(stmt: *mut c_void) -> c_int;
    fn sqlite3_column_int64(stmt: *mut c_void, i: c_int) -> i64;
    fn sqlite3_finalize(stmt: *mut c_void) -> c_int;
}

const OK: c_int = 0;
const ROW: c_int = 100;
const DONE: c_int = 101;

/// A connection to a private in-memory database.
struct Db(*mut c_void);

impl Db {
    fn open() -> Db {
        let mut db = std::ptr::null_mut();
        let name = CString::new(":memory:").unwrap();
        // SAFETY: sqlite's documented API.
        assert_eq!(unsafe { sqlite3_open(name.as_ptr(), &mut db) }, OK);
        Db(db)
    }

    fn exec(&self, sql: &str) {
        let sql = CString::new(sql).unwrap();
        // SAFETY: an open connection and a C string.
        let r = unsafe { sqlite3_exec(self.0, sql.as_ptr(), std::ptr::null(), std::ptr::null_mut(), std::ptr::null_mut()) };
        assert_eq!(r, OK);
    }

    /// Runs `sql` (one statement) with `args` bound, once per row of
    /// `args`; returns the first column of the last row it produced.
    fn run(&self, sql: &str, rows: impl Iterator<Item = [i64; 2]>) -> i64 {
        let sql = CString::new(sql).unwrap();
        let mut stmt = std::ptr::null_mut();
        let mut last = 0;
        // SAFETY: sqlite's documented API on an open connection; the
        // statement is finalized before returning.
        unsafe {
            assert_eq!(sqlite3_prepare_v2(self.0, sql.as_ptr(), -1, &mut stmt, std::ptr::null_mut()), OK);
            for args in rows {
                for (i, v) in args.iter().enumerate() {
                    sqlite3_bind_int64(stmt, i as c_int + 1, *v);
                }
                loop {
                    match sqlite3_step(stmt) {
                        ROW => last = sqlite3_column_int64(stmt, 0),
                        DONE => break,
                        e => panic!("sqlite3_step: {e}"),
                    }
                }
                sqlite3_reset(stmt);
            }
            sqlite3_finalize(stmt);
        }
        last
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: opened by us, statements finalized.
        unsafe { sqlite3_close(self.0) };
    }
}

/// The workload: 3000 rows inserted, then an aggregate over a self-join
/// (tens of milliseconds inside sqlite).
fn workload() -> i64 {
    let db = Db::open();
    db.exec("CREATE TABLE t(a INTEGER, b INTEGER); BEGIN");
    db.run("INSERT INTO t VALUES(?1, ?2)", (0..3000).map(|i| [i, (i * 7919) % 1000]));
    db.exec("COMMIT");
    db.run("SELECT sum(x.a * y.b) % 1000000007 FROM t x JOIN t y ON x.b = y.b", std::iter::once([0, 0]))
}

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        linger::isolate(&linger::Selection::parse("libsqlite3").unwrap()).unwrap();
    });
}

fn slice(i: &mut u64) -> Duration {
    *i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    Duration::from_micros(20 + (*i >> 33) % 80)
}

/// The caller's own use of sqlite between two slices.
fn caller_query(db: &Db, n: &mut i64) {
    *n += 1;
    db.run("INSERT INTO c VALUES(?1, ?2)", std::iter::once([*n, *n * 2]));
    assert_eq!(db.run("SELECT count(*) FROM c", std::iter::once([0, 0])), *n);
}

#[test]
fn preempted_queries_give_the_plain_answer_while_the_caller_uses_sqlite() {
    setup();
    let expected = workload();
    let mine = Db::open();
    mine.exec("CREATE TABLE c(a INTEGER, b INTEGER)");
    let (mut rng, mut n, mut stops, mut inside) = (3, 0, 0, 0);
    for _ in 0..20 {
        let mut l = isolated().launch(workload, slice(&mut rng)).unwrap();
        while l.is_continuation() {
            stops += 1;
            inside += u32::from(linger::last_preemption().is_some_and(|p| !p.deferred));
            caller_query(&mine, &mut n);
            linger::resume(&mut l, slice(&mut rng)).unwrap();
        }
        assert!(matches!(l, Linger::Completion(v) if v == expected));
    }
    assert!(stops >= 500, "{stops} stops");
    assert!(inside * 2 >= stops, "{inside} of {stops} stops inside sqlite's copy");
}

#[test]
fn cancelled_queries_reset_the_libset_which_answers_right_again() {
    setup();
    let expected = workload();
    let mine = Db::open();
    mine.exec("CREATE TABLE c(a INTEGER, b INTEGER)");
    let (mut rng, mut n) = (11u64, 0);
    let before = linger::stats();
    for _ in 0..150 {
        // SAFETY: the workload pins nothing and registers no stack address:
        // it only calls sqlite, whose state is reset with the libset.
        let mut l = unsafe { isolated().reuse_stack_on_cancel(true) }.launch(workload, slice(&mut rng)).unwrap();
        for _ in 0..(rng >> 40) % 50 {
            if !l.is_continuation() {
                break;
            }
            caller_query(&mine, &mut n);
            linger::resume(&mut l, slice(&mut rng)).unwrap();
        }
        drop(l);
    }
    let after = linger::stats();
    assert!(after.libset_resets - before.libset_resets >= 100, "{after:?}");
    assert!(after.libset_blocks_freed - before.libset_blocks_freed >= 100, "{after:?}");
    let l = isolated().launch(workload, Duration::MAX).unwrap();
    assert!(matches!(l, Linger::Completion(v) if v == expected));
    assert_eq!(workload(), expected);
}
