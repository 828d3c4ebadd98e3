//! Which kdiag features work on this machine, and with which tier, decided
//! from the probe results alone (pure, so it is tested on made-up machines).

use crate::model::capability::{Feature, Probes, Tier};

/// Every feature with the tier it uses here, in the order doctor prints them.
pub fn features(p: &Probes) -> Vec<Feature> {
    let bpf = p.bpf_tracepoint.is_ok();
    let tp_btf = p.bpf_tp_btf.is_ok();
    let perf_tp = p.perf_tracepoint.is_ok();
    let clock = p.cpu_clock.is_ok();
    let sample_event = if p.hardware_pmu.is_ok() {
        "cycles"
    } else {
        "cpu-clock (no hardware PMU)"
    };
    let kernel_names = if p.kptr_restrict.is_ok() {
        ""
    } else {
        "; kernel frames unnamed (kptr_restrict)"
    };
    let need_root = "needs root: run with sudo";
    let no_return = if p.sched_prepare_exec.is_ok() {
        ""
    } else {
        "; the point of no return inferred (sched_prepare_exec needs 6.10)"
    };

    vec![
        feature(
            "profile",
            // Only a perf tier so far: callchains per sample are cheap enough
            // at profiling rates; in-kernel stack counting would be tier B.
            &[(Tier::Perf, clock)],
            |t| match t {
                Some(_) => format!("callchain samples on {sample_event}{kernel_names}"),
                None => format!("cannot sample CPU stacks: {need_root}"),
            },
        ),
        feature(
            "offcpu",
            // raw_tp when tp_btf is refused; both read task_struct with
            // CO-RE, so both need the kernel's BTF.
            &[
                (Tier::Bpf, p.btf.is_ok() && (tp_btf || bpf)),
                (Tier::Procfs, true),
            ],
            |t| match t {
                Some(Tier::Bpf) if tp_btf => {
                    "blocked time by stacks and state, summed in the kernel (tp_btf sched_switch)"
                        .into()
                }
                Some(Tier::Bpf) => {
                    "blocked time by stacks, summed in the kernel (raw_tp sched_switch: tp_btf \
                     refused)"
                        .into()
                }
                _ if !p.btf.is_ok() => "no stacks: wait channels and syscalls sampled from \
                     /proc every 10 ms (the BPF tier needs kernel BTF: CONFIG_DEBUG_INFO_BTF=y)"
                    .into(),
                _ => format!(
                    "no stacks: wait channels and syscalls sampled from /proc every 10 ms \
                     (your own processes; {need_root} for BPF)"
                ),
            },
        ),
        feature(
            "syscalls",
            &[(Tier::Bpf, p.btf.is_ok() && tp_btf), (Tier::Procfs, true)],
            |t| match t {
                Some(Tier::Bpf) => {
                    "every call counted and timed in the kernel (tp_btf sys_enter, sys_exit)".into()
                }
                _ => format!(
                    "the calls threads block in, sampled from /proc every 5 ms: no times \
                     (BPF needs tp_btf and kernel BTF; {need_root})"
                ),
            },
        ),
        feature(
            "iosnoop",
            &[(Tier::Bpf, tp_btf), (Tier::Perf, perf_tp)],
            |t| match t {
                Some(Tier::Bpf) => {
                    "requests matched exactly (tp_btf block_rq_*), with queue time".into()
                }
                Some(_) => {
                    "issue/complete paired by (dev, sector): merged requests may mismatch".into()
                }
                None => format!("cannot trace block I/O: {need_root}"),
            },
        ),
        feature(
            "exec-trace",
            // Its BPF tier also attaches tp_btf (signal_generate, fork).
            &[(Tier::Bpf, bpf && tp_btf), (Tier::Perf, perf_tp)],
            |t| match t {
                Some(Tier::Bpf) => {
                    format!("failed execs with their file names and arguments{no_return}")
                }
                Some(_) => format!(
                    "failed execs with error codes; file names only for successful execs{no_return}"
                ),
                None => format!("cannot trace execs: {need_root}"),
            },
        ),
        feature(
            "execsnoop",
            &[(Tier::Bpf, bpf), (Tier::Perf, perf_tp)],
            |t| match t {
                Some(Tier::Bpf) => "argv read in the kernel at exec".into(),
                Some(_) => {
                    "file names from sched_process_exec, argv from /proc (racy for short processes)"
                        .into()
                }
                None => format!("cannot trace execs: {need_root}"),
            },
        ),
        feature(
            "kernel frame names",
            &[(Tier::Bpf, p.bpf_iter_ksyms.is_ok()), (Tier::Procfs, true)],
            |t| match t {
                Some(Tier::Bpf) => format!(
                    "the kernel's own lookup of the addresses in the stacks (a BPF \
                     iterator){kernel_names}"
                ),
                _ => format!(
                    "from /proc/kallsyms, read whole (the kernel formats every symbol){kernel_names}"
                ),
            },
        ),
        feature(
            "watch",
            &[(Tier::Bpf, p.bpf_iter_task.is_ok()), (Tier::Procfs, true)],
            |t| match t {
                Some(Tier::Bpf) => "every task's counters read in the kernel at each scan (a BPF \
                                    task iterator, binary records)"
                    .into(),
                _ => format!(
                    "three /proc files per process at each scan (stat, io, schedstat), formatted \
                     as text by the kernel{}",
                    if p.bpf_iter_task.is_ok() {
                        ""
                    } else {
                        "; the BPF task iterator needs root and 5.8+ with BTF"
                    }
                ),
            },
        ),
        feature(
            "top: I/O columns",
            &[(Tier::Procfs, p.proc_pid_io.is_ok())],
            |t| match t {
                Some(_) => {
                    "read/write rates from /proc/PID/io (other users' processes need root)".into()
                }
                None => "no /proc/PID/io: I/O columns show '-'".into(),
            },
        ),
        feature(
            "top: run-queue wait",
            &[(Tier::Procfs, p.schedstat.is_ok())],
            |t| match t {
                Some(_) => "on-CPU and waiting times from /proc/PID/schedstat".into(),
                None => "no /proc/PID/schedstat".into(),
            },
        ),
        feature(
            "time: storage bytes",
            &[(Tier::Procfs, p.proc_pid_io.is_ok())],
            |t| match t {
                Some(_) => "read_bytes/write_bytes from /proc/PID/io before reaping".into(),
                None => "no /proc/PID/io: only rusage block counts".into(),
            },
        ),
        feature(
            "time: signal sender",
            &[(Tier::Tracefs, p.tracefs.is_ok())],
            |t| match t {
                Some(_) => "signal:signal_generate in a private tracefs instance".into(),
                None => format!("the sender of a fatal signal stays unknown: {need_root}"),
            },
        ),
        feature(
            "I/O delay per task",
            &[(Tier::Procfs, p.task_delayacct.is_ok())],
            |t| match t {
                Some(_) => "blkio delay from /proc/PID/stat (delay accounting on)".into(),
                None => "delay accounting off: sudo sysctl kernel.task_delayacct=1".into(),
            },
        ),
        feature(
            "pressure (PSI)",
            &[(Tier::Procfs, p.psi.is_ok())],
            |t| match t {
                Some(_) => "system CPU, I/O and memory pressure from /proc/pressure".into(),
                None => "no /proc/pressure: pressure trends unavailable".into(),
            },
        ),
    ]
}

/// Build one feature from its tiers in order of preference.
fn feature(name: &str, tiers: &[(Tier, bool)], note: impl Fn(Option<Tier>) -> String) -> Feature {
    let available: Vec<Tier> = tiers
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(t, _)| *t)
        .collect();
    let tier = available.first().copied();
    Feature {
        name: name.to_string(),
        tier,
        available,
        note: note(tier),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::capability::Check;

    /// The tier doctor's line for `name` shows.
    fn tier_for(p: &Probes, name: &str) -> Option<Tier> {
        features(p)
            .into_iter()
            .find(|f| f.name == name)
            .and_then(|f| f.tier)
    }

    /// A machine like the development VM: root, tracepoints and tp_btf work,
    /// fentry denied, no kprobes, no hardware PMU, delay accounting off.
    fn dev_vm() -> Probes {
        let ok = || Check::ok("");
        Probes {
            user: ok(),
            cap_perfmon: ok(),
            cap_bpf: ok(),
            cap_sys_admin: ok(),
            perf_event_paranoid: ok(),
            kptr_restrict: ok(),
            perf_event_max_sample_rate: ok(),
            perf_event_max_stack: ok(),
            unprivileged_bpf_disabled: ok(),
            tracefs: ok(),
            btf: ok(),
            perf_tracepoint: ok(),
            bpf_tracepoint: ok(),
            bpf_tp_btf: ok(),
            bpf_fentry: Check::denied("EPERM", "not needed"),
            sched_prepare_exec: ok(),
            bpf_perf_event: ok(),
            bpf_iter_ksyms: ok(),
            bpf_iter_task: ok(),
            kprobe_pmu: Check::missing("none", "not needed"),
            uprobe_pmu: ok(),
            hardware_pmu: Check::missing("ENOENT", "none"),
            cpu_clock: ok(),
            task_delayacct: Check::missing("0", "sysctl"),
            psi: ok(),
            schedstat: ok(),
            proc_pid_io: ok(),
        }
    }

    /// A normal user: nothing privileged opens.
    fn unprivileged() -> Probes {
        let denied = || Check::denied("EACCES", "sudo");
        Probes {
            tracefs: denied(),
            perf_tracepoint: denied(),
            bpf_tracepoint: denied(),
            bpf_tp_btf: denied(),
            bpf_fentry: denied(),
            bpf_perf_event: denied(),
            bpf_iter_ksyms: denied(),
            bpf_iter_task: denied(),
            cpu_clock: denied(),
            ..dev_vm()
        }
    }

    fn get(fs: &[Feature], name: &str) -> Feature {
        fs.iter().find(|f| f.name == name).unwrap().clone()
    }

    #[test]
    fn dev_vm_prefers_bpf_and_samples_on_cpu_clock() {
        let fs = features(&dev_vm());
        let profile = get(&fs, "profile");
        assert_eq!(profile.tier, Some(Tier::Perf));
        assert_eq!(profile.available, vec![Tier::Perf]);
        assert!(profile.note.contains("cpu-clock"), "{}", profile.note);
        assert_eq!(get(&fs, "iosnoop").tier, Some(Tier::Bpf));
        assert_eq!(get(&fs, "exec-trace").tier, Some(Tier::Bpf));
        assert_eq!(get(&fs, "offcpu").tier, Some(Tier::Bpf));
        assert_eq!(get(&fs, "offcpu").available, vec![Tier::Bpf, Tier::Procfs]);
        assert_eq!(get(&fs, "syscalls").tier, Some(Tier::Bpf));
        assert_eq!(get(&fs, "I/O delay per task").tier, None);
        let names = get(&fs, "kernel frame names");
        assert_eq!(names.tier, Some(Tier::Bpf));
        assert!(names.note.contains("BPF iterator"), "{}", names.note);
        let watch = get(&fs, "watch");
        assert_eq!(watch.available, vec![Tier::Bpf, Tier::Procfs]);
        assert!(watch.note.contains("task iterator"), "{}", watch.note);
        // Without BPF rights, watch says it reads /proc's text and why.
        let watch = get(&features(&unprivileged()), "watch");
        assert_eq!(watch.tier, Some(Tier::Procfs));
        assert!(watch.note.contains("needs root"), "{}", watch.note);
    }

    #[test]
    fn without_tp_btf_iosnoop_falls_back_to_perf() {
        let p = Probes {
            bpf_tp_btf: Check::missing("no BTF", "x"),
            ..dev_vm()
        };
        let io = get(&features(&p), "iosnoop");
        assert_eq!(io.tier, Some(Tier::Perf));
        // offcpu attaches raw_tp instead.
        assert!(get(&features(&p), "offcpu").note.contains("raw_tp"));
        assert!(io.note.contains("(dev, sector)"));
        // execsnoop only needs plain tracepoint programs; exec-trace also
        // attaches tp_btf (the signal that ends a failed exec).
        assert_eq!(tier_for(&p, "execsnoop"), Some(Tier::Bpf));
        assert_eq!(tier_for(&p, "exec-trace"), Some(Tier::Perf));
    }

    /// A kernel built without BTF: CO-RE cannot be relocated, so offcpu
    /// keeps only /proc, iosnoop and exec-trace use perf, execsnoop's plain
    /// tracepoint programs still load.
    #[test]
    fn without_btf_the_fallback_tiers_are_named() {
        let no_btf = || Check::missing("no BTF", "CONFIG_DEBUG_INFO_BTF=y");
        let p = Probes {
            btf: no_btf(),
            bpf_tp_btf: no_btf(),
            bpf_fentry: no_btf(),
            ..dev_vm()
        };
        let fs = features(&p);
        let offcpu = get(&fs, "offcpu");
        assert_eq!(offcpu.tier, Some(Tier::Procfs));
        assert!(offcpu.note.contains("no stacks"), "{}", offcpu.note);
        assert_eq!(tier_for(&p, "iosnoop"), Some(Tier::Perf));
        assert_eq!(tier_for(&p, "exec-trace"), Some(Tier::Perf));
        assert_eq!(tier_for(&p, "execsnoop"), Some(Tier::Bpf));
        assert_eq!(tier_for(&p, "syscalls"), Some(Tier::Procfs));
    }

    #[test]
    fn bpf_denied_uses_perf_everywhere() {
        let p = Probes {
            bpf_tracepoint: Check::denied("EPERM", "x"),
            bpf_tp_btf: Check::denied("EPERM", "x"),
            bpf_perf_event: Check::denied("EPERM", "x"),
            ..dev_vm()
        };
        for name in ["profile", "iosnoop", "exec-trace", "execsnoop"] {
            assert_eq!(tier_for(&p, name), Some(Tier::Perf), "{name}");
        }
    }

    #[test]
    fn before_6_10_exec_trace_says_the_point_of_no_return_is_inferred() {
        let exec = |p: &Probes| get(&features(p), "exec-trace").note;
        assert!(!exec(&dev_vm()).contains("inferred"), "{}", exec(&dev_vm()));
        let debian_12 = Probes {
            sched_prepare_exec: Check::missing("no tracepoint", "none needed"),
            ..dev_vm()
        };
        assert!(exec(&debian_12).contains("sched_prepare_exec needs 6.10"));
        assert_eq!(tier_for(&debian_12, "exec-trace"), Some(Tier::Bpf));
    }

    #[test]
    fn hardware_pmu_means_cycles() {
        let p = Probes {
            hardware_pmu: Check::ok("cycles"),
            ..dev_vm()
        };
        assert!(get(&features(&p), "profile").note.contains("on cycles"));
    }

    #[test]
    fn unprivileged_user_keeps_only_procfs_features() {
        let fs = features(&unprivileged());
        for name in [
            "profile",
            "iosnoop",
            "exec-trace",
            "execsnoop",
            "time: signal sender",
        ] {
            let f = get(&fs, name);
            assert_eq!(f.tier, None, "{name}");
            assert!(f.note.contains("sudo"), "{name}: {}", f.note);
        }
        assert_eq!(get(&fs, "top: I/O columns").tier, Some(Tier::Procfs));
        assert_eq!(get(&fs, "time: storage bytes").tier, Some(Tier::Procfs));
        let names = get(&fs, "kernel frame names");
        assert_eq!(names.tier, Some(Tier::Procfs));
        assert!(names.note.contains("/proc/kallsyms"), "{}", names.note);
        let offcpu = get(&fs, "offcpu");
        assert_eq!(offcpu.tier, Some(Tier::Procfs));
        assert!(offcpu.note.contains("no stacks"), "{}", offcpu.note);
    }
}
