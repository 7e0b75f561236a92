//! The process's allocator: the system's, with a memory budget for the threads that render a
//! template (`prompt.rs`).
//!
//! A template can build a string of 2^n bytes in n steps (`{% set s = s ~ s %}`): minijinja's
//! fuel counts steps and the output cap counts bytes written, so neither bounds what a render
//! holds, and an allocation the system refuses ends the process. The budget counts what a render
//! thread holds (what it takes, less what it frees), and how long it works: one step can do a
//! great deal of work (`replace` over a 20 MB string, in a loop), so an allocation after the
//! thread's deadline is refused too. A thread that would go over it takes nothing
//! more: it raises its flag and sleeps until the process ends, keeping what it holds (at most the
//! budget), while the thread that started it reports the error. Rust offers no other way out of
//! an allocation without ending the process, and a thread cannot be stopped from outside; so
//! this is the one module allowed `unsafe` (the `GlobalAlloc` contract), and it only counts.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The system allocator, counting for threads that have a budget.
pub struct Budgeted;

thread_local! {
    /// Bytes this thread may still take; `usize::MAX` for a thread without a budget.
    static LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The flag this thread raises when it would go over its budget.
    static OVER: Cell<*const AtomicBool> = const { Cell::new(std::ptr::null()) };
    /// When this thread's budget of time ends: an allocation after it is one over the budget
    /// (work that keeps building values — a filter looping over a large string — is stopped at
    /// its next allocation).
    static UNTIL: Cell<Option<std::time::Instant>> = const { Cell::new(None) };
}

/// Gives the calling thread (one with a budget, [`set_budget`]) an end in time: an allocation
/// after `until` is refused as one over its budget. None: no end.
pub fn set_deadline(until: Option<std::time::Instant>) {
    UNTIL.set(until);
}

/// Gives the calling thread a budget of `bytes`, and the flag it raises (before it stops for
/// good) when an allocation would take it over. The thread keeps its clone of `over` for the
/// rest of its life, which is what keeps the flag alive for the allocator.
pub fn set_budget(bytes: usize, over: &Arc<AtomicBool>) {
    LEFT.set(bytes.min(usize::MAX - 1));
    OVER.set(Arc::as_ptr(over));
}

fn take(n: usize) {
    let Ok(left) = LEFT.try_with(Cell::get) else { return };
    if left == usize::MAX {
        return;
    }
    let late = UNTIL.try_with(Cell::get).ok().flatten().is_some_and(|until| std::time::Instant::now() >= until);
    if n <= left && !late {
        let _ = LEFT.try_with(|l| l.set(left - n));
        return;
    }
    if let Ok(flag) = OVER.try_with(Cell::get) {
        // SAFETY: `set_budget`'s caller keeps the flag's `Arc` for as long as the thread lives.
        if let Some(flag) = unsafe { flag.as_ref() } {
            flag.store(true, Ordering::SeqCst);
        }
    }
    // Sleeping allocates nothing; the process ends this thread when it exits.
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

fn give(n: usize) {
    let _ = LEFT.try_with(|left| {
        if left.get() != usize::MAX {
            left.set(left.get().saturating_add(n).min(usize::MAX - 1));
        }
    });
}

// SAFETY: every call is passed on to `System` unchanged; the budget is only counted around it.
unsafe impl GlobalAlloc for Budgeted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        give(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match new_size.checked_sub(layout.size()) {
            Some(more) => take(more),
            None => give(layout.size() - new_size),
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
