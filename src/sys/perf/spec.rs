//! What an event counts or samples, and how: the perf_event_attr kdiag
//! builds for each kind of event.

use perf_event_open_sys::bindings as sys;

use super::record;

/// What to count or sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The software CPU clock, sampled at `freq` Hz: works without a hardware PMU.
    CpuClock { freq: u64 },
    /// Hardware CPU cycles at `freq` Hz, where the machine has a PMU.
    Cycles { freq: u64 },
    /// A tracepoint by id (`EventFormat::id`); every hit is a sample.
    Tracepoint { id: u64 },
    /// The software dummy event: never samples, carries only the task
    /// records (COMM, MMAP2, FORK, EXIT) for symbolizing stacks recorded
    /// some other way (BPF). Costs nothing per context switch system-wide.
    Sideband,
}

/// One event to open on every CPU of the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub kind: EventKind,
    /// Record kernel and user call stacks with each sample.
    pub callchain: bool,
    pub exclude_user: bool,
    pub exclude_kernel: bool,
    /// Also emit COMM, MMAP2, FORK and EXIT records (for symbolization).
    pub task_events: bool,
    /// Stay disabled until the target execs (for `-- CMD` spawned stopped).
    pub enable_on_exec: bool,
    /// A tracepoint filter expression, e.g. `dev == 265289728`.
    pub filter: Option<String>,
    /// Copy this many bytes of the user stack, with the user registers, into
    /// every sample (for DWARF unwinding after the fact). A multiple of 8,
    /// at most `MAX_USER_STACK`.
    pub user_stack: Option<u32>,
    /// Leave the user half out of the kernel's callchain (it walks frame
    /// pointers; DWARF unwinding replaces it).
    pub exclude_callchain_user: bool,
}

/// The largest user stack copy the kernel accepts (it must also be a
/// multiple of 8 and keep a record under 64 KiB).
pub const MAX_USER_STACK: u32 = 65528;

impl EventSpec {
    fn new(kind: EventKind) -> Self {
        EventSpec {
            kind,
            callchain: false,
            exclude_user: false,
            exclude_kernel: false,
            task_events: false,
            enable_on_exec: false,
            filter: None,
            user_stack: None,
            exclude_callchain_user: false,
        }
    }

    pub fn cpu_clock(freq: u64) -> Self {
        Self::new(EventKind::CpuClock { freq })
    }

    pub fn cycles(freq: u64) -> Self {
        Self::new(EventKind::Cycles { freq })
    }

    pub fn tracepoint(id: u64) -> Self {
        Self::new(EventKind::Tracepoint { id })
    }

    /// Task records only (see `EventKind::Sideband`).
    pub fn sideband() -> Self {
        Self::new(EventKind::Sideband).with_task_events()
    }

    pub fn with_callchain(mut self) -> Self {
        self.callchain = true;
        self
    }

    pub fn with_task_events(mut self) -> Self {
        self.task_events = true;
        self
    }

    /// Stay disabled until the target execs (do not call `Session::enable`).
    pub fn with_enable_on_exec(mut self) -> Self {
        self.enable_on_exec = true;
        self
    }

    /// Sample only while the CPU runs kernel code.
    pub fn kernel_only(mut self) -> Self {
        self.exclude_user = true;
        self
    }

    /// Sample only while the CPU runs user code.
    pub fn user_only(mut self) -> Self {
        self.exclude_kernel = true;
        self
    }

    /// A short name for reports: `cpu-clock`, `cycles`, `tracepoint`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            EventKind::CpuClock { .. } => "cpu-clock",
            EventKind::Cycles { .. } => "cycles",
            EventKind::Tracepoint { .. } => "tracepoint",
            EventKind::Sideband => "sideband",
        }
    }

    /// Sample the user registers and `bytes` of the user stack (see
    /// `user_stack`); `bytes` is rounded down to a multiple of 8 and capped.
    pub fn with_user_stack(mut self, bytes: u32) -> Self {
        self.user_stack = Some(bytes.min(MAX_USER_STACK) & !7);
        self
    }

    /// Drop the frame-pointer user half of the callchain (kernel half kept).
    pub fn without_user_callchain(mut self) -> Self {
        self.exclude_callchain_user = true;
        self
    }

    pub fn with_filter(mut self, filter: impl Into<String>) -> Self {
        self.filter = Some(filter.into());
        self
    }

    pub(super) fn sample_type(&self) -> u64 {
        let mut t = record::BASE_SAMPLE_TYPE;
        if self.callchain {
            t |= sys::PERF_SAMPLE_CALLCHAIN as u64;
        }
        if matches!(self.kind, EventKind::Tracepoint { .. }) {
            t |= sys::PERF_SAMPLE_RAW as u64;
        }
        if self.user_stack.is_some() {
            t |= (sys::PERF_SAMPLE_REGS_USER | sys::PERF_SAMPLE_STACK_USER) as u64;
        }
        t
    }

    pub(super) fn attr(&self, inherit: bool) -> sys::perf_event_attr {
        let mut a = sys::perf_event_attr {
            size: std::mem::size_of::<sys::perf_event_attr>() as u32,
            ..Default::default()
        };
        match self.kind {
            EventKind::CpuClock { freq } | EventKind::Cycles { freq } => {
                (a.type_, a.config) = if matches!(self.kind, EventKind::CpuClock { .. }) {
                    (sys::PERF_TYPE_SOFTWARE, sys::PERF_COUNT_SW_CPU_CLOCK as u64)
                } else {
                    (
                        sys::PERF_TYPE_HARDWARE,
                        sys::PERF_COUNT_HW_CPU_CYCLES as u64,
                    )
                };
                a.__bindgen_anon_1.sample_freq = freq;
                a.set_freq(1);
            }
            EventKind::Tracepoint { id } => {
                (a.type_, a.config) = (sys::PERF_TYPE_TRACEPOINT, id);
                a.__bindgen_anon_1.sample_period = 1;
            }
            EventKind::Sideband => {
                (a.type_, a.config) = (sys::PERF_TYPE_SOFTWARE, sys::PERF_COUNT_SW_DUMMY as u64);
            }
        }
        a.sample_type = self.sample_type();
        a.set_disabled(1);
        a.set_inherit(inherit as u64);
        a.set_exclude_user(self.exclude_user as u64);
        a.set_exclude_kernel(self.exclude_kernel as u64);
        a.set_exclude_hv(1);
        a.set_enable_on_exec(self.enable_on_exec as u64);
        // Timestamps on CLOCK_MONOTONIC, comparable with clock_gettime.
        a.set_use_clockid(1);
        a.clockid = libc::CLOCK_MONOTONIC;
        if self.task_events {
            a.set_comm(1);
            a.set_comm_exec(1);
            // mmap asks for executable-mapping records; mmap2 only picks their format.
            a.set_mmap(1);
            a.set_mmap2(1);
            a.set_task(1);
        }
        if self.callchain {
            a.sample_max_stack = max_stack();
            a.set_exclude_callchain_user(self.exclude_callchain_user as u64);
        }
        if let Some(bytes) = self.user_stack {
            a.sample_regs_user = record::USER_REGS_MASK;
            a.sample_stack_user = bytes;
        }
        // Wake the poller when half the ring is full (the kernel default for a
        // zero wakeup_watermark), not on every record.
        a.set_watermark(1);
        a
    }
}

/// The deepest callchain the kernel allows (kernel.perf_event_max_stack),
/// read once per process: a per-thread profile opens an event per thread.
pub fn max_stack() -> u16 {
    static MAX: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(127)
    })
}
