//! What this machine allows, as probed by `sys::probe`: one `Check` per
//! item, and the features kdiag can offer with the tier each one uses.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Present and usable by us now.
    Ok,
    /// Not in this kernel, or switched off.
    Missing,
    /// Present, but we are not allowed (privileges or policy).
    Denied,
}

/// The result of one probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub status: Status,
    /// What was found, e.g. "2" for a sysctl or the errno of a failed load.
    pub detail: String,
    /// How to fix it, when it is not ok and it matters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    pub fn ok(detail: impl Into<String>) -> Self {
        Check {
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }
    pub fn missing(detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            status: Status::Missing,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
    pub fn denied(detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            status: Status::Denied,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}

/// Every probe `kdiag doctor` runs. Commands read the fields they need to
/// pick a tier (through `instruments::doctor::features`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probes {
    pub user: Check,
    pub cap_perfmon: Check,
    pub cap_bpf: Check,
    pub cap_sys_admin: Check,
    pub perf_event_paranoid: Check,
    pub kptr_restrict: Check,
    pub perf_event_max_sample_rate: Check,
    pub perf_event_max_stack: Check,
    pub unprivileged_bpf_disabled: Check,
    pub tracefs: Check,
    pub btf: Check,
    /// perf_event_open on a tracepoint with raw records (tier A).
    pub perf_tracepoint: Check,
    /// A tracepoint BPF program loaded and attached (tier B).
    pub bpf_tracepoint: Check,
    pub bpf_tp_btf: Check,
    pub bpf_fentry: Check,
    /// The sched:sched_prepare_exec tracepoint (Linux 6.10+): exec's point
    /// of no return, seen rather than inferred.
    pub sched_prepare_exec: Check,
    /// A perf_event BPF program attached to cpu-clock (profile, tier B).
    pub bpf_perf_event: Check,
    /// The BPF iterator that names kernel addresses ("%ps", Linux 5.13+).
    pub bpf_iter_ksyms: Check,
    /// The BPF task iterator that reads every task's counters (watch).
    pub bpf_iter_task: Check,
    pub kprobe_pmu: Check,
    pub uprobe_pmu: Check,
    /// Hardware cycles counter.
    pub hardware_pmu: Check,
    /// Software cpu-clock sampling, system-wide.
    pub cpu_clock: Check,
    pub task_delayacct: Check,
    pub psi: Check,
    pub schedstat: Check,
    pub proc_pid_io: Check,
}

impl Probes {
    /// The checks in display order, with their labels.
    pub fn items(&self) -> Vec<(&'static str, &Check)> {
        vec![
            ("user", &self.user),
            ("CAP_PERFMON", &self.cap_perfmon),
            ("CAP_BPF", &self.cap_bpf),
            ("CAP_SYS_ADMIN", &self.cap_sys_admin),
            ("perf_event_paranoid", &self.perf_event_paranoid),
            ("kptr_restrict", &self.kptr_restrict),
            (
                "perf_event_max_sample_rate",
                &self.perf_event_max_sample_rate,
            ),
            ("perf_event_max_stack", &self.perf_event_max_stack),
            ("unprivileged_bpf_disabled", &self.unprivileged_bpf_disabled),
            ("tracefs", &self.tracefs),
            ("BTF", &self.btf),
            ("perf tracepoint", &self.perf_tracepoint),
            ("BPF tracepoint", &self.bpf_tracepoint),
            ("BPF tp_btf", &self.bpf_tp_btf),
            ("BPF fentry", &self.bpf_fentry),
            ("sched_prepare_exec", &self.sched_prepare_exec),
            ("BPF perf_event", &self.bpf_perf_event),
            ("BPF iterator (%ps)", &self.bpf_iter_ksyms),
            ("BPF iterator (task)", &self.bpf_iter_task),
            ("kprobe PMU", &self.kprobe_pmu),
            ("uprobe PMU", &self.uprobe_pmu),
            ("hardware PMU", &self.hardware_pmu),
            ("cpu-clock sampling", &self.cpu_clock),
            ("task_delayacct", &self.task_delayacct),
            ("PSI", &self.psi),
            ("schedstat", &self.schedstat),
            ("/proc/PID/io", &self.proc_pid_io),
        ]
    }
}

/// A tracing tier: the kernel interface an instrument (or a feature of
/// doctor's table) rests on. One list for the instruments, their `--tier`
/// and doctor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Tier B: BPF programs loaded with aya.
    Bpf,
    /// Tier A: perf_event_open.
    Perf,
    /// tracefs instances and trace text.
    Tracefs,
    /// Plain /proc or /sys files.
    Procfs,
}

impl Tier {
    /// "bpf", "perf", "tracefs" or "procfs", as reports and JSON print it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Bpf => "bpf",
            Tier::Perf => "perf",
            Tier::Tracefs => "tracefs",
            Tier::Procfs => "procfs",
        }
    }

    /// "BPF", "perf", ... as doctor's table prints it.
    pub fn label(self) -> &'static str {
        match self {
            Tier::Bpf => "BPF",
            other => other.name(),
        }
    }

    /// Its value for `--tier` ("proc" for procfs, as offcpu always took it).
    pub fn arg(self) -> &'static str {
        match self {
            Tier::Procfs => "proc",
            other => other.name(),
        }
    }
}

/// One kdiag feature and how it runs here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feature {
    /// Command or part of a command, e.g. "profile", "top: I/O columns".
    pub name: String,
    /// The tier it will use; None when it cannot run here.
    pub tier: Option<Tier>,
    /// Every tier that works here, best first.
    pub available: Vec<Tier>,
    /// What this means for the user (event used, what is lost, the fix).
    pub note: String,
}

/// The whole `kdiag doctor` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorReport {
    pub probes: Probes,
    pub features: Vec<Feature>,
}
