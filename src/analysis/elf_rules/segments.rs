//! The PT_LOAD loop of load_elf_binary (elf_load, elf_map, the range
//! checks), all after the point of no return; then the entry point; then
//! the elf(5) rules the kernel tolerates.

use super::checker::{Checker, page};
use super::rules::*;
use super::*;
use crate::model::elf::{ElfHeader, ProgramHeader};

/// The numbers every PT_LOAD problem shows, plus `extra`.
fn numbers<'a>(p: &ProgramHeader, extra: &[(&'a str, u64)]) -> Vec<(&'a str, u64)> {
    let mut v = vec![
        ("p_offset", p.offset),
        ("p_vaddr", p.vaddr),
        ("p_filesz", p.filesz),
        ("p_memsz", p.memsz),
        ("p_align", p.align),
    ];
    v.extend_from_slice(extra);
    v
}

impl Checker<'_> {
    /// TASK_SIZE for this file: 32-bit tasks under a 64-bit kernel get 4 GiB
    /// (x86: IA32_PAGE_OFFSET).
    fn task_size(&self, class: u8) -> u64 {
        match (class, self.env.host_machine) {
            (1, EM_X86_64) => 0xffff_e000,
            (1, _) => 0x1_0000_0000 - page(self.env),
            _ => self.env.task_size,
        }
    }

    /// The PT_LOAD loop of load_elf_binary / elf_load / elf_map, in order;
    /// stops at the first failure, as the kernel does.
    pub(super) fn loads(&mut self, h: &ElfHeader, phdrs: &[ProgramHeader], class: u8) {
        let ps = page(self.env);
        let pagestart = |x: u64| x & !(ps - 1);
        let pagealign = |x: u64| x.wrapping_add(ps - 1) & !(ps - 1);
        let task = self.task_size(class);
        let exec = h.e_type == ET_EXEC;
        let min = self.env.mmap_min_addr;
        let file_len = self.bytes.size();
        let loads: Vec<&ProgramHeader> = phdrs.iter().filter(|p| p.p_type == PT_LOAD).collect();

        // ET_DYN: the first PT_LOAD reserves the whole image (total_mapping_size).
        let mut dyn_total = None;
        if let (false, Some(first)) = (exec, loads.first()) {
            let lo = loads.iter().map(|p| pagestart(p.vaddr)).min().unwrap_or(0);
            let hi = loads.iter().map(|p| p.vaddr.wrapping_add(p.memsz)).max();
            let total = hi.unwrap_or(0).wrapping_sub(lo);
            dyn_total = Some((first.index, total));
            if total == 0 {
                let message = "the PT_LOAD segments of this ET_DYN file span zero bytes".into();
                self.fatal(
                    &R_DYN_EXTENT,
                    "EINVAL",
                    Some(first),
                    &[("total_size", 0)],
                    message,
                );
                return;
            }
        }

        for &p in &loads {
            let i = p.index;
            let pageoff = p.vaddr & (ps - 1);
            // elf_map: the file part, mapped from p_offset rounded down by
            // the in-page offset of p_vaddr.
            let size = pagealign(p.filesz.wrapping_add(pageoff));
            if p.filesz != 0 && size != 0 {
                let off = p.offset.wrapping_sub(pageoff);
                let addr = pagestart(p.vaddr);
                if off & (ps - 1) != 0 {
                    let (o, v) = (p.offset & (ps - 1), pageoff);
                    let mut message = format!(
                        "program header {i} (PT_LOAD) has p_offset {:#x} and p_vaddr {:#x}, which \
                         are not congruent modulo the page size {ps:#x} ({o:#x} vs {v:#x})",
                        p.offset, p.vaddr
                    );
                    if p.align > 1 && p.align < ps && p.offset.wrapping_sub(p.vaddr) % p.align == 0
                    {
                        message.push_str(&format!(
                            "; they are congruent modulo p_align {:#x}, which is why readelf sees \
                             nothing wrong",
                            p.align
                        ));
                    }
                    let extra = [
                        ("page size", ps),
                        ("p_offset % page", o),
                        ("p_vaddr % page", v),
                    ];
                    self.fatal(
                        &R_CONGRUENCE,
                        "EINVAL",
                        Some(p),
                        &numbers(p, &extra),
                        message,
                    );
                    return;
                }
                if off.checked_add(size).is_none() {
                    let message = format!(
                        "program header {i}: p_offset {:#x} plus the mapping size {size:#x} overflows",
                        p.offset
                    );
                    self.fatal(
                        &R_OFFSET_OVERFLOW,
                        "EINVAL",
                        Some(p),
                        &numbers(p, &[]),
                        message,
                    );
                    return;
                }
                // ET_DYN's first mapping covers the whole image, wherever it lands.
                if let Some((_, total)) = dyn_total.filter(|&(first, _)| first == i) {
                    let reserve = pagealign(total);
                    if reserve < total || reserve > task {
                        let message = format!(
                            "program header {i} is the first PT_LOAD of an ET_DYN image spanning \
                             {total:#x} bytes, more than TASK_SIZE {task:#x}"
                        );
                        let n = numbers(p, &[("total_size", total), ("TASK_SIZE", task)]);
                        self.fatal(&R_MAP_TASK_SIZE, "ENOMEM", Some(p), &n, message);
                        return;
                    }
                }
                if exec && (size > task || addr > task - size) {
                    let message = format!(
                        "program header {i} maps {size:#x} bytes at {addr:#x}, beyond TASK_SIZE \
                         {task:#x}"
                    );
                    let n = numbers(p, &[("TASK_SIZE", task)]);
                    self.fatal(&R_MAP_TASK_SIZE, "ENOMEM", Some(p), &n, message);
                    return;
                }
                if exec && addr < min {
                    let message = format!(
                        "program header {i} maps at {addr:#x}, below vm.mmap_min_addr {min:#x}"
                    );
                    let n = numbers(p, &[("vm.mmap_min_addr", min)]);
                    self.fatal(&R_MIN_ADDR, "EPERM", Some(p), &n, message);
                    return;
                }
            }
            // padzero: zeroing the rest of the last file page faults when
            // that page lies past the end of the file (fatal if writable).
            if p.filesz != 0 && p.memsz > p.filesz && p.p_flags & PF_W != 0 {
                let zero_start = p.vaddr.wrapping_add(p.filesz);
                let data_end = p.offset.wrapping_add(p.filesz);
                if zero_start & (ps - 1) != 0 && pagestart(data_end) >= file_len {
                    let message = format!(
                        "program header {i}: its file data ends at offset {data_end:#x}, in a \
                         page past the end of the file ({file_len:#x} bytes), so zeroing the \
                         rest of that page faults"
                    );
                    let n = numbers(p, &[("file size", file_len)]);
                    self.fatal(&R_FILE_RANGE, "EFAULT", Some(p), &n, message);
                    return;
                }
            }
            // elf_load: the zero-filled part (bss) goes through vm_brk_flags.
            if p.memsz > p.filesz {
                let (zs, ze) = if p.filesz != 0 {
                    (
                        p.vaddr.wrapping_add(p.filesz),
                        p.vaddr.wrapping_add(p.memsz),
                    )
                } else {
                    let s = pagestart(p.vaddr);
                    (s, s.wrapping_add(pageoff).wrapping_add(p.memsz))
                };
                let (zs, ze) = (pagealign(zs), pagealign(ze));
                let len = ze.wrapping_sub(zs);
                if pagealign(len) < len || len > task || (exec && len != 0 && zs > task - len) {
                    let message = format!(
                        "program header {i}: p_memsz {:#x} makes the zero-filled part \
                         {zs:#x}..{:#x} end past TASK_SIZE {task:#x}",
                        p.memsz,
                        zs.wrapping_add(len)
                    );
                    let extra = [("TASK_SIZE", task), ("bss start", zs), ("bss length", len)];
                    self.fatal(
                        &R_BSS_TASK_SIZE,
                        "ENOMEM",
                        Some(p),
                        &numbers(p, &extra),
                        message,
                    );
                    return;
                }
                if let Some(limit) = self.env.commit_limit.filter(|&l| len > l) {
                    let message = format!(
                        "program header {i}: its zero-filled part is {len:#x} bytes, more than \
                         memory accounting grants one mapping now ({limit:#x} bytes)"
                    );
                    let n = numbers(p, &[("bss length", len), ("commit limit", limit)]);
                    self.fatal(&R_BSS_COMMIT, "ENOMEM", Some(p), &n, message);
                    return;
                }
                if exec && len != 0 && zs < min {
                    let message = format!(
                        "program header {i}: its zero-filled part starts at {zs:#x}, below \
                         vm.mmap_min_addr {min:#x}"
                    );
                    let n = numbers(p, &[("vm.mmap_min_addr", min)]);
                    self.fatal(&R_MIN_ADDR, "EPERM", Some(p), &n, message);
                    return;
                }
            }
            // load_elf_binary's range check after mapping the segment.
            if p.filesz > p.memsz {
                let message = format!(
                    "program header {i} (PT_LOAD) has p_filesz {:#x} larger than p_memsz {:#x}",
                    p.filesz, p.memsz
                );
                self.fatal(&R_FILESZ, "EINVAL", Some(p), &numbers(p, &[]), message);
                return;
            }
            if p.vaddr >= task || p.memsz > task || task - p.memsz < p.vaddr {
                let message = format!(
                    "program header {i}: p_vaddr {:#x} + p_memsz {:#x} reaches past TASK_SIZE \
                     {task:#x}",
                    p.vaddr, p.memsz
                );
                let n = numbers(p, &[("TASK_SIZE", task)]);
                self.fatal(&R_RANGE, "EINVAL", Some(p), &n, message);
                return;
            }
            if p.filesz != 0 && p.offset.checked_add(p.filesz).is_none_or(|e| e > file_len) {
                let message = format!(
                    "program header {i}: p_offset {:#x} + p_filesz {:#x} ends past the end of the \
                     file ({file_len:#x} bytes)",
                    p.offset, p.filesz
                );
                let kernel = "exec succeeds, but touching the pages past the end of the file \
                              raises SIGBUS";
                let n = numbers(p, &[("file size", file_len)]);
                self.add(&R_FILE_RANGE, WARNING, Some(p), &n, message, kernel.into());
            }
        }
        self.entry(h, phdrs, &loads, task);
    }

    /// The entry point: BAD_ADDR for a static program, then where it lands.
    fn entry(
        &mut self,
        h: &ElfHeader,
        phdrs: &[ProgramHeader],
        loads: &[&ProgramHeader],
        task: u64,
    ) {
        let exec = h.e_type == ET_EXEC;
        let has_interp = phdrs.iter().any(|p| p.p_type == PT_INTERP);
        let entry = h.entry;
        if exec && !has_interp && entry >= task {
            let message = format!("e_entry {entry:#x} is at or above TASK_SIZE {task:#x}");
            let n = [("e_entry", entry), ("TASK_SIZE", task)];
            self.fatal(&R_ENTRY, "EINVAL", None, &n, message);
            return;
        }
        if loads.is_empty() {
            let kernel = format!(
                "execve succeeds, then the program faults at its entry point {entry:#x}: SIGSEGV \
                 with si_code SEGV_MAPERR (a fault in user space, not SI_KERNEL)"
            );
            let message = "the file has no PT_LOAD segment: nothing of it is mapped".into();
            self.add(
                &R_NO_LOAD,
                CRASH_MAPERR,
                None,
                &[("e_entry", entry)],
                message,
                kernel,
            );
            return;
        }
        // With an interpreter, ld.so jumps to e_entry later: not ours to judge.
        if !exec || has_interp {
            return;
        }
        let inside = loads
            .iter()
            .find(|p| entry >= p.vaddr && entry - p.vaddr < p.memsz);
        let (effect, code, why) = match inside {
            None => (
                CRASH_MAPERR,
                "SEGV_MAPERR",
                "is in no PT_LOAD segment".to_string(),
            ),
            Some(p) if p.p_flags & PF_X == 0 => (
                CRASH_ACCERR,
                "SEGV_ACCERR",
                format!("is in program header {}, which is not executable", p.index),
            ),
            Some(_) => return,
        };
        let kernel = format!(
            "execve succeeds, then the program faults at {entry:#x}: SIGSEGV with si_code {code} \
             (user space)"
        );
        let message = format!("e_entry {entry:#x} {why}");
        self.add(
            &R_ENTRY_OUTSIDE,
            effect,
            inside.copied(),
            &[("e_entry", entry)],
            message,
            kernel,
        );
    }

    /// elf(5) rules the kernel tolerates. At most one warning per segment
    /// and rule, so a huge program header table stays a short report.
    pub(super) fn warnings(&mut self, phdrs: &[ProgramHeader]) {
        let ps = page(self.env);
        let loads: Vec<&ProgramHeader> = phdrs.iter().filter(|p| p.p_type == PT_LOAD).collect();
        for &p in &loads {
            let i = p.index;
            if p.align > 1 && !p.align.is_power_of_two() {
                let message = format!(
                    "program header {i}: p_align {:#x} is not a power of two",
                    p.align
                );
                let kernel = "nothing: the kernel ignores that alignment".into();
                self.add(
                    &R_ALIGN_POW2,
                    WARNING,
                    Some(p),
                    &[("p_align", p.align)],
                    message,
                    kernel,
                );
                continue;
            }
            // Above the page size the kernel's own congruence check speaks.
            let off_by = p.offset.wrapping_sub(p.vaddr) & p.align.wrapping_sub(1);
            let spoken = self
                .problems
                .iter()
                .any(|q| q.rule == R_CONGRUENCE.id && q.phdr == Some(i));
            if p.align > 1 && p.align <= ps && off_by != 0 && !spoken {
                let message = format!(
                    "program header {i}: p_offset {:#x} and p_vaddr {:#x} differ modulo p_align {:#x}",
                    p.offset, p.vaddr, p.align
                );
                let kernel = "nothing while they stay congruent modulo the page size".into();
                let n = [
                    ("p_offset", p.offset),
                    ("p_vaddr", p.vaddr),
                    ("p_align", p.align),
                ];
                self.add(&R_ALIGN_CONGRUENCE, WARNING, Some(p), &n, message, kernel);
            }
        }
        for w in loads.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b.vaddr < a.vaddr {
                let message = format!(
                    "program header {} (p_vaddr {:#x}) comes after program header {} (p_vaddr {:#x})",
                    b.index, b.vaddr, a.index, a.vaddr
                );
                let kernel = "usually nothing; for ET_DYN the load address is computed from the \
                              first PT_LOAD";
                let n = [("p_vaddr", b.vaddr), ("previous p_vaddr", a.vaddr)];
                self.add(&R_ORDER, WARNING, Some(b), &n, message, kernel.into());
            }
        }
        // Overlaps: sweep in address order against the furthest end so far.
        let mut by_addr: Vec<&ProgramHeader> =
            loads.iter().copied().filter(|p| p.memsz != 0).collect();
        by_addr.sort_by_key(|p| (p.vaddr, p.index));
        let mut furthest: Option<&ProgramHeader> = None;
        for &b in &by_addr {
            let end = |p: &ProgramHeader| p.vaddr.saturating_add(p.memsz);
            if let Some(a) = furthest.filter(|a| b.vaddr < end(a)) {
                let (second, first) = if a.index < b.index { (b, a) } else { (a, b) };
                let message = format!(
                    "program header {} ({:#x}..{:#x}) overlaps program header {} ({:#x}..{:#x})",
                    second.index,
                    second.vaddr,
                    end(second),
                    first.index,
                    first.vaddr,
                    end(first)
                );
                let kernel = "exec succeeds; the later segment's pages replace the earlier one's";
                let n = [
                    ("p_vaddr", second.vaddr),
                    ("end", end(second)),
                    ("other p_vaddr", first.vaddr),
                    ("other end", end(first)),
                ];
                self.add(
                    &R_OVERLAP,
                    WARNING,
                    Some(second),
                    &n,
                    message,
                    kernel.into(),
                );
            }
            if furthest.is_none_or(|a| end(b) > end(a)) {
                furthest = Some(b);
            }
        }
        let exec_stack = phdrs
            .iter()
            .find(|p| p.p_type == PT_GNU_STACK && p.p_flags & PF_X != 0);
        if let Some(s) = exec_stack {
            let message = format!(
                "program header {} (PT_GNU_STACK) has flags {}: the stack is executable",
                s.index,
                s.flags.trim()
            );
            let kernel = "exec succeeds with an executable stack; the kernel logs \"started with \
                          executable stack\"";
            let n = [("p_flags", u64::from(s.p_flags))];
            self.add(&R_EXEC_STACK, WARNING, Some(s), &n, message, kernel.into());
        }
    }
}
