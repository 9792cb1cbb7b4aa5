//! The ordered read-ahead ring: several worker threads fill slots ahead of
//! one consumer that takes the items in order.
//!
//! ```text
//! workers:  claim item i; wait until item i - S was consumed; fill(i, i % S)
//! consumer: wait until item i is filled; consume(i, i % S, value)   (i = 0, 1, ...)
//! ```
//! Both executors run on it: the CPU one fills aligned host buffers and
//! dequantizes as it consumes; the GPU one fills pinned buffers (or device
//! scratch, through cuFile) and consumes by queueing copies and kernels.
//! Reads of up to S items are in flight while the consumer works, so storage
//! queue depth and compute overlap.
//!
//! Guarantees: `fill(i, s)` starts only after `consume(i - S, s, _)`
//! returned, so a fill has the slot to itself (on the host: the GPU's own
//! in-flight use of a slot is the GPU fill's business to wait for). The
//! first error (a fill's or the consumer's) stops everything: workers stop
//! claiming, waits end, `run` returns that error after every worker has
//! stopped. A panic anywhere stops the others the same way and then
//! propagates.
//!
//! `run` also says where the time went ([`RingTimes`]): when the consumer
//! got its first item (the load's first byte) and how long each worker spent
//! inside `fill` (a reader's busy time), for the loads' per-phase stats.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where a ring's time went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RingTimes {
    /// From `run`'s start until the consumer had item 0 (none with no items).
    pub first_item: Option<Duration>,
    /// Per worker thread: the time spent inside `fill`.
    pub busy: Vec<Duration>,
}

struct State<T, E> {
    /// The next item to claim.
    next: usize,
    /// Per slot: the filled item it holds, not yet consumed.
    filled: Vec<Option<(usize, T)>>,
    /// Items consumed so far (all below this index).
    consumed: usize,
    stop: bool,
    error: Option<E>,
}

struct Shared<T, E> {
    state: Mutex<State<T, E>>,
    cv: Condvar,
}

impl<T, E> Shared<T, E> {
    fn lock(&self) -> MutexGuard<'_, State<T, E>> {
        // Poisoned means a thread panicked holding the lock; the state is
        // still consistent enough to stop on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State<T, E>>) -> MutexGuard<'a, State<T, E>> {
        self.cv.wait(g).unwrap_or_else(|p| p.into_inner())
    }

    fn stop(&self, error: Option<E>) {
        let mut st = self.lock();
        if st.error.is_none() {
            st.error = error;
        }
        st.stop = true;
        self.cv.notify_all();
    }
}

/// Stops the ring if the thread holding it unwinds.
struct StopOnPanic<'a, T, E>(&'a Shared<T, E>);

impl<T, E> Drop for StopOnPanic<'_, T, E> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop(None);
        }
    }
}

/// The ring's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingShape {
    /// Items that may be filled ahead of the consumer.
    pub slots: usize,
    /// Threads filling them (at most `slots` are useful).
    pub workers: usize,
}

/// Fill and consume items `0..items` (see the module docs). With one item,
/// or one slot, everything runs on the calling thread (one worker's times).
pub fn run<T: Send, E: Send>(
    items: usize,
    shape: RingShape,
    fill: &(dyn Fn(usize, usize) -> Result<T, E> + Sync),
    mut consume: impl FnMut(usize, usize, T) -> Result<(), E>,
) -> Result<RingTimes, E> {
    let start = Instant::now();
    let slots = shape.slots.max(1);
    if items <= 1 || slots == 1 {
        let mut times = RingTimes { first_item: None, busy: vec![Duration::ZERO] };
        for i in 0..items {
            let t = Instant::now();
            let v = fill(i, 0)?;
            times.busy[0] += t.elapsed();
            times.first_item.get_or_insert_with(|| start.elapsed());
            consume(i, 0, v)?;
        }
        return Ok(times);
    }
    let workers = shape.workers.clamp(1, slots.min(items));
    let shared = Shared {
        state: Mutex::new(State { next: 0, filled: (0..slots).map(|_| None).collect(), consumed: 0, stop: false, error: None }),
        cv: Condvar::new(),
    };
    let busy = Mutex::new(vec![Duration::ZERO; workers]);
    let consumed = std::thread::scope(|scope| {
        for w in 0..workers {
            let (shared, busy) = (&shared, &busy);
            scope.spawn(move || {
                let spent = worker(shared, items, slots, fill);
                busy.lock().unwrap_or_else(|p| p.into_inner())[w] = spent;
            });
        }
        let _guard = StopOnPanic(&shared);
        let r = consumer(&shared, items, slots, &mut consume, start);
        if r.is_err() {
            shared.stop(None);
        }
        r
    });
    match consumed {
        Ok(first) => Ok(RingTimes { first_item: Some(first), busy: busy.into_inner().unwrap_or_else(|p| p.into_inner()) }),
        Err(Some(own)) => Err(own),
        Err(None) => Err(shared.lock().error.take().expect("a ring stops early only with an error or a panic")),
    }
}

/// One worker's loop; returns its time inside `fill`.
fn worker<T, E>(shared: &Shared<T, E>, items: usize, slots: usize, fill: &(dyn Fn(usize, usize) -> Result<T, E> + Sync)) -> Duration {
    let _guard = StopOnPanic(shared);
    let mut spent = Duration::ZERO;
    loop {
        let i = {
            let mut st = shared.lock();
            if st.stop || st.next >= items {
                return spent;
            }
            st.next += 1;
            st.next - 1
        };
        let s = i % slots;
        if i >= slots {
            let mut st = shared.lock();
            while !st.stop && st.consumed < i - slots + 1 {
                st = shared.wait(st);
            }
            if st.stop {
                return spent;
            }
        }
        let t = Instant::now();
        let filled = fill(i, s);
        spent += t.elapsed();
        match filled {
            Ok(v) => {
                let mut st = shared.lock();
                st.filled[s] = Some((i, v));
                shared.cv.notify_all();
            }
            Err(e) => {
                shared.stop(Some(e));
                return spent;
            }
        }
    }
}

/// `Ok(first)`: every item consumed, item 0 had at `first` after `start`;
/// `Err(Some(e))`: the consumer's own error; `Err(None)`: stopped by a worker.
fn consumer<T, E>(
    shared: &Shared<T, E>,
    items: usize,
    slots: usize,
    consume: &mut impl FnMut(usize, usize, T) -> Result<(), E>,
    start: Instant,
) -> Result<Duration, Option<E>> {
    let mut first = Duration::ZERO;
    for i in 0..items {
        let s = i % slots;
        let v = {
            let mut st = shared.lock();
            loop {
                if st.stop {
                    return Err(None);
                }
                if matches!(st.filled[s], Some((j, _)) if j == i) {
                    break st.filled[s].take().expect("checked above").1;
                }
                st = shared.wait(st);
            }
        };
        if i == 0 {
            first = start.elapsed();
        }
        consume(i, s, v).map_err(Some)?;
        let mut st = shared.lock();
        st.consumed = i + 1;
        shared.cv.notify_all();
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const SHAPE: RingShape = RingShape { slots: 4, workers: 3 };

    #[test]
    fn consumes_every_item_in_order() {
        for items in [0, 1, 2, 3, 4, 5, 17, 100] {
            for shape in [SHAPE, RingShape { slots: 1, workers: 4 }, RingShape { slots: 8, workers: 8 }] {
                let mut seen = vec![];
                let inline = items <= 1 || shape.slots == 1;
                run::<usize, ()>(items, shape, &|i, _| Ok(i * 10), |i, s, v| {
                    assert_eq!(v, i * 10);
                    assert_eq!(s, if inline { 0 } else { i % shape.slots });
                    seen.push(i);
                    Ok(())
                })
                .unwrap();
                assert_eq!(seen, (0..items).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn says_when_the_first_item_came_and_each_workers_time() {
        for (items, shape, workers) in
            [(0, SHAPE, 1), (1, SHAPE, 1), (50, RingShape { slots: 1, workers: 4 }, 1), (50, SHAPE, 3), (2, SHAPE, 2)]
        {
            let outside = Instant::now();
            let times = run::<usize, ()>(items, shape, &|i, _| Ok(i), |_, _, _| Ok(())).unwrap();
            let total = outside.elapsed();
            assert_eq!(times.busy.len(), workers, "{items} items, {shape:?}");
            assert!(times.busy.iter().all(|b| *b <= total));
            assert_eq!(times.first_item.is_some(), items > 0);
            assert!(times.first_item.unwrap_or_default() <= total);
        }
    }

    #[test]
    fn a_slot_is_filled_only_after_its_previous_item_was_consumed() {
        // Per slot, the last item consumed; a fill of item i must see i - S there.
        let last = (0..SHAPE.slots).map(|_| AtomicUsize::new(usize::MAX)).collect::<Vec<_>>();
        run::<(), String>(
            200,
            SHAPE,
            &|i, s| {
                if i >= SHAPE.slots && last[s].load(Ordering::SeqCst) != i - SHAPE.slots {
                    return Err(format!("item {i} filled slot {s} before item {} left it", i - SHAPE.slots));
                }
                std::thread::yield_now();
                Ok(())
            },
            |i, s, ()| {
                last[s].store(i, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
    }

    #[test]
    fn a_fill_error_stops_the_ring() {
        let filled = AtomicUsize::new(0);
        let mut consumed = 0;
        let r = run(
            1000,
            SHAPE,
            &|i, _| {
                filled.fetch_add(1, Ordering::SeqCst);
                if i == 10 {
                    Err(format!("bad {i}"))
                } else {
                    Ok(i)
                }
            },
            |_, _, _| {
                consumed += 1;
                Ok(())
            },
        );
        assert_eq!(r.unwrap_err(), "bad 10");
        assert!(consumed <= 10);
        assert!(filled.load(Ordering::SeqCst) <= 10 + SHAPE.slots + SHAPE.workers);
    }

    #[test]
    fn a_consumer_error_stops_the_ring() {
        let filled = AtomicUsize::new(0);
        let r = run(1000, SHAPE, &|_, _| Ok::<usize, String>(filled.fetch_add(1, Ordering::SeqCst)), |i, _, _| {
            if i == 5 {
                Err("consumer".to_string())
            } else {
                Ok(())
            }
        });
        assert_eq!(r.unwrap_err(), "consumer");
        assert!(filled.load(Ordering::SeqCst) <= 5 + SHAPE.slots + 1);
    }

    #[test]
    fn a_panicking_fill_does_not_hang_the_consumer() {
        let r = std::panic::catch_unwind(|| {
            run::<usize, ()>(100, SHAPE, &|i, _| if i == 7 { panic!("fill panicked") } else { Ok(i) }, |_, _, _| Ok(()))
        });
        assert!(r.is_err());
    }

    #[test]
    fn a_panicking_consumer_does_not_hang_the_workers() {
        let r = std::panic::catch_unwind(|| {
            run::<usize, ()>(100, SHAPE, &|i, _| Ok(i), |i, _, _| if i == 3 { panic!("consumer panicked") } else { Ok(()) })
        });
        assert!(r.is_err());
    }
}
