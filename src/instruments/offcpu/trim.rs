//! What the BPF tier's stacks carry that is not the program's: the
//! tracing machinery the kernel ran to record them, and the interrupt a
//! wake-up came from. Pure functions on frames, kept apart from the
//! kernel side in `bpf.rs`.

use crate::model::profile::{Frame, Waker};

/// Drop the tracing machinery the kernel stack may still start with (the
/// program skips only the frames every kernel has): everything the
/// scheduler called to run the tracepoint, inside `__schedule`.
pub fn trim_machinery(frames: &mut Vec<Frame>) {
    if let Some(i) = frames
        .iter()
        .rposition(|f| f.kernel && f.name == "__schedule")
    {
        frames.truncate(i + 1);
        return;
    }
    while frames.last().is_some_and(|f| {
        f.kernel
            && ["bpf_", "__bpf_trace_", "__traceiter_"]
                .iter()
                .any(|p| f.name.starts_with(p))
    }) {
        frames.pop();
    }
}

/// Kernel frames that mean a wake-up came from an interrupt (a timer, a
/// device): whichever task it interrupted did not wake the sleeper.
const INTERRUPT: &[&str] = &[
    "asm_sysvec_",
    "asm_common_interrupt",
    "handle_softirqs",
    "__do_softirq",
];

/// The waker's stack ends in `try_to_wake_up` (what ran inside it is the
/// tracing machinery). Woken from an interrupt, the waker is the
/// interrupt: its kernel frames only, named `[interrupt]`.
pub fn trim_waker(w: &mut Waker) {
    if let Some(i) = w
        .frames
        .iter()
        .rposition(|f| f.kernel && f.name == "try_to_wake_up")
    {
        w.frames.truncate(i + 1);
    }
    if let Some(i) = w
        .frames
        .iter()
        .position(|f| f.kernel && INTERRUPT.iter().any(|p| f.name.starts_with(p)))
    {
        w.frames.drain(..i);
        w.comm = "[interrupt]".into();
        w.tid = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_what_ran_inside_the_scheduler() {
        let k = Frame::kernel;
        let mut f = vec![
            Frame::user("main"),
            k("schedule"),
            k("__schedule"),
            k("__traceiter_sched_switch"),
        ];
        trim_machinery(&mut f);
        assert_eq!(f.last(), Some(&k("__schedule")));
        let mut f = vec![Frame::user("main"), k("pick"), k("bpf_trace_run4")];
        trim_machinery(&mut f);
        assert_eq!(f, [Frame::user("main"), k("pick")]);
    }

    #[test]
    fn a_waker_ends_at_the_wake_up_and_an_interrupt_is_no_thread() {
        let k = Frame::kernel;
        let mut w = Waker {
            pid: 5,
            tid: 6,
            comm: "holder".into(),
            frames: vec![
                Frame::user("unlock"),
                k("futex_wake"),
                k("try_to_wake_up"),
                k("__traceiter_sched_waking"),
            ],
        };
        trim_waker(&mut w);
        assert_eq!(w.frames.last(), Some(&k("try_to_wake_up")));
        assert_eq!((w.comm.as_str(), w.tid), ("holder", 6));
        let mut w = Waker {
            frames: vec![
                Frame::user("spin"),
                k("asm_sysvec_apic_timer_interrupt"),
                k("hrtimer_wakeup"),
                k("try_to_wake_up"),
            ],
            ..w
        };
        trim_waker(&mut w);
        assert_eq!(w.frames[0], k("asm_sysvec_apic_timer_interrupt"));
        assert_eq!((w.comm.as_str(), w.tid), ("[interrupt]", 0));
    }
}
