//! The unwind stage: user call stacks from each sample's copy of the user
//! stack and registers, through the binaries' DWARF CFI (`.eh_frame`,
//! `.debug_frame`), with framehop. This is what `perf --call-graph dwarf`
//! does in `perf script`, and samply and the OTel eBPF profiler do.
//!
//! The recorder hands each sample here as it is drained, with the
//! process's mappings as learnt so far (MMAP2 records, /proc/PID/maps read
//! early), and keeps only the resulting addresses: stack copies are never
//! stored, so memory stays that of a frame-pointer profile and a process
//! that exits mid-run unwinds all the same. Symbolization stays a later,
//! separate stage.
//!
//! `--call-graph auto` keeps the kernel's frame-pointer chain for a sample
//! when every user frame of it but the outermost lies in a function that
//! keeps a frame pointer (see `modules`), and unwinds the sample from DWARF
//! otherwise: a leaf without a frame pointer hides its caller, and one in
//! the middle breaks the chain.

use std::collections::HashMap;
use std::time::Instant;

use framehop::Unwinder as _;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use serde::Serialize;

use super::modules::{Binaries, Binary, Bytes};
pub use crate::model::profile::UnwindStats;
use crate::sys::perf::Sample;
use crate::sys::procfs::maps::Mapping;

/// How user call stacks are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CallGraph {
    /// The kernel follows frame pointers (cheapest; needs binaries built with them)
    #[default]
    Fp,
    /// Copy the user stack into each sample and unwind it from DWARF CFI
    Dwarf,
    /// Frame pointers where the code keeps them, DWARF elsewhere
    Auto,
}

impl CallGraph {
    /// Whether samples must carry a copy of the user stack.
    pub fn copies_stack(self) -> bool {
        self != CallGraph::Fp
    }
}

/// The default `--stack-size`: 16 KiB covers typical call depths of C and
/// Rust programs (perf's default for dwarf is 8 KiB).
pub const DEFAULT_STACK_SIZE: u32 = 16 * 1024;

/// Check a `--stack-size`: the kernel takes a multiple of 8, at most 65528.
pub fn check_stack_size(bytes: u64) -> Result<u32, String> {
    let max = crate::sys::perf::MAX_USER_STACK as u64;
    if bytes == 0 || bytes > max || !bytes.is_multiple_of(8) {
        return Err(format!(
            "--stack-size must be a multiple of 8 between 8 and {max} bytes (the kernel's \
             limit for a stack copy), not {bytes}; the default is {DEFAULT_STACK_SIZE}"
        ));
    }
    Ok(bytes as u32)
}

/// One process's unwinder: framehop modules for its mappings.
struct Process {
    unwinder: UnwinderX86_64<Bytes>,
    cache: CacheX86_64,
    /// How many of the process's mappings have been turned into modules.
    known: usize,
    /// The modules added: (start, end, bias, binary).
    modules: Vec<(u64, u64, u64, std::sync::Arc<Binary>)>,
}

impl Process {
    fn new() -> Self {
        Process {
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            known: 0,
            modules: Vec::new(),
        }
    }

    /// Add modules for mappings learnt since last time. A new mapping over
    /// old ones (after an exec or a remap) replaces them.
    fn sync(&mut self, maps: &[Mapping], binaries: &mut Binaries) {
        if maps.len() < self.known {
            // A new list (the pid was reused or re-read): start over.
            *self = Process::new();
        }
        for m in &maps[self.known..] {
            self.modules.retain(|&(s, e, _, _)| {
                let overlaps = s < m.end && m.start < e;
                if overlaps {
                    self.unwinder.remove_module(s);
                }
                !overlaps
            });
            // Anonymous code (JIT) has no tables: framehop falls back to
            // frame pointers there.
            if m.path.is_empty() || m.path == "//anon" || m.path.starts_with("[anon") {
                continue;
            }
            if m.path.starts_with('[') && m.path != "[vdso]" {
                continue;
            }
            let Ok(bin) = binaries.get(&m.path) else {
                continue;
            };
            let bias = if m.path == "[vdso]" {
                Some(m.start)
            } else {
                bin.bias(m.start, m.pgoff)
            };
            let Some(bias) = bias else { continue };
            self.unwinder
                .add_module(bin.module(&m.path, m.start..m.end, bias));
            self.modules.push((m.start, m.end, bias, bin));
        }
        self.known = maps.len();
    }

    /// Whether `ip` is in a function that keeps a frame pointer.
    fn keeps_frame_pointer(&self, ip: u64) -> bool {
        self.modules
            .iter()
            .find(|&&(s, e, _, _)| s <= ip && ip < e)
            .is_some_and(|(_, _, bias, bin)| bin.keeps_frame_pointer(ip.wrapping_sub(*bias)))
    }
}

/// The unwind stage of one recording.
pub struct Unwinder {
    mode: CallGraph,
    max_frames: usize,
    binaries: Binaries,
    processes: HashMap<u32, Process>,
    stats: UnwindStats,
}

impl Unwinder {
    /// An unwinder for `mode` (not `Fp`, which needs none), keeping at most
    /// `max_frames` user frames per stack.
    pub fn new(mode: CallGraph, max_frames: usize) -> Self {
        Unwinder {
            mode,
            max_frames: max_frames.max(1),
            binaries: Binaries::new(mode == CallGraph::Auto),
            processes: HashMap::new(),
            stats: UnwindStats::default(),
        }
    }

    pub fn stats(&self) -> UnwindStats {
        self.stats
    }

    /// Forget a process whose pid may be reused (after its exit or exec the
    /// mappings are learnt again).
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }

    /// The user frames of `sample`, innermost first, when this stage walks
    /// them; None keeps `fp_chain` (the kernel's frame-pointer user frames).
    /// `maps` are the process's mappings as known now, in the order learnt.
    pub fn user_frames(
        &mut self,
        sample: &Sample<'_>,
        maps: &[Mapping],
        fp_chain: &[u64],
    ) -> Option<Vec<u64>> {
        let regs = sample.user_regs?;
        let t0 = Instant::now();
        let proc = self
            .processes
            .entry(sample.pid)
            .or_insert_with(Process::new);
        proc.sync(maps, &mut self.binaries);
        // The outermost frame's own frame pointer is never followed (it is
        // where the walk ends: libc's start_thread or __libc_start_call_main,
        // which keep none), so it need not keep one.
        let walked = &fp_chain[..fp_chain.len().saturating_sub(1).max(1.min(fp_chain.len()))];
        if self.mode == CallGraph::Auto
            && !walked.is_empty()
            && walked.iter().enumerate().all(|(i, &ip)| {
                // Return addresses point after the call: look up the call.
                proc.keeps_frame_pointer(if i == 0 { ip } else { ip.wrapping_sub(1) })
            })
        {
            self.stats.fp_samples += 1;
            self.stats.secs += t0.elapsed().as_secs_f64();
            return None;
        }
        let frames = walk(
            proc,
            regs,
            sample.user_stack,
            self.max_frames,
            &mut self.stats,
        );
        self.stats.dwarf_samples += 1;
        self.stats.dwarf_frames += frames.len() as u64;
        self.stats.secs += t0.elapsed().as_secs_f64();
        Some(frames)
    }
}

/// The frame pointer of a thread read from /proc (`instruments::blocked`),
/// which tells its stack pointer and instruction pointer but not rbp.
pub const UNKNOWN_BP: u64 = u64::MAX;

/// How many guesses at an unknown rbp are walked.
const BP_GUESSES: usize = 8;

/// Unwind one stack copy. `stack` starts at `regs.sp`. With an unknown
/// rbp ([`UNKNOWN_BP`]), a walk that stops at a function whose frame is
/// found through rbp (one with a variable-length array: PostgreSQL's
/// WaitEventSetWait) is walked again from each place in the copy that
/// looks like a saved frame (a pointer further up the stack, then a code
/// address), and the longest walk kept.
fn walk(
    proc: &mut Process,
    regs: crate::sys::perf::UserRegs,
    stack: &[u8],
    max_frames: usize,
    stats: &mut UnwindStats,
) -> Vec<u64> {
    if stack.is_empty() {
        stats.no_stack += 1;
    }
    let unknown = regs.bp == UNKNOWN_BP;
    let regs = crate::sys::perf::UserRegs {
        bp: if unknown { 0 } else { regs.bp },
        ..regs
    };
    let (mut frames, mut exhausted) = walk_from(proc, regs, stack, max_frames);
    // framehop ends a walk whose frame address it cannot compute as it
    // ends one at the outermost frame: every walk short of the limit is
    // tried again (a guess is kept only when it walks further).
    if unknown && frames.len() < max_frames && !exhausted {
        let word = |off: usize| {
            stack
                .get(off..off + 8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
        };
        let end = regs.sp + stack.len() as u64;
        let code = |a: u64| proc.modules.iter().any(|&(s, e, _, _)| s <= a && a < e);
        let guesses: Vec<u64> = (0..stack.len().saturating_sub(16))
            .step_by(8)
            .filter(|&off| {
                let at = regs.sp + off as u64;
                word(off).is_some_and(|up| up > at && up < end) && word(off + 8).is_some_and(code)
            })
            .map(|off| regs.sp + off as u64)
            .take(BP_GUESSES)
            .collect();
        for bp in guesses {
            let (f, ex) = walk_from(
                proc,
                crate::sys::perf::UserRegs { bp, ..regs },
                stack,
                max_frames,
            );
            if f.len() > frames.len() {
                (frames, exhausted) = (f, ex);
            }
        }
    }
    if exhausted {
        stats.stack_exhausted += 1;
    }
    frames
}

/// One walk: the frames, and whether it ran out of the stack copy.
fn walk_from(
    proc: &mut Process,
    regs: crate::sys::perf::UserRegs,
    stack: &[u8],
    max_frames: usize,
) -> (Vec<u64>, bool) {
    let sp = regs.sp;
    let mut exhausted = false;
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        let off = addr.checked_sub(sp).ok_or(())? as usize;
        match stack.get(off..off + 8) {
            Some(b) => Ok(u64::from_ne_bytes(b.try_into().unwrap())),
            None => {
                exhausted = true;
                Err(())
            }
        }
    };
    let mut frames = Vec::with_capacity(16);
    {
        let mut iter = proc.unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            &mut proc.cache,
            &mut read_stack,
        );
        while frames.len() < max_frames {
            match iter.next() {
                Ok(Some(frame)) => frames.push(frame.address()),
                Ok(None) | Err(_) => break,
            }
        }
    }
    (frames, exhausted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_size_is_checked() {
        assert_eq!(check_stack_size(16384), Ok(16384));
        assert_eq!(check_stack_size(65528), Ok(65528));
        for bad in [0, 7, 65529, 65536, 1 << 20] {
            let err = check_stack_size(bad).unwrap_err();
            assert!(
                err.contains("multiple of 8") && err.contains("65528"),
                "{err}"
            );
        }
    }

    /// Unwind our own stack from a copy of it, as the kernel would hand it
    /// over: the chain of test functions must come out.
    #[inline(never)]
    fn leaf(depth: u32, out: &mut Vec<u64>) -> Vec<u64> {
        if depth > 0 {
            let v = leaf(depth - 1, out);
            // Keep the recursion from becoming a loop or a tail call.
            std::hint::black_box(&v);
            return v;
        }
        let (sp, bp, ip): (u64, u64, u64);
        // SAFETY: reads three registers; touches no memory.
        unsafe {
            std::arch::asm!("mov {0}, rsp", "mov {1}, rbp", "lea {2}, [rip]", out(reg) sp, out(reg) bp, out(reg) ip);
        }
        let len = 8192.min(stack_top() - sp) as usize;
        // SAFETY: [sp, stack top) is this thread's live stack.
        let copy = unsafe { std::slice::from_raw_parts(sp as *const u8, len) }.to_vec();
        let maps = crate::sys::procfs::maps::parse_maps(
            &std::fs::read_to_string("/proc/self/maps").unwrap(),
        );
        let mut proc = Process::new();
        proc.sync(&maps, &mut Binaries::new(false));
        let mut stats = UnwindStats::default();
        let frames = walk(
            &mut proc,
            crate::sys::perf::UserRegs { ip, sp, bp },
            &copy,
            64,
            &mut stats,
        );
        out.extend(&frames);
        frames
    }

    /// The end of this thread's stack.
    fn stack_top() -> u64 {
        // SAFETY: attr is initialised by pthread_getattr_np before use and
        // destroyed after; the out-pointers are locals.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
            let (mut addr, mut size) = (std::ptr::null_mut(), 0usize);
            assert_eq!(libc::pthread_attr_getstack(&attr, &mut addr, &mut size), 0);
            libc::pthread_attr_destroy(&mut attr);
            addr as u64 + size as u64
        }
    }

    #[test]
    fn unwinds_a_copied_stack_through_eh_frame() {
        let mut frames = Vec::new();
        leaf(4, &mut frames);
        let here = leaf as fn(u32, &mut Vec<u64>) -> Vec<u64> as usize as u64;
        // 5 activations of `leaf` (depth 4..0): their return addresses (and
        // the first IP) lie in its code, within a few hundred bytes.
        let in_leaf = frames
            .iter()
            .filter(|&&a| a >= here && a < here + 1024)
            .count();
        assert!(in_leaf >= 5, "{in_leaf} frames in leaf: {frames:x?}");
        // And the walk goes on past the test into its caller.
        assert!(frames.len() > 6, "{frames:x?}");
    }
}
