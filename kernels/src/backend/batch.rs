//! Partitions of one key meet here for their L, A and B MSMs when the key's plan streams those
//! sections and has room for several expanded witnesses ([`Plan::batch`](crate::plan::Plan)):
//! each streamed pass of bases then serves the whole batch, so k partitions' bases cross to the
//! device once instead of k times.
//!
//! A partition arrives after its H MSM. The batch runs when it is full, or when no other
//! partition of the key is on its way (between asking for its turn and arriving here): none
//! would come soon, and nothing waits for one that will not. The partition that closes the
//! batch runs it within its turn, so that the batch's witnesses never share the device with
//! another partition's H stage (the plan counts them in the MSM phase); the others hand their
//! turn back while they wait, and the next partition's SpMV and H go on meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use blstrs::{G1Projective, G2Projective};
use cuzk_prover::backend::{BackendError, MsmResults};

use super::witness::HostWitness;
use super::Permit;

/// A partition's L, A and B sums (H's is its own, made before it arrives).
pub(super) struct WitnessSums {
    pub l: G1Projective,
    pub a: G1Projective,
    pub b_g1: G1Projective,
    pub b_g2: G2Projective,
}

impl WitnessSums {
    /// The partition's five sums, with H's.
    pub fn with_h(self, h: G1Projective) -> MsmResults {
        MsmResults {
            h,
            l: self.l,
            a: self.a,
            b_g1: self.b_g1,
            b_g2: self.b_g2,
        }
    }
}

/// What a batch needs of an arrived partition: its witness, expanded at the batch's turn.
pub(super) struct Member {
    pub witness: Arc<HostWitness>,
}

type Sums = Result<WitnessSums, BackendError>;

/// The meeting place of one key's partitions on one device.
#[derive(Default)]
pub(super) struct Room {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Partitions that asked for a turn and have neither arrived nor been dropped.
    coming: usize,
    /// Arrived partitions, by seat, waiting for a batch.
    waiting: Vec<(u64, Member)>,
    /// Sums of batches run by another partition, by seat, until their partition takes them.
    done: HashMap<u64, Sums>,
    next_seat: u64,
}

/// How an arriving partition takes part: its turn handed back while it waits, a turn taken
/// again when it runs a batch after handing its own back, and the batch's MSMs.
pub(super) struct Arrival<'a> {
    pub release_turn: &'a dyn Fn(),
    pub take_turn: &'a dyn Fn() -> Permit,
    pub run: &'a dyn Fn(&[Member]) -> Vec<Sums>,
}

impl Room {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A partition asked for its turn: it will arrive, unless it is dropped first.
    pub(super) fn coming(&self) {
        self.state().coming += 1;
    }

    /// A partition that asked for its turn will not arrive.
    pub(super) fn gone(&self) {
        let mut st = self.state();
        st.coming = st.coming.saturating_sub(1);
        drop(st);
        self.changed.notify_all();
    }

    /// Waits for `member`'s L, A and B sums from a batch of at most `most` partitions, run by
    /// this thread or another. `counted`: the partition was counted as coming.
    pub(super) fn arrive(&self, member: Member, counted: bool, most: usize, how: Arrival) -> Sums {
        let mut st = self.state();
        if counted {
            st.coming = st.coming.saturating_sub(1);
        }
        let seat = st.next_seat;
        st.next_seat += 1;
        st.waiting.push((seat, member));
        let mut turn_handed_back = false;
        loop {
            if let Some(sums) = st.done.remove(&seat) {
                return sums;
            }
            let seated = st.waiting.iter().position(|(s, _)| *s == seat);
            if let Some(at) = seated {
                if st.waiting.len() >= most || st.coming == 0 {
                    // This partition runs the batch: itself first, then the longest waiting.
                    let mine = st.waiting.remove(at);
                    let take = st.waiting.len().min(most.saturating_sub(1));
                    let mut batch: Vec<(u64, Member)> = vec![mine];
                    batch.extend(st.waiting.drain(..take));
                    drop(st);
                    let _turn = turn_handed_back.then(|| (how.take_turn)());
                    let (seats, members): (Vec<u64>, Vec<Member>) = batch.into_iter().unzip();
                    let mut sums = (how.run)(&members).into_iter();
                    let own = sums.next().unwrap_or_else(|| {
                        Err(BackendError::Device("a batch returned no sums".into()))
                    });
                    let mut st = self.state();
                    for (s, r) in seats[1..].iter().zip(sums) {
                        st.done.insert(*s, r);
                    }
                    drop(st);
                    self.changed.notify_all();
                    return own;
                }
            }
            if !turn_handed_back {
                (how.release_turn)();
                turn_handed_back = true;
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::time::Duration;

    use super::super::Gate;

    /// Partitions' witnesses, told apart by where they are.
    fn witnesses(n: usize) -> Arc<Vec<Arc<HostWitness>>> {
        Arc::new((0..n).map(|_| Arc::new(HostWitness::empty())).collect())
    }

    /// The tag of `m`: its witness's place in `all`, plus one.
    fn tag(all: &[Arc<HostWitness>], m: &Member) -> usize {
        1 + all.iter().position(|w| Arc::ptr_eq(w, &m.witness)).unwrap()
    }

    fn sums(tag: usize) -> WitnessSums {
        use group::Group;
        WitnessSums {
            l: G1Projective::generator() * blstrs::Scalar::from(tag as u64),
            a: G1Projective::identity(),
            b_g1: G1Projective::identity(),
            b_g2: G2Projective::identity(),
        }
    }

    /// `n` partitions arrive one after another, each counted as coming before the first
    /// arrives; every one gets its own sums, in batches of at most `most`.
    fn meet(n: usize, most: usize) -> Vec<usize> {
        let room = Arc::new(Room::default());
        let gate = Gate::new(1);
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let runs = Arc::new(AtomicUsize::new(0));
        let all = witnesses(n);
        for _ in 0..n {
            room.coming();
        }
        let threads: Vec<_> = (0..n)
            .map(|i| {
                let (room, gate, sizes, runs, all) = (
                    room.clone(),
                    gate.clone(),
                    sizes.clone(),
                    runs.clone(),
                    all.clone(),
                );
                std::thread::spawn(move || {
                    // Partitions take turns, as the backend's do.
                    let turn = Mutex::new(Some(gate.take(1)));
                    std::thread::sleep(Duration::from_millis(5 * i as u64));
                    let release = || drop(turn.lock().unwrap().take());
                    let take = || gate.take(1);
                    let run = |members: &[Member]| -> Vec<Sums> {
                        runs.fetch_add(1, SeqCst);
                        sizes.lock().unwrap().push(members.len());
                        members.iter().map(|m| Ok(sums(tag(&all, m)))).collect()
                    };
                    let how = Arrival {
                        release_turn: &release,
                        take_turn: &take,
                        run: &run,
                    };
                    let member = Member {
                        witness: all[i].clone(),
                    };
                    let got = room.arrive(member, true, most, how).unwrap();
                    release();
                    assert_eq!(got.l, sums(i + 1).l, "partition {i} got another's sums");
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let sizes = sizes.lock().unwrap().clone();
        assert_eq!(sizes.iter().sum::<usize>(), n);
        assert_eq!(runs.load(SeqCst), sizes.len());
        sizes
    }

    #[test]
    fn partitions_meet_in_batches_and_each_gets_its_own_sums() {
        for (n, most) in [(1, 3), (2, 2), (4, 2), (5, 3), (3, 8)] {
            let sizes = meet(n, most);
            assert!(sizes.iter().all(|&s| s >= 1 && s <= most), "{sizes:?}");
            // No batch ran short while others of the key were on their way, except the last.
            let short = sizes.iter().filter(|&&s| s < most.min(n)).count();
            assert!(short <= 1, "{n} partitions, batches of {most}: {sizes:?}");
        }
    }

    #[test]
    fn a_partition_that_never_arrives_does_not_hold_the_batch() {
        let room = Arc::new(Room::default());
        let gate = Gate::new(1);
        room.coming();
        room.coming();
        let all = witnesses(7);
        let waiter = {
            let (room, gate, all) = (room.clone(), gate.clone(), all.clone());
            std::thread::spawn(move || {
                let turn = Mutex::new(Some(gate.take(1)));
                let release = || drop(turn.lock().unwrap().take());
                let take = || gate.take(1);
                let run = |m: &[Member]| m.iter().map(|m| Ok(sums(tag(&all, m)))).collect();
                let how = Arrival {
                    release_turn: &release,
                    take_turn: &take,
                    run: &run,
                };
                let member = Member {
                    witness: all[6].clone(),
                };
                room.arrive(member, true, 2, how).map(|s| s.l)
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!waiter.is_finished(), "ran without waiting for the other");
        // The other partition fails before its MSMs.
        room.gone();
        let l = waiter.join().unwrap().unwrap();
        assert_eq!(l, sums(7).l);
    }
}
