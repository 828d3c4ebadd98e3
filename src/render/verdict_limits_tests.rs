//! The limits' verdicts on synthetic observations: each found where the
//! thread states alone would mislead, and left alone where they agree.

use super::{evidence, pressure_text, summary};
use crate::analysis::classify::classify;
use crate::model::diagnosis::{Class, Member, Observation, Totals};
use crate::model::limits::{
    CgroupLimits, CpuQuota, IoLimit, Limits, MemoryLimit, Pressure, Stall, SystemCpus,
};
use crate::model::verdict::Diagnosis;

/// One thread watched for 3 s, runnable all along: 0.2 CPUs used, 0.8 of
/// the time in the run queue (what a 20% quota looks like, and a process
/// starved by others too).
fn waiting_for_cpu() -> Observation {
    let mut o = Observation {
        pid: 42,
        comm: "spin".into(),
        window_s: 3.0,
        bucket_s: 0.1,
        syscalls_readable: true,
        totals: Totals {
            thread_s: 3.0,
            threads: 1,
            processes: 1,
            user_s: 0.6,
            run_delay_s: Some(2.4),
            read_bytes: Some(0),
            write_bytes: Some(0),
            ..Default::default()
        },
        ..Default::default()
    };
    o.sample('R', "", "", "", 150);
    o
}

/// One thread blocked on storage most of 3 s.
fn waiting_for_storage() -> Observation {
    let mut o = waiting_for_cpu();
    o.totals.user_s = 0.1;
    o.totals.run_delay_s = Some(0.05);
    o.sample('D', "blk_throtl_wait", "pread64", "file", 140);
    o.samples.retain(|s| s.state == 'D');
    o
}

fn cgroup(path: &str, version: u8, controllers: &str) -> CgroupLimits {
    CgroupLimits {
        version,
        controllers: controllers.into(),
        path: path.into(),
        dir: format!("/sys/fs/cgroup/{controllers}{path}"),
        pids: vec![42],
        ..Default::default()
    }
}

fn has(d: &Diagnosis, what: &str) -> bool {
    summary(d).contains(what) || evidence(d).iter().any(|e| e.contains(what))
}

#[test]
fn a_throttling_quota_is_the_verdict_not_competition() {
    let mut o = waiting_for_cpu();
    let mut c = cgroup("/box", 1, "cpu");
    c.cpu = Some(CpuQuota {
        quota_us: Some(20_000),
        period_us: 100_000,
        periods: 30,
        throttled: 29,
        throttled_s: 2.3,
    });
    o.limits = Limits {
        cgroups: vec![c],
        cpus: Some(SystemCpus { cpus: 2, idle: 1.7 }),
        ..Default::default()
    };
    let d = classify(&o);
    assert_eq!(d.verdict, Class::CpuQuota, "{d:#?}");
    assert!(has(
        &d,
        "0.20 CPUs (cpu.cfs_quota_us 20000 of 100000 µs) at v1 cpu /box"
    ));
    assert!(has(&d, "throttled in 29 of 30 periods"), "{d:#?}");
    assert!(has(&d, "Thread states alone: sched"), "{d:#?}");
    // Nothing sends the user looking for a competitor.
    assert!(
        d.next
            .iter()
            .all(|n| !n.contains("top") && !n.contains("-a")),
        "{:?}",
        d.next
    );
    assert_eq!(d.next[0], "cat /sys/fs/cgroup/cpu/box/cpu.stat");
}

#[test]
fn a_quota_that_seldom_throttles_leaves_competition_standing() {
    let mut o = waiting_for_cpu();
    let mut c = cgroup("/box", 2, "");
    c.cpu = Some(CpuQuota {
        quota_us: Some(150_000),
        period_us: 100_000,
        periods: 30,
        throttled: 1,
        throttled_s: 0.01,
    });
    o.limits.cgroups = vec![c];
    o.limits.cpus = Some(SystemCpus { cpus: 2, idle: 0.0 });
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Sched, "{d:#?}");
    assert!(has(
        &d,
        "CPU quota: 1.50 CPUs (cpu.max 150000 of 100000 µs) at v2 /box"
    ));
    assert!(d.next.contains(&"kdiag top".to_string()));
}

#[test]
fn waiting_for_a_cpu_on_idle_cpus_is_not_called_competition() {
    let mut o = waiting_for_cpu();
    o.limits.cgroups = vec![cgroup("/user.slice", 2, "")];
    o.limits.cpus = Some(SystemCpus { cpus: 4, idle: 2.5 });
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Sched);
    assert!(
        summary(&d).contains("2.5 of 4 CPUs stood idle"),
        "{}",
        summary(&d)
    );
    assert!(summary(&d).contains("no CPU quota throttled its cgroups (read: v2 /user.slice)"));
    assert!(d.next.iter().all(|n| !n.contains("top")), "{:?}", d.next);
    // No CPU pressure says the same on a busy machine.
    o.limits.cpus = Some(SystemCpus { cpus: 4, idle: 0.1 });
    o.limits.pressure = Some(Pressure {
        cpu: Some(Stall {
            some: 0.01,
            full: None,
        }),
        ..Default::default()
    });
    let d = classify(&o);
    assert!(
        summary(&d).contains("CPU pressure was 1%"),
        "{}",
        summary(&d)
    );
    assert!(has(&d, "Pressure (machine, PSI): CPU some 1%"), "{d:#?}");
}

#[test]
fn storage_waits_at_the_cgroups_iops_limit_are_the_limit() {
    let mut o = waiting_for_storage();
    let mut c = cgroup("/slow", 1, "blkio");
    c.io = vec![IoLimit {
        device: "254:0".into(),
        disk: Some("vda".into()),
        read_iops: Some(200),
        reads: 597,
        ..Default::default()
    }];
    o.limits.cgroups = vec![c];
    let d = classify(&o);
    assert_eq!(d.verdict, Class::IoLimit, "{d:#?}");
    assert!(
        summary(&d)
            .contains("199 reads/s against the limit of 200 read IOPS on vda (254:0) (100% of it) at v1 blkio /slow"),
        "{}",
        summary(&d)
    );
    assert!(has(&d, "Thread states alone: io"));
    // Far below its limit: the device, not the limit.
    o.limits.cgroups[0].io[0].reads = 60;
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Io);
    assert!(
        has(&d, "I/O limit: vda (254:0) at v1 blkio /slow: 20 reads/s"),
        "{d:#?}"
    );
}

#[test]
fn storage_waits_without_a_limit_say_none_was_found() {
    let mut o = waiting_for_storage();
    o.limits.cgroups = vec![cgroup("/system.slice/db.service", 2, "")];
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Io);
    assert!(
        has(
            &d,
            "Limits: no I/O limit on its cgroups (read: v2 /system.slice/db.service)"
        ),
        "{d:#?}"
    );
}

#[test]
fn refaults_at_the_memory_limit_are_the_verdict() {
    let mut o = waiting_for_storage();
    o.sample('D', "folio_wait_bit_common", "fault", "", 100);
    let mut c = cgroup("/small", 1, "memory");
    c.memory = Some(MemoryLimit {
        max: Some(48 << 20),
        current: 48 << 20,
        failcnt: 796_000,
        refaults: 4_800_000,
        ..Default::default()
    });
    o.limits.cgroups = vec![c];
    let d = classify(&o);
    assert_eq!(d.verdict, Class::MemoryLimit, "{d:#?}");
    assert!(
        summary(&d)
            .contains("48 MiB at v1 memory /small, reached 796000 times (failcnt), 4800000 pages"),
        "{}",
        summary(&d)
    );
    // A limit never reached is only evidence.
    o.limits.cgroups[0].memory.as_mut().unwrap().failcnt = 0;
    let d = classify(&o);
    assert_eq!(d.verdict, Class::Io);
    assert!(has(&d, "Memory limit: 48 MiB at v1 memory /small"));
}

#[test]
fn an_oom_kill_names_the_members_that_ended() {
    let mut o = waiting_for_cpu();
    o.scope = crate::model::diagnosis::Scope::Tree;
    o.members = vec![
        Member {
            pid: 42,
            comm: "sh".into(),
            ..Default::default()
        },
        Member {
            pid: 43,
            comm: "hog".into(),
            ended: true,
            ..Default::default()
        },
        Member {
            pid: 44,
            comm: "other".into(),
            ended: true,
            ..Default::default()
        },
    ];
    let mut c = cgroup("/box", 2, "");
    c.pids = vec![42, 43];
    c.memory = Some(MemoryLimit {
        max: Some(32 << 20),
        oom: 1,
        oom_kill: 1,
        ..Default::default()
    });
    let mut other = cgroup("/elsewhere", 2, "");
    other.pids = vec![44];
    o.limits.cgroups = vec![c, other];
    let d = classify(&o);
    assert_eq!(d.verdict, Class::OomKill, "{d:#?}");
    assert!(
        summary(&d).contains("killed 1 process in its memory cgroup v2 /box (limit 32 MiB); the tree's members that ended: PID 43 (hog)"),
        "{}",
        summary(&d)
    );
    assert!(d.next[1].ends_with("/box/memory.events"));
}

#[test]
fn pressure_reads_as_shares() {
    let p = Pressure {
        cpu: Some(Stall {
            some: 0.12,
            full: Some(0.0),
        }),
        io: Some(Stall {
            some: 0.4,
            full: Some(0.3),
        }),
        memory: None,
    };
    assert_eq!(pressure_text(&p), "CPU some 12%, I/O some 40% full 30%");
}

#[test]
fn who_it_runs_as_comes_from_its_own_cgroup() {
    let mut o = waiting_for_storage();
    let mut systemd = cgroup("/system.slice/postgresql.service", 1, "name=systemd");
    systemd.pids = vec![42];
    let mut above = cgroup("/system.slice/other.service", 2, "");
    above.ancestor = true;
    o.limits.cgroups = vec![above, systemd];
    let d = classify(&o);
    assert!(
        has(
            &d,
            "Runs as: systemd service postgresql (cgroup /system.slice/postgresql.service)"
        ),
        "{d:#?}"
    );
}

/// The verdict is stored as data: the serialised diagnosis (what `--json`
/// prints and `--record` saves) has no sentence field, its findings are
/// tagged objects, and the words come only from here.
#[test]
fn the_serialised_diagnosis_holds_data_not_sentences() {
    let mut o = waiting_for_cpu();
    let mut c = cgroup("/box", 2, "");
    c.cpu = Some(CpuQuota {
        quota_us: Some(20_000),
        period_us: 100_000,
        periods: 30,
        throttled: 29,
        throttled_s: 2.3,
    });
    c.pressure = Some(Pressure::default());
    o.limits = Limits {
        cgroups: vec![c],
        cpus: Some(SystemCpus { cpus: 2, idle: 1.7 }),
        ..Default::default()
    };
    let d = classify(&o);
    let v = serde_json::to_value(&d).unwrap();
    fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    out.push(k.clone());
                    keys(x, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    keys(&v, &mut all);
    for prose in ["summary", "evidence", "text", "line"] {
        assert!(!all.iter().any(|k| k == prose), "a `{prose}` field: {v:#}");
    }
    assert_eq!(v["cause"]["kind"], "cpu-quota", "{v:#}");
    let findings = v["findings"].as_array().unwrap();
    assert!(findings.len() >= 5, "{v:#}");
    assert!(
        findings.iter().all(|f| f["kind"].is_string()),
        "a finding that is not a tagged object: {v:#}"
    );
    // The words are made from the data alone, and it reads back the same.
    let back: Diagnosis = serde_json::from_value(v).unwrap();
    assert_eq!(back, d);
    assert!(summary(&back).starts_with("throttled by its CPU quota: 0.20 CPUs (cpu.max"));
    assert_eq!(evidence(&back)[0], evidence(&d)[0]);
}

#[test]
fn forks_refused_at_pids_max_are_the_verdict_of_an_idle_looking_process() {
    let mut o = waiting_for_cpu();
    o.samples.clear();
    o.totals.user_s = 0.01;
    o.totals.run_delay_s = Some(0.0);
    o.sample('S', "", "clock_nanosleep", "", 150);
    assert_eq!(classify(&o).verdict, Class::Idle);
    let mut c = cgroup("/box", 1, "pids");
    c.pids_limit = Some(crate::model::limits::PidsLimit {
        max: 4,
        current: 4,
        refused: 0,
    });
    o.limits.cgroups = vec![c];
    // At its limit, but nothing refused: still idle.
    assert_eq!(classify(&o).verdict, Class::Idle);
    o.limits.cgroups[0].pids_limit.as_mut().unwrap().refused = 96;
    let d = classify(&o);
    assert_eq!(d.verdict, Class::PidsLimit, "{d:#?}");
    assert!(
        summary(&d).contains("forks refused by its cgroup's pids.max: 96 in 3.0 s, 4 of 4"),
        "{}",
        summary(&d)
    );
    assert!(has(&d, "Thread states alone: idle"), "{:#?}", evidence(&d));
}
