//! The words of runtimes' part in a verdict: the lock threads waited for
//! (a mutex, or a runtime's lock by name) and a JVM's heap and collector.

use super::HOLDER_WORKS;
use crate::analysis::io_pattern::human_bytes;
use crate::model::diagnosis::JvmHeap;
use crate::model::verdict::{GcAtLimit, LockSeen};

/// "3 threads waited on the mutex at 0x55.. in PID 7 (up to 3 at once);
/// another thread was on CPU or runnable 90% of that time: the holder
/// works while holding it", or a runtime's lock by name.
pub(super) fn lock_text(l: &LockSeen) -> String {
    match l {
        LockSeen::Mutex(l) => {
            let holder = if l.running_share >= HOLDER_WORKS {
                "the holder works while holding it"
            } else {
                "the holder mostly sleeps or blocks while holding it"
            };
            format!(
                "{} thread{} waited on the mutex at {} in PID {} (up to {} at once); another thread was on CPU or runnable {:.0}% of that time: {holder}",
                l.waiters,
                if l.waiters == 1 { "" } else { "s" },
                l.address,
                l.pid,
                l.most_at_once,
                l.running_share * 100.0
            )
        }
        LockSeen::Runtime {
            runtime,
            kind,
            function,
            caller,
            share,
        } => format!(
            "{runtime}: {kind} ({function}{}): threads waited for it {:.0}% of their time",
            caller
                .as_ref()
                .map_or(String::new(), |c| format!(", taken in {c}")),
            share * 100.0
        ),
    }
}

pub(super) fn jvm_heap_text(h: &JvmHeap, cpu_s: f64, window_s: f64) -> String {
    format!(
        "JVM heap: {}; its collectors ({}) ran {:.2} s of the {window_s:.1} s, {} collections, {} of them full, while it used {cpu_s:.2} s of CPU; old generation {} of {}",
        heap_limit_text(h),
        h.collectors.join(", "),
        h.gc_s,
        h.collections,
        h.full,
        human_bytes(h.old_used),
        human_bytes(h.old_max),
    )
}

/// "the heap's limit 64.0 MiB (-Xmx64m)": from its perf data, its flag.
fn heap_limit_text(h: &JvmHeap) -> String {
    match (h.max_bytes, h.xmx) {
        (0, Some(x)) => format!("-Xmx {}", human_bytes(x)),
        (m, Some(x)) => format!("limit {} (-Xmx {})", human_bytes(m), human_bytes(x)),
        (m, None) => format!("limit {}", human_bytes(m)),
    }
}

pub(super) fn gc_text(g: &GcAtLimit) -> String {
    let h = &g.heap;
    format!(
        "the JVM's garbage collector (GC) ran {:.0}% of the time, at its heap limit: {} full collections in {:.1} s, the old generation {:.0}% full, heap {}",
        g.gc_share * 100.0,
        h.full,
        g.window_s,
        h.old_used as f64 * 100.0 / h.old_max.max(1) as f64,
        heap_limit_text(h)
    )
}
