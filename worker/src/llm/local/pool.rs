//! The thread pool of the CPU decode path: work is claimed, never assigned, so a thread
//! the scheduler has taken away costs the step nothing.
//!
//! A decode step makes some 200 small products. candle's barrier pool (and any pool that
//! hands each thread its share) ends every product by waiting for every pool thread to
//! check in. On a shared machine (a second credence process, a build, the parser's and
//! encoder's rayon pools beside the engine) a thread is often not running when a product
//! starts; the others then spin until the scheduler runs it again, a time slice per
//! product, and decoding collapses (issue 32: a sweep beside a niced build ran at a
//! fraction of its quiet speed).
//!
//! Here the caller publishes a job (a function over item ranges and the number of
//! items), takes part itself, and waits only for ranges that some thread has claimed: a
//! range is claimed by a compare-and-swap on one word that holds the job's generation
//! and the next unclaimed item, so a thread that wakes after the job has moved on claims
//! nothing and never touches it. A thread that is descheduled before claiming leaves its
//! share to the others; the caller alone can finish any job. Idle threads spin briefly,
//! then yield, then park until the next job.
//!
//! The number of threads follows `RAYON_NUM_THREADS`, as candle's pool and the rest of
//! the process do (the caller is one of them).

use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

/// How long an idle pool thread spins for the next job before it yields its core, and
/// how long it yields before it parks. A decode step's products come tens of
/// microseconds apart, so a thread between two of them never parks.
const SPIN: Duration = Duration::from_micros(50);
const YIELD: Duration = Duration::from_micros(500);

/// How long the caller spins for claimed ranges to finish before it yields its core to
/// whichever thread holds one.
const WAIT_SPIN: Duration = Duration::from_micros(20);

/// Ranges per thread a job is cut into: small enough that a straggler's range is short,
/// few enough that the claims cost nothing beside the work.
const CHUNKS_PER_THREAD: usize = 8;

/// The pool of the process, started on first use.
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(candle_core::utils::get_num_threads()))
}

thread_local! {
    /// True on a pool thread and on a caller inside [`Pool::run`]: a nested call runs
    /// inline.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// A work-claiming thread pool (see the module's documentation).
pub struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// One job at a time; the generation of the last one.
    call: Mutex<u32>,
}

/// What the caller and the pool threads share.
struct Shared {
    /// The job's generation (high 32 bits) and its next unclaimed item (low 32 bits).
    state: AtomicU64,
    /// The job: its item count, range length, the closure and its trampoline. Written
    /// before `state` publishes the generation; read by a thread before it claims, and
    /// only trusted when its claim (a compare-and-swap on `state` from the value it read
    /// before them) succeeds, which proves the job had not changed.
    items: AtomicUsize,
    chunk: AtomicUsize,
    data: AtomicPtr<()>,
    trampoline: AtomicUsize,
    /// Items of the current job whose ranges are finished (by any thread).
    done: AtomicUsize,
    /// Which threads are parked (or about to park), to be woken by the next job.
    parked: Vec<AtomicBool>,
    /// The first panic of a job's closure on a pool thread, raised in the caller.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    stop: AtomicBool,
    handles: OnceLock<Vec<Thread>>,
}

/// The cursor of a closed job: past any job's items, so nothing is claimed.
const CLOSED: usize = u32::MAX as usize;

const fn pack(generation: u32, next: usize) -> u64 {
    ((generation as u64) << 32) | next as u64
}

const fn generation_of(state: u64) -> u32 {
    (state >> 32) as u32
}

const fn next_of(state: u64) -> usize {
    (state & 0xffff_ffff) as usize
}

/// Calls the closure behind `data` on `range`.
///
/// # Safety
/// `data` must point to a live `F`.
unsafe fn trampoline<F: Fn(std::ops::Range<usize>) + Sync>(
    data: *const (),
    range: std::ops::Range<usize>,
) {
    // SAFETY: the caller guarantees `data` points to a live `F`.
    let f = unsafe { &*data.cast::<F>() };
    f(range);
}

type Trampoline = unsafe fn(*const (), std::ops::Range<usize>);

impl Shared {
    /// Claims and runs ranges of the job of generation `generation` until none is left.
    fn work(&self, generation: u32) {
        loop {
            let state = self.state.load(Ordering::Acquire);
            if generation_of(state) != generation {
                return;
            }
            let items = self.items.load(Ordering::Acquire);
            let chunk = self.chunk.load(Ordering::Acquire);
            let data = self.data.load(Ordering::Acquire);
            let call = self.trampoline.load(Ordering::Acquire);
            let start = next_of(state);
            if start >= items {
                return;
            }
            let end = (start + chunk).min(items);
            if self
                .state
                .compare_exchange_weak(
                    state,
                    pack(generation, end),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                continue;
            }
            // The claim succeeded, so `state` still held this generation with `start`
            // unclaimed: the job read above is this generation's, and its caller waits
            // for this range before it returns, so the closure is alive.
            // SAFETY: `call` is the trampoline stored with `data` for this job (both
            // written before the generation was published and not rewritten until the
            // job's items are all done).
            let call: Trampoline = unsafe { std::mem::transmute::<usize, Trampoline>(call) };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: see above; `data` points to the caller's `F`.
                unsafe { call(data, start..end) }
            })) {
                let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(payload);
            }
            self.done.fetch_add(end - start, Ordering::AcqRel);
        }
    }
}

impl Pool {
    /// A pool of `threads` threads, the caller counted: `threads - 1` are started.
    #[must_use]
    pub fn new(threads: usize) -> Self {
        let helpers = threads.max(1) - 1;
        let shared = Arc::new(Shared {
            state: AtomicU64::new(pack(0, 0)),
            items: AtomicUsize::new(0),
            chunk: AtomicUsize::new(1),
            data: AtomicPtr::new(std::ptr::null_mut()),
            trampoline: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            parked: (0..helpers).map(|_| AtomicBool::new(false)).collect(),
            panic: Mutex::new(None),
            stop: AtomicBool::new(false),
            handles: OnceLock::new(),
        });
        let threads: Vec<JoinHandle<()>> = (0..helpers)
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("credence-decode-{i}"))
                    .spawn(move || helper(&shared, i))
                    .expect("starting a decode pool thread")
            })
            .collect();
        let _ = shared
            .handles
            .set(threads.iter().map(|t| t.thread().clone()).collect());
        Pool {
            shared,
            threads,
            call: Mutex::new(0),
        }
    }

    /// Threads that run a job, the caller counted.
    #[must_use]
    pub fn threads(&self) -> usize {
        self.threads.len() + 1
    }

    /// Runs `f` over `0..items`, cut into ranges that the caller and the pool's threads
    /// claim; returns when every range has run. Each item is in exactly one range. A
    /// panic in `f` is raised here once every claimed range has finished.
    pub fn run<F: Fn(std::ops::Range<usize>) + Sync>(&self, items: usize, f: F) {
        if items == 0 {
            return;
        }
        if self.threads.is_empty() || items == 1 || INSIDE.with(Cell::get) {
            f(0..items);
            return;
        }
        assert!(
            items < CLOSED,
            "pool: {items} items do not fit the claim word"
        );
        let mut last = self.call.lock().unwrap_or_else(|e| e.into_inner());
        // Close the previous job before its fields are rewritten. A thread that read its
        // state while its last range was claimed may go on to read this job's item count
        // (larger) and see items left; its claim, a compare-and-swap from the state it
        // read, must then fail, or it would run a range of a closure that has returned.
        self.shared
            .state
            .store(pack(*last, CLOSED), Ordering::SeqCst);
        let generation = last.wrapping_add(1);
        *last = generation;
        let s = &*self.shared;
        let chunk = items.div_ceil(self.threads() * CHUNKS_PER_THREAD).max(1);
        s.items.store(items, Ordering::Release);
        s.chunk.store(chunk, Ordering::Release);
        s.data
            .store((&raw const f).cast::<()>().cast_mut(), Ordering::Release);
        s.trampoline
            .store(trampoline::<F> as Trampoline as usize, Ordering::Release);
        s.done.store(0, Ordering::Release);
        s.state.store(pack(generation, 0), Ordering::SeqCst);
        if let Some(handles) = s.handles.get() {
            for (flag, handle) in s.parked.iter().zip(handles) {
                if flag.load(Ordering::SeqCst) {
                    handle.unpark();
                }
            }
        }
        INSIDE.with(|c| c.set(true));
        s.work(generation);
        INSIDE.with(|c| c.set(false));
        // Wait for the ranges other threads claimed (none is left unclaimed: `work`
        // returned because the cursor passed the end).
        let mut waited = 0usize;
        if s.done.load(Ordering::Acquire) < items {
            let started = Instant::now();
            while s.done.load(Ordering::Acquire) < items {
                waited += 1;
                if !waited.is_multiple_of(64) || started.elapsed() < WAIT_SPIN {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        let payload = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(last);
        if let Some(payload) = payload {
            resume_unwind(payload);
        }
    }
}

/// A pool thread: waits for a new generation (spinning, then yielding, then parked),
/// claims ranges of it until none is left, and waits again.
fn helper(shared: &Shared, index: usize) {
    INSIDE.with(|c| c.set(true));
    let mut seen = 0u32;
    loop {
        let started = Instant::now();
        let mut polls = 0u32;
        let generation = loop {
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            let generation = generation_of(shared.state.load(Ordering::Acquire));
            if generation != seen {
                break generation;
            }
            polls = polls.wrapping_add(1);
            if !polls.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            let idle = started.elapsed();
            if idle < SPIN {
                std::hint::spin_loop();
            } else if idle < SPIN + YIELD {
                std::thread::yield_now();
            } else {
                // Announce the park, then look again: a job published after the look
                // sees the flag and unparks (and an unpark before `park` is kept).
                shared.parked[index].store(true, Ordering::SeqCst);
                if generation_of(shared.state.load(Ordering::SeqCst)) == seen
                    && !shared.stop.load(Ordering::SeqCst)
                {
                    std::thread::park();
                }
                shared.parked[index].store(false, Ordering::SeqCst);
            }
        };
        seen = generation;
        shared.work(generation);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in &self.threads {
            t.thread().unpark();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Every item runs exactly once, job after job, at any size and thread count.
    #[test]
    fn every_item_runs_once() {
        for threads in [1, 2, 3, 5] {
            let pool = Pool::new(threads);
            for items in [0, 1, 2, 7, 64, 1000, 4099] {
                for _ in 0..20 {
                    let hits: Vec<AtomicU32> = (0..items).map(|_| AtomicU32::new(0)).collect();
                    pool.run(items, |range| {
                        for i in range {
                            hits[i].fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    assert!(
                        hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                        "{threads} threads, {items} items"
                    );
                }
            }
        }
    }

    /// A small job right after a larger one never gets a range of the larger one's
    /// leftover count (a thread late from the last job claiming into this one), over
    /// many back-to-back jobs.
    #[test]
    fn back_to_back_jobs_of_different_sizes_stay_in_bounds() {
        let pool = Pool::new(3);
        for round in 0..5_000 {
            let items = if round % 2 == 0 { 2 } else { 48 };
            let hits: Vec<AtomicU32> = (0..items).map(|_| AtomicU32::new(0)).collect();
            pool.run(items, |range| {
                assert!(range.end <= items, "{range:?} of a job of {items}");
                for i in range {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "round {round}"
            );
        }
    }

    /// Threads that were parked between jobs are woken by the next one and take part.
    #[test]
    fn parked_threads_wake_and_help() {
        let pool = Pool::new(3);
        std::thread::sleep(SPIN + YIELD + Duration::from_millis(20));
        let seen = Mutex::new(std::collections::HashSet::new());
        for _ in 0..200 {
            pool.run(64, |_| {
                std::thread::sleep(Duration::from_micros(200));
                seen.lock().unwrap().insert(std::thread::current().id());
            });
            if seen.lock().unwrap().len() == 3 {
                break;
            }
        }
        assert_eq!(seen.lock().unwrap().len(), 3, "every thread took part");
    }

    /// A panic in the closure reaches the caller, and the pool runs the next job.
    #[test]
    fn a_panic_reaches_the_caller() {
        let pool = Pool::new(2);
        let result = catch_unwind(AssertUnwindSafe(|| {
            pool.run(100, |range| assert!(!range.contains(&57), "item 57"));
        }));
        assert!(result.is_err());
        let sum = AtomicUsize::new(0);
        pool.run(100, |range| {
            sum.fetch_add(range.len(), Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 100);
    }

    /// A nested call (from inside a job) runs inline instead of waiting on itself.
    #[test]
    fn nested_calls_run_inline() {
        let pool = Pool::new(2);
        let sum = AtomicUsize::new(0);
        pool.run(8, |outer| {
            for _ in outer {
                pool.run(10, |inner| {
                    sum.fetch_add(inner.len(), Ordering::Relaxed);
                });
            }
        });
        assert_eq!(sum.load(Ordering::Relaxed), 80);
    }
}
