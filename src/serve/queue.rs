//! The bounded queue of runs waiting for a worker, and which runs the workers hold.
//!
//! Invariant: a run id is at most once in the queue or held by a worker. Requests reserve a
//! place first (a [`Ticket`]) and create the run only with one, so "full" is decided before
//! anything is written: at most `workers + queue` runs are waiting or running (runs resumed at
//! start are queued whatever their number).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
struct Inner {
    waiting: VecDeque<String>,
    active: BTreeSet<String>,
    reserved: usize,
    /// The last error a worker met on a run (cleared when the run is queued again).
    errors: BTreeMap<String, String>,
}

pub struct Queue {
    inner: Mutex<Inner>,
    ready: Condvar,
    capacity: usize,
}

/// Where a run is in the queue.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// Waiting; 1 is next.
    Waiting(usize),
    Running,
}

/// A reserved place; [`Ticket::push`] fills it, dropping it gives it back.
pub struct Ticket<'a> {
    queue: &'a Queue,
    used: bool,
}

impl Ticket<'_> {
    pub fn push(mut self, id: &str) {
        self.used = true;
        let mut g = self.queue.lock();
        g.reserved -= 1;
        g.errors.remove(id);
        if !g.waiting.iter().any(|w| w == id) && !g.active.contains(id) {
            g.waiting.push_back(id.to_string());
        }
        self.queue.ready.notify_one();
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.used {
            self.queue.lock().reserved -= 1;
        }
    }
}

impl Queue {
    /// A queue for `workers` workers with `queue` more places.
    pub fn new(workers: usize, queue: usize) -> Self {
        Queue { inner: Mutex::new(Inner::default()), ready: Condvar::new(), capacity: workers + queue }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for one more run, unless the queue is full.
    pub fn reserve(&self) -> Option<Ticket<'_>> {
        let mut g = self.lock();
        if g.waiting.len() + g.active.len() + g.reserved >= self.capacity {
            return None;
        }
        g.reserved += 1;
        Some(Ticket { queue: self, used: false })
    }

    /// Queues a run whatever the capacity (runs resumed at start).
    pub fn push(&self, id: &str) {
        let mut g = self.lock();
        if !g.waiting.iter().any(|w| w == id) && !g.active.contains(id) {
            g.waiting.push_back(id.to_string());
        }
        self.ready.notify_one();
    }

    /// The next run for a worker (blocks until there is one); it is then running.
    pub fn pop(&self) -> String {
        let mut g = self.lock();
        loop {
            if let Some(id) = g.waiting.pop_front() {
                g.active.insert(id.clone());
                return id;
            }
            g = self.ready.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A worker is done with a run.
    pub fn done(&self, id: &str, error: Option<String>) {
        let mut g = self.lock();
        g.active.remove(id);
        if let Some(e) = error {
            g.errors.insert(id.to_string(), e);
        }
    }

    pub fn place(&self, id: &str) -> Option<Place> {
        let g = self.lock();
        if g.active.contains(id) {
            return Some(Place::Running);
        }
        g.waiting.iter().position(|w| w == id).map(|i| Place::Waiting(i + 1))
    }

    pub fn error(&self, id: &str) -> Option<String> {
        self.lock().errors.get(id).cloned()
    }

    /// (waiting, running) counts.
    pub fn counts(&self) -> (usize, usize) {
        let g = self.lock();
        (g.waiting.len(), g.active.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_is_decided_before_anything_is_created() {
        let q = Queue::new(1, 1);
        let a = q.reserve().unwrap();
        let b = q.reserve().unwrap();
        assert!(q.reserve().is_none());
        a.push("A");
        drop(b); // given back
        assert!(q.reserve().is_some());
        assert_eq!(q.place("A"), Some(Place::Waiting(1)));
        assert_eq!(q.pop(), "A");
        assert_eq!(q.place("A"), Some(Place::Running));
        q.reserve().unwrap().push("B");
        assert!(q.reserve().is_none());
        q.done("A", Some("boom".into()));
        assert_eq!(q.error("A").as_deref(), Some("boom"));
        assert_eq!(q.counts(), (1, 0));
    }
}
