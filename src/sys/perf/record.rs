//! Decoding the records of a perf ring (perf_event_open(2), "MMAP layout").
//!
//! Sample fields come in the documented order of `sample_type` bits; kdiag
//! always asks for IP, TID, TIME, CPU and PERIOD and optionally CALLCHAIN,
//! RAW, and REGS_USER + STACK_USER (for DWARF unwinding), so this is the only
//! layout to decode.

use perf_event_open_sys::bindings as sys;

/// Sample fields kdiag always requests.
pub const BASE_SAMPLE_TYPE: u64 = (sys::PERF_SAMPLE_IP
    | sys::PERF_SAMPLE_TID
    | sys::PERF_SAMPLE_TIME
    | sys::PERF_SAMPLE_CPU
    | sys::PERF_SAMPLE_PERIOD) as u64;

/// The user registers sampled for unwinding (`sample_regs_user`): BP, SP
/// and IP, the three an x86-64 unwinder starts from. The kernel writes them
/// in register-number order.
#[cfg(target_arch = "x86_64")]
pub const USER_REGS_MASK: u64 =
    (1 << sys::PERF_REG_X86_BP) | (1 << sys::PERF_REG_X86_SP) | (1 << sys::PERF_REG_X86_IP);
#[cfg(not(target_arch = "x86_64"))]
pub const USER_REGS_MASK: u64 = 0;

/// The user-space registers at the sample (the task's registers at kernel
/// entry when the sample hit kernel code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// A callchain: instruction pointers, innermost first, with context markers
/// (`PERF_CONTEXT_KERNEL`, `PERF_CONTEXT_USER`) saying which half follows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Callchain<'a>(&'a [u8]);

/// Which address space a frame of a callchain belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    Kernel,
    User,
}

impl<'a> Callchain<'a> {
    pub fn len(&self) -> usize {
        self.0.len() / 8
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Raw entries, markers included.
    pub fn raw(&self) -> impl Iterator<Item = u64> + 'a {
        self.0
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
    }

    /// Frames with their address space, markers removed, innermost first.
    pub fn frames(&self) -> impl Iterator<Item = (Space, u64)> + 'a {
        let mut space = Space::Kernel;
        self.raw().filter_map(move |ip| {
            if ip >= sys::PERF_CONTEXT_MAX {
                space = match ip {
                    x if x == sys::PERF_CONTEXT_USER => Space::User,
                    _ => Space::Kernel,
                };
                None
            } else {
                Some((space, ip))
            }
        })
    }
}

/// A sample: where a task was when the event fired.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    /// Nanoseconds, CLOCK_MONOTONIC (kdiag sets use_clockid).
    pub time: u64,
    pub cpu: u32,
    /// The number of events this sample stands for (its weight).
    pub period: u64,
    pub callchain: Callchain<'a>,
    /// The tracepoint record (empty for non-tracepoint events); decode its
    /// fields with `sys::tracefs::Field`.
    pub raw: &'a [u8],
    /// User registers, when asked for (REGS_USER) and the task had a user
    /// context (not a kernel thread).
    pub user_regs: Option<UserRegs>,
    /// The valid part of the copy of the user stack from `user_regs.sp` up
    /// (STACK_USER; empty when not asked for).
    pub user_stack: &'a [u8],
}

/// A record from the ring.
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    /// The kernel dropped `count` records: the ring was full.
    Lost {
        count: u64,
    },
    /// Sampling was throttled (`unthrottle == false`) or resumed, because the
    /// rate exceeded perf_event_max_sample_rate.
    Throttle {
        time: u64,
        unthrottle: bool,
    },
    /// A task changed its name; `exec` when the change came from an exec.
    Comm {
        pid: u32,
        tid: u32,
        comm: &'a str,
        exec: bool,
    },
    /// An executable mapping appeared.
    Mmap2 {
        pid: u32,
        tid: u32,
        addr: u64,
        len: u64,
        pgoff: u64,
        filename: &'a str,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        time: u64,
    },
    Exit {
        pid: u32,
        ppid: u32,
        tid: u32,
        time: u64,
    },
    /// A record type kdiag does not use.
    Other {
        kind: u32,
    },
}

/// Decode one record body (without its 8-byte header). Returns None for a
/// body too short for its type: a malformed record is skipped, never trusted.
pub fn decode(kind: u32, misc: u16, body: &[u8], sample_type: u64) -> Option<Record<'_>> {
    let mut r = Reader(body);
    Some(match kind {
        sys::PERF_RECORD_SAMPLE => Record::Sample(decode_sample(&mut r, sample_type)?),
        sys::PERF_RECORD_LOST => {
            let _id = r.u64()?;
            Record::Lost { count: r.u64()? }
        }
        sys::PERF_RECORD_THROTTLE | sys::PERF_RECORD_UNTHROTTLE => Record::Throttle {
            time: r.u64()?,
            unthrottle: kind == sys::PERF_RECORD_UNTHROTTLE,
        },
        sys::PERF_RECORD_COMM => Record::Comm {
            pid: r.u32()?,
            tid: r.u32()?,
            comm: r.cstr()?,
            exec: misc & sys::PERF_RECORD_MISC_COMM_EXEC as u16 != 0,
        },
        sys::PERF_RECORD_MMAP2 => {
            let (pid, tid) = (r.u32()?, r.u32()?);
            let (addr, len, pgoff) = (r.u64()?, r.u64()?, r.u64()?);
            // maj, min, ino, ino_generation (or build id), prot, flags.
            r.skip(4 + 4 + 8 + 8 + 4 + 4)?;
            Record::Mmap2 {
                pid,
                tid,
                addr,
                len,
                pgoff,
                filename: r.cstr()?,
            }
        }
        sys::PERF_RECORD_FORK | sys::PERF_RECORD_EXIT => {
            let (pid, ppid, tid, _ptid, time) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?, r.u64()?);
            if kind == sys::PERF_RECORD_FORK {
                Record::Fork {
                    pid,
                    ppid,
                    tid,
                    time,
                }
            } else {
                Record::Exit {
                    pid,
                    ppid,
                    tid,
                    time,
                }
            }
        }
        kind => Record::Other { kind },
    })
}

fn decode_sample<'a>(r: &mut Reader<'a>, sample_type: u64) -> Option<Sample<'a>> {
    debug_assert_eq!(sample_type & BASE_SAMPLE_TYPE, BASE_SAMPLE_TYPE);
    let ip = r.u64()?;
    let (pid, tid) = (r.u32()?, r.u32()?);
    let time = r.u64()?;
    let cpu = r.u32()?;
    let _res = r.u32()?;
    let period = r.u64()?;
    let mut callchain = Callchain::default();
    if sample_type & sys::PERF_SAMPLE_CALLCHAIN as u64 != 0 {
        let nr = r.u64()? as usize;
        callchain = Callchain(r.bytes(nr.checked_mul(8)?)?);
    }
    let mut raw: &[u8] = &[];
    if sample_type & sys::PERF_SAMPLE_RAW as u64 != 0 {
        let size = r.u32()? as usize;
        raw = r.bytes(size)?;
    }
    let mut user_regs = None;
    if sample_type & sys::PERF_SAMPLE_REGS_USER as u64 != 0 {
        // abi 0 (PERF_SAMPLE_REGS_ABI_NONE): no user context, no registers.
        if r.u64()? != 0 {
            let (bp, sp, ip) = (r.u64()?, r.u64()?, r.u64()?);
            user_regs = Some(UserRegs { ip, sp, bp });
        }
    }
    let mut user_stack: &[u8] = &[];
    if sample_type & sys::PERF_SAMPLE_STACK_USER as u64 != 0 {
        let size = r.u64()? as usize;
        if size != 0 {
            let data = r.bytes(size)?;
            // The copy always has the requested size; dyn_size says how much
            // of it the kernel could actually read.
            let dyn_size = (r.u64()? as usize).min(size);
            user_stack = &data[..dyn_size];
        }
    }
    Some(Sample {
        ip,
        pid,
        tid,
        time,
        cpu,
        period,
        callchain,
        raw,
        user_regs,
        user_stack,
    })
}

/// A bounds-checked cursor over a record body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.bytes(n).map(|_| ())
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_ne_bytes(self.bytes(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_ne_bytes(self.bytes(8)?.try_into().ok()?))
    }

    /// A NUL-terminated string padded to 8 bytes: takes the rest up to the NUL.
    fn cstr(&mut self) -> Option<&'a str> {
        let end = self.0.iter().position(|&b| b == 0)?;
        let s = std::str::from_utf8(&self.0[..end]).ok()?;
        self.0 = &self.0[end..];
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_body(callchain: &[u64], raw: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0x1234u64.to_ne_bytes()); // ip
        b.extend(10u32.to_ne_bytes()); // pid
        b.extend(11u32.to_ne_bytes()); // tid
        b.extend(99u64.to_ne_bytes()); // time
        b.extend(1u32.to_ne_bytes()); // cpu
        b.extend(0u32.to_ne_bytes()); // res
        b.extend(1_000_000u64.to_ne_bytes()); // period
        b.extend((callchain.len() as u64).to_ne_bytes());
        for ip in callchain {
            b.extend(ip.to_ne_bytes());
        }
        b.extend((raw.len() as u32).to_ne_bytes());
        b.extend(raw);
        b
    }

    const ALL: u64 = BASE_SAMPLE_TYPE | (sys::PERF_SAMPLE_CALLCHAIN | sys::PERF_SAMPLE_RAW) as u64;

    #[test]
    fn decodes_a_sample_with_callchain_and_raw() {
        let kernel = sys::PERF_CONTEXT_KERNEL;
        let user = sys::PERF_CONTEXT_USER;
        let body = sample_body(
            &[kernel, 0xffff_ffff_8100_0000, user, 0x401000, 0x401100],
            b"rawdata",
        );
        let Some(Record::Sample(s)) = decode(sys::PERF_RECORD_SAMPLE, 0, &body, ALL) else {
            panic!("not a sample")
        };
        assert_eq!(
            (s.ip, s.pid, s.tid, s.time, s.cpu, s.period),
            (0x1234, 10, 11, 99, 1, 1_000_000)
        );
        let frames: Vec<_> = s.callchain.frames().collect();
        assert_eq!(
            frames,
            [
                (Space::Kernel, 0xffff_ffff_8100_0000),
                (Space::User, 0x401000),
                (Space::User, 0x401100)
            ]
        );
        assert_eq!(s.raw, b"rawdata");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn decodes_user_registers_and_stack() {
        let t = BASE_SAMPLE_TYPE
            | (sys::PERF_SAMPLE_CALLCHAIN
                | sys::PERF_SAMPLE_REGS_USER
                | sys::PERF_SAMPLE_STACK_USER) as u64;
        let mut b = sample_body(&[sys::PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_0000], b"");
        b.truncate(b.len() - 4); // no RAW field in this layout
        b.extend(2u64.to_ne_bytes()); // PERF_SAMPLE_REGS_ABI_64
        for reg in [0x7ff0u64, 0x7fe0, 0x401234] {
            b.extend(reg.to_ne_bytes()); // bp, sp, ip
        }
        b.extend(16u64.to_ne_bytes());
        b.extend([7u8; 16]);
        b.extend(8u64.to_ne_bytes()); // dyn_size: half of the copy is valid
        let Some(Record::Sample(s)) = decode(sys::PERF_RECORD_SAMPLE, 0, &b, t) else {
            panic!("not a sample")
        };
        assert_eq!(
            s.user_regs,
            Some(UserRegs {
                ip: 0x401234,
                sp: 0x7fe0,
                bp: 0x7ff0
            })
        );
        assert_eq!(s.user_stack, [7u8; 8]);
        // A kernel thread: abi 0, no registers; a zero-size stack has no dyn_size.
        let mut k = sample_body(&[], b"");
        k.truncate(k.len() - 4);
        k.extend(0u64.to_ne_bytes());
        k.extend(0u64.to_ne_bytes());
        let Some(Record::Sample(s)) = decode(sys::PERF_RECORD_SAMPLE, 0, &k, t) else {
            panic!("not a sample")
        };
        assert!(s.user_regs.is_none() && s.user_stack.is_empty());
        // A stack copy cut short is rejected, not read past.
        assert!(decode(sys::PERF_RECORD_SAMPLE, 0, &b[..b.len() - 12], t).is_none());
    }

    #[test]
    fn truncated_sample_is_rejected() {
        let body = sample_body(&[1, 2, 3], b"x");
        for cut in [0, 7, 30, 50, body.len() - 1] {
            assert!(
                decode(sys::PERF_RECORD_SAMPLE, 0, &body[..cut], ALL).is_none(),
                "cut at {cut}"
            );
        }
        // A callchain length that would overflow is rejected too.
        let mut evil = sample_body(&[], b"");
        evil[40..48].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(decode(sys::PERF_RECORD_SAMPLE, 0, &evil, ALL).is_none());
    }

    #[test]
    fn decodes_comm_and_lost() {
        let mut b = Vec::new();
        b.extend(5u32.to_ne_bytes());
        b.extend(5u32.to_ne_bytes());
        b.extend(b"io-app\0\0");
        let rec = decode(
            sys::PERF_RECORD_COMM,
            sys::PERF_RECORD_MISC_COMM_EXEC as u16,
            &b,
            ALL,
        );
        assert!(matches!(
            rec,
            Some(Record::Comm {
                pid: 5,
                comm: "io-app",
                exec: true,
                ..
            })
        ));
        let mut l = Vec::new();
        l.extend(0u64.to_ne_bytes());
        l.extend(42u64.to_ne_bytes());
        assert!(matches!(
            decode(sys::PERF_RECORD_LOST, 0, &l, ALL),
            Some(Record::Lost { count: 42 })
        ));
    }
}
