//! Block I/O requests as the iosnoop tiers report them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A block device number, as userspace spells it (major, minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DevId {
    pub major: u32,
    pub minor: u32,
}

impl DevId {
    pub fn new(major: u32, minor: u32) -> Self {
        DevId { major, minor }
    }

    /// From the kernel's internal dev_t (major << 20 | minor), which block
    /// tracepoints record; glibc's makedev encodes differently.
    pub fn from_kernel(dev: u64) -> Self {
        DevId {
            major: (dev >> 20) as u32,
            minor: (dev & 0xfffff) as u32,
        }
    }

    pub fn to_kernel(self) -> u64 {
        ((self.major as u64) << 20) | self.minor as u64
    }
}

impl fmt::Display for DevId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.major, self.minor)
    }
}

/// A task: process id (tgid), thread id and command name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Task {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
}

/// One completed block request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockIo {
    /// The process that caused the request: the submitter seen at
    /// block_io_start, or the issuing task when the kernel did not say.
    pub comm: String,
    pub pid: u32,
    pub tid: u32,
    /// The task on the CPU when the request was issued to the device, when it
    /// is another process (a kworker, jbd2, a flusher).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub issuer: Option<Task>,
    /// Operation and flags as the kernel's rwbs: R, W, WS, FWFS, RA, ...
    pub rwbs: String,
    pub dev: DevId,
    /// Device name (vda), empty when unknown.
    pub disk: String,
    /// Start sector (512-byte units) on the whole disk.
    pub sector: u64,
    pub bytes: u64,
    /// Where the latency is counted from: issue, or queueing with -Q
    /// (nanoseconds, CLOCK_MONOTONIC).
    pub start_ns: u64,
    pub issue_ns: u64,
    pub end_ns: u64,
    /// Time spent queued before issue, when the queueing was seen.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub queue_ns: Option<u64>,
    /// end_ns - start_ns.
    pub latency_ns: u64,
    /// Completion status (0 ok, else a negative blk_status).
    pub error: i32,
}

impl BlockIo {
    pub fn is_write(&self) -> bool {
        Rwbs::parse(&self.rwbs).op == Op::Write
    }

    pub fn is_read(&self) -> bool {
        Rwbs::parse(&self.rwbs).op == Op::Read
    }

    /// The sector just past this request.
    pub fn end_sector(&self) -> u64 {
        self.sector + self.bytes / 512
    }
}

/// The operation of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    Flush,
    Discard,
    #[default]
    Other,
}

/// An rwbs string taken apart, following the kernel's blk_fill_rwbs: an
/// optional leading F (preflush), the operation, then F (FUA), A (readahead),
/// S (sync), M (metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rwbs {
    pub op: Op,
    pub preflush: bool,
    pub fua: bool,
    pub readahead: bool,
    pub sync: bool,
    pub meta: bool,
}

impl Rwbs {
    pub fn parse(s: &str) -> Rwbs {
        let mut r = Rwbs::default();
        let mut rest = s;
        // A lone "F" is a flush; "F" before another operation is a preflush.
        if rest.len() > 1 && rest.starts_with('F') {
            r.preflush = true;
            rest = &rest[1..];
        }
        let mut chars = rest.chars();
        r.op = match chars.next() {
            Some('R') => Op::Read,
            Some('W') => Op::Write,
            Some('F') => Op::Flush,
            Some('D') => Op::Discard,
            _ => Op::Other,
        };
        for c in chars {
            match c {
                'F' => r.fua = true,
                'A' => r.readahead = true,
                'S' => r.sync = true,
                'M' => r.meta = true,
                _ => {}
            }
        }
        r
    }
}

/// One bucket of an in-kernel latency histogram: requests of one device,
/// type and process whose latency fell in [2^slot, 2^(slot+1)) microseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyCount {
    pub dev: DevId,
    pub disk: String,
    pub rwbs: String,
    pub pid: u32,
    pub comm: String,
    pub slot: u32,
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_dev_t_is_major_shift_20() {
        let d = DevId::from_kernel((254 << 20) | 16);
        assert_eq!(d, DevId::new(254, 16));
        assert_eq!(d.to_kernel(), (254 << 20) | 16);
        assert_eq!(d.to_string(), "254,16");
    }

    #[test]
    fn rwbs_follows_blk_fill_rwbs() {
        let ws = Rwbs::parse("WS");
        assert_eq!(
            (ws.op, ws.sync, ws.fua, ws.preflush),
            (Op::Write, true, false, false)
        );
        let fwfs = Rwbs::parse("FWFS");
        assert_eq!(
            (fwfs.op, fwfs.preflush, fwfs.fua, fwfs.sync),
            (Op::Write, true, true, true)
        );
        assert_eq!(Rwbs::parse("F").op, Op::Flush);
        assert_eq!(Rwbs::parse("FF").op, Op::Flush);
        assert!(Rwbs::parse("FF").preflush);
        let ra = Rwbs::parse("RA");
        assert_eq!((ra.op, ra.readahead), (Op::Read, true));
        assert!(Rwbs::parse("RM").meta);
        assert_eq!(Rwbs::parse("N").op, Op::Other);
        assert_eq!(Rwbs::parse("DE").op, Op::Discard);
    }
}
