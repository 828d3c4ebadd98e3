//! The classifier on synthetic observations: one per verdict, and the
//! cases the old rules got wrong (a starved process called idle, a
//! one-off allocation called a leak, a lock held while computing called
//! CPU, an idle event loop counted as waits).

use super::*;
use crate::analysis::classify::{classify, with_exec_failures};
use crate::model::diagnosis::{Confidence, Observation, Scope};
use crate::model::diagnosis::{LockWaits, Member, MemoryPoint, Stopped, Totals, Zombie};

/// One thread watched for `window` seconds.
fn obs(window: f64, threads: usize) -> Observation {
    Observation {
        pid: 42,
        comm: "x".into(),
        window_s: window,
        bucket_s: 0.1,
        syscalls_readable: true,
        totals: Totals {
            thread_s: window * threads as f64,
            threads,
            processes: 1,
            run_delay_s: Some(0.0),
            read_bytes: Some(0),
            write_bytes: Some(0),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn has(d: &Diagnosis, what: &str) -> bool {
    summary(d).contains(what) || evidence(d).iter().any(|e| e.contains(what))
}

#[test]
fn cpu_bound() {
    let mut o = obs(2.0, 1);
    o.totals.user_s = 1.9;
    o.totals.run_delay_s = Some(0.05);
    o.sample('R', "", "", "", 200);
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Cpu, "{d:#?}");
    assert_eq!(d.confidence, Confidence::High);
    assert!(summary(&d).contains("user space"), "{}", summary(&d));
    assert!(d.next[0].contains("profile -p 42"));
}

#[test]
fn starved_for_cpu_is_waiting_for_a_cpu_whatever_it_got() {
    // 0.36 of a CPU, runnable the whole time: the old rule said idle.
    let mut o = obs(5.0, 1);
    o.totals.user_s = 1.8;
    o.totals.run_delay_s = Some(3.1);
    o.sample('R', "", "", "", 500);
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Sched, "{d:#?}");
    assert!(
        // Runnable in every sample: the 0.1 s neither on CPU nor in
        // run_delay waited for a CPU too (3.2 of 5.0 s).
        summary(&d).contains("64% of its runnable time"),
        "{}",
        summary(&d)
    );
}

#[test]
fn some_queueing_is_a_runner_up_of_cpu() {
    let mut o = obs(5.0, 1);
    o.totals.user_s = 3.1;
    o.totals.run_delay_s = Some(1.75);
    o.sample('R', "", "", "", 480);
    o.sample('S', "hrtimer_nanosleep", "nanosleep", "", 20);
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Cpu, "{d:#?}");
    assert!(
        summary(&d).contains("also waiting for a CPU 3"),
        "{}",
        summary(&d)
    );
}

#[test]
fn no_schedstats_no_claim_about_the_queue() {
    let mut o = obs(2.0, 1);
    o.totals.user_s = 1.9;
    o.totals.run_delay_s = None;
    o.sample('R', "", "", "", 200);
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Cpu);
    assert_ne!(d.confidence, Confidence::High);
    assert!(has(&d, "unknown (this kernel keeps no schedstats)"));
}

#[test]
fn faults_on_file_pages_are_storage() {
    let mut o = obs(3.0, 1);
    o.totals.system_s = 0.6;
    o.totals.run_delay_s = Some(0.2);
    o.totals.read_bytes = Some(300 << 20);
    o.totals.major_faults = 20_000;
    o.sample('D', "folio_wait_bit_common", "fault", "", 160);
    o.sample('R', "", "", "", 70);
    // File pages grow; anonymous memory does not.
    o.memory.series = (0..12)
        .map(|i| MemoryPoint {
            t: i as f64 * 0.25,
            anon_kib: 100,
            file_kib: 1000 + i * 25_000,
            ..Default::default()
        })
        .collect();
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Io, "{d:#?}");
    assert!(summary(&d).contains("page fault"), "{}", summary(&d));
    assert!(has(&d, "major 6667/s"), "{:?}", evidence(&d));
    assert!(d.next[0].contains("iosnoop -p 42"));
}

#[test]
fn a_lock_held_while_computing_is_a_lock() {
    // Four threads: one computes under the lock, three wait for it.
    let mut o = obs(2.0, 4);
    o.totals.user_s = 1.9;
    o.totals.run_delay_s = Some(0.1);
    o.sample('R', "", "", "", 200);
    o.sample('S', "futex_do_wait", "futex", "mutex", 600);
    o.locks = vec![LockWaits {
        pid: 42,
        address: "0x55d0c0".into(),
        samples: 600,
        waiters: 4,
        most_at_once: 3,
        running_share: 0.9,
    }];
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Lock, "{d:#?}");
    assert!(
        summary(&d).contains("4 threads waited on the mutex at 0x55d0c0"),
        "{}",
        summary(&d)
    );
    assert!(
        summary(&d).contains("the holder works while holding it"),
        "{}",
        summary(&d)
    );
}

#[test]
fn a_lock_held_while_sleeping_is_a_lock() {
    // lock-contend: the holder sleeps in nanosleep, the others wait.
    let mut o = obs(2.0, 5);
    o.sample('S', "futex_do_wait", "futex", "mutex", 600);
    o.sample('S', "hrtimer_nanosleep", "clock_nanosleep", "", 200);
    o.sample('S', "futex_do_wait", "futex", "futex", 200); // main joins
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Lock, "{d:#?}");
}

#[test]
fn an_idle_event_loop_is_idle() {
    let mut o = obs(2.0, 3);
    o.totals.user_s = 0.02;
    o.sample('S', "do_epoll_wait", "epoll_wait", "", 200);
    o.sample('S', "anon_pipe_read", "read", "pipe", 200);
    o.sample('S', "poll_schedule_timeout.constprop.0", "poll", "", 200);
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Idle, "{d:#?}");
    assert!(summary(&d).contains("events (poll)"), "{}", summary(&d));
}

#[test]
fn stopped_by_a_signal_and_by_a_tracer() {
    let mut o = obs(2.0, 1);
    o.sample('T', "do_signal_stop", "", "", 200);
    o.stopped = Some(Stopped {
        pid: 42,
        tracer_pid: None,
        tracer_comm: None,
    });
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Stopped, "{d:#?}");
    assert!(summary(&d).contains("kill -CONT 42"), "{}", summary(&d));
    o.stopped = Some(Stopped {
        pid: 42,
        tracer_pid: Some(7),
        tracer_comm: Some("gdb".into()),
    });
    assert!(summary(&classify(&o)).contains("tracer gdb (PID 7"));
}

#[test]
fn a_zombie_names_its_parent() {
    let mut o = obs(0.0, 0);
    o.zombie = Some(Zombie {
        parent_pid: 77,
        parent_comm: "lazy".into(),
    });
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Zombie);
    assert!(
        summary(&d).contains("parent PID 77 (lazy)"),
        "{}",
        summary(&d)
    );
    assert_eq!(d.next, vec!["kdiag diagnose -p 77"]);
}

#[test]
fn bursts_are_reported_as_such_not_as_their_phase() {
    // 1 s on CPU, 1 s asleep: on average half a thread; caught mostly
    // asleep, the old rule said idle.
    let mut o = obs(5.0, 1);
    o.totals.user_s = 2.0;
    o.sample('R', "", "", "", 200);
    o.sample('S', "hrtimer_nanosleep", "clock_nanosleep", "", 300);
    o.busy = (0..50)
        .map(|i| if (i / 10) % 2 == 1 { 1.0 } else { 0.0 })
        .collect();
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Cpu, "{d:#?}");
    assert!(
        summary(&d).contains("in bursts of about 1.0 s, every 2.0 s"),
        "{}",
        summary(&d)
    );
}

#[test]
fn allocating_once_is_not_a_leak_growing_steadily_is() {
    let mut o = obs(5.0, 1);
    o.sample('S', "hrtimer_nanosleep", "nanosleep", "", 500);
    o.memory.series = (0..21)
        .map(|i| MemoryPoint {
            t: i as f64 * 0.25,
            anon_kib: if i == 0 { 500 } else { 200_000 },
            ..Default::default()
        })
        .collect();
    assert_eq!(classify(&o).verdict, Class::Idle);
    for (i, p) in o.memory.series.iter_mut().enumerate() {
        p.anon_kib = 500 + i as u64 * 1024;
    }
    let d = classify(&o);
    assert_eq!(d.verdict, Class::MemoryTrend, "{d:#?}");
    assert!(summary(&d).contains("4.0 MiB/s"), "{}", summary(&d));
}

#[test]
fn the_tree_names_its_busiest_member() {
    let mut o = obs(2.0, 3);
    o.scope = Scope::Command;
    o.totals.user_s = 2.0;
    o.totals.processes = 3;
    o.sample('R', "", "", "", 400);
    o.sample('S', "do_wait", "wait4", "", 200);
    let m = |pid, comm: &str, user_s| Member {
        pid,
        comm: comm.into(),
        user_s,
        ..Default::default()
    };
    o.members = vec![m(42, "sh", 0.0), m(811, "yes", 0.12), m(812, "gzip", 1.88)];
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Cpu, "{d:#?}");
    assert_eq!(d.busiest[0].comm, "gzip");
    assert!(has(&d, "gzip (PID 812) 94%"), "{:?}", evidence(&d));
    assert!(d.next[0].contains("profile -p 812"), "{:?}", d.next);
}

fn exec_failure(family: &str, times: u64) -> crate::model::drill::ExecFailure {
    crate::model::drill::ExecFailure {
        times,
        pid: 77,
        filename: Some("/srv/app".into()),
        family: family.into(),
        errno: Some("ENOMEM".into()),
        cause: Some("program header 3: ...".into()),
        text: "execve(\"/srv/app\") failed with ENOMEM (Cannot allocate memory) after the point of no return: the old image was gone".into(),
        ..Default::default()
    }
}

#[test]
fn failed_execs_are_the_verdict_of_an_idle_looking_service() {
    let mut o = obs(4.0, 1);
    o.sample('S', "hrtimer_nanosleep", "clock_nanosleep", "", 200);
    let idle = classify(&o);
    assert_eq!(idle.verdict, Class::Idle);
    let exec = crate::model::drill::ExecDrill {
        execs: 3,
        failures: vec![exec_failure("after-point-of-no-return", 3)],
        ..Default::default()
    };
    let d = with_exec_failures(idle.clone(), &exec, 42);
    assert_eq!((d.verdict, d.confidence), (Class::Exec, Confidence::High));
    assert!(
        summary(&d).contains("3 of 3 execs failed")
            && summary(&d).contains(
                "failed with ENOMEM (Cannot allocate memory) after the point of no return"
            )
            && !summary(&d).contains("old image"),
        "{}",
        summary(&d)
    );
    assert_eq!(
        evidence(&d)[0],
        format!("Thread states alone: idle: {}", summary(&idle))
    );
    assert_eq!(
        d.next,
        ["sudo kdiag exec-trace -p 42", "kdiag elf-check /srv/app"]
    );

    // Programs that started and then crashed or were killed did not fail
    // to exec; a zombie stays a zombie.
    let later = crate::model::drill::ExecDrill {
        execs: 2,
        failures: vec![exec_failure("user-crash", 1), exec_failure("killed", 1)],
        ..Default::default()
    };
    assert_eq!(with_exec_failures(idle.clone(), &later, 42), idle);
    let mut z = obs(1.0, 1);
    z.zombie = Some(Zombie {
        parent_pid: 1,
        parent_comm: "init".into(),
    });
    let zombie = classify(&z);
    assert_eq!(with_exec_failures(zombie.clone(), &exec, 42), zombie);
}

use crate::analysis::carriers::tests::{member as member_of, tree as tree_of};

#[test]
fn io_next_names_the_member_waiting_on_storage() {
    use ThreadState::*;
    let mut o = tree_of(vec![
        member_of(1, 0.0, &[(Sleeping, 200)]),
        member_of(2, 0.3, &[(OnCpu, 30)]),
        member_of(3, 0.05, &[(Storage, 170)]),
    ]);
    o.pid = 1;
    o.window_s = 2.0;
    o.totals.thread_s = 6.0;
    o.totals.threads = 3;
    o.totals.user_s = 0.35;
    o.totals.run_delay_s = Some(0.0);
    o.syscalls_readable = true;
    o.sample('S', "", "pause", "", 200);
    o.sample('R', "", "", "", 30);
    o.sample('D', "folio_wait_bit_common", "read", "file", 170);
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Io, "{d:#?}");
    assert_eq!(d.busiest[0].pid, 2);
    assert_eq!(d.carriers.iter().map(|c| c.pid).collect::<Vec<_>>(), [3]);
    assert!(d.next[0].contains("iosnoop -p 3 "), "{:?}", d.next);
    assert!(
        evidence(&d)
            .iter()
            .any(|e| e == "Members carrying `io`: p3 (PID 3) 100% (the drill-downs trace them)"),
        "{:?}",
        evidence(&d)
    );
}

fn profile_of(stacks: &[(&[&str], u64)]) -> crate::model::profile::Profile {
    crate::model::profile::Profile {
        stacks: stacks
            .iter()
            .map(|(f, n)| crate::model::profile::Stack {
                comm: "python3".into(),
                frames: f
                    .iter()
                    .map(|n| crate::model::profile::Frame::user(*n))
                    .collect(),
                samples: *n,
                weight: *n,
                user_depth: 0,
                state: None,
                waker: None,
                ongoing: false,
            })
            .collect(),
        ..Default::default()
    }
}

/// Four threads, each waiting for the GIL about half the time: the
/// observation's futex waits become lock waits, and the verdict says so.
#[test]
fn gil_waits_become_the_lock_verdict() {
    let p = profile_of(&[
        (
            &[
                "PyEval_RestoreThread",
                "python3.11+0x1",
                "pthread_cond_timedwait",
            ],
            90,
        ),
        (
            &[
                "_PyEval_EvalFrameDefault",
                "python3.11+0x1",
                "pthread_cond_timedwait",
            ],
            10,
        ),
        (&["main", "sleep"], 5),
    ]);
    let locks = crate::analysis::locks::attribute(&p, 200, None);
    assert_eq!(locks.len(), 2, "{locks:?}");
    assert_eq!(locks[0].kind, "the GIL");
    assert_eq!(locks[0].caller.as_deref(), Some("PyEval_RestoreThread"));
    assert_eq!(locks[0].share, 0.45);

    let mut o = Observation {
        pid: 7,
        window_s: 2.0,
        syscalls_readable: true,
        ..Default::default()
    };
    o.totals.thread_s = 8.0;
    o.totals.threads = 4;
    o.totals.user_s = 1.8;
    o.totals.run_delay_s = Some(1.0);
    o.sample('R', "", "", "", 100);
    o.sample('S', "futex_do_wait", "futex", "futex", 100);
    let before = classify(&o);
    assert_ne!(before.verdict, Class::Lock);
    assert!(crate::analysis::locks::relabel(&mut o, &locks));
    o.runtime_locks = locks;
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Lock, "{d:#?}");
    assert!(
            summary(&d).contains("CPython: the GIL (take_gil, taken in PyEval_RestoreThread): threads waited for it 50% of their time"),
            "{}",
            summary(&d)
        );
}
