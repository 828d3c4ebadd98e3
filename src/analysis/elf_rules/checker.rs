//! The checks, in the order load_elf_binary makes them.

use super::bytes::{FileBytes, byte, prefix};
use super::parse::*;
use super::rules::*;
use super::*;
use crate::model::elf::{Number, PathState, ProgramHeader};

pub(super) struct Checker<'a> {
    pub(super) env: &'a ElfEnv,
    pub(super) bytes: &'a dyn FileBytes,
    pub(super) problems: Vec<Problem>,
}

/// The page size, never zero and a power of two (guards bad environments).
pub(super) fn page(env: &ElfEnv) -> u64 {
    if env.page_size.is_power_of_two() {
        env.page_size
    } else {
        4096
    }
}

impl Checker<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add(
        &mut self,
        rule: &Rule,
        effect: Effect,
        header: Option<&ProgramHeader>,
        numbers: &[(&str, u64)],
        message: String,
        kernel: String,
    ) {
        let signal = effect.si_code.map(|_| "SIGSEGV");
        let si_code = effect.si_code;
        self.problems.push(Problem {
            rule: rule.id,
            severity: effect.severity,
            phdr: header.map(|h| h.index),
            header: header.cloned(),
            numbers: numbers
                .iter()
                .map(|(n, v)| Number {
                    name: (*n).to_string(),
                    value: *v,
                })
                .collect(),
            message,
            quote: rule.quote,
            source: rule.source,
            errno: effect.errno,
            stage: effect.stage,
            signal,
            si_code,
            kernel,
            decisive: false,
        });
    }

    /// An error after `begin_new_exec`: same wording everywhere.
    /// An error after `begin_new_exec`: execve fails and SIGSEGV follows.
    pub(super) fn fatal(
        &mut self,
        rule: &Rule,
        errno: &'static str,
        h: Option<&ProgramHeader>,
        numbers: &[(&str, u64)],
        message: String,
    ) {
        let mut kernel = format!(
            "execve fails with {errno} after the point of no return (begin_new_exec already \
             replaced the old image), so the kernel kills the process with SIGSEGV \
             (si_code SI_KERNEL, from force_fatal_sig in bprm_execve)"
        );
        if errno == "EPERM" {
            kernel.push_str("; a process with CAP_SYS_RAWIO (root) may map there and runs");
        }
        self.add(rule, after(errno), h, numbers, message, kernel);
    }

    pub(super) fn permission(&mut self) {
        if let Some(mode) = self.env.mode
            && mode & 0o111 == 0
        {
            self.add(
                &R_PERMISSION,
                before("EACCES"),
                None,
                &[("mode", u64::from(mode & 0o7777))],
                format!(
                    "the file has mode {:o}: no execute bit is set",
                    mode & 0o7777
                ),
                "execve fails with EACCES before reading the file; the caller goes on".into(),
            );
        }
    }

    pub(super) fn not_elf(&mut self) {
        let magic: Vec<String> = prefix(self.bytes, 4)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let message = if self.bytes.size() == 0 {
            "the file is empty".to_string()
        } else {
            format!(
                "the file starts with bytes {} instead of 7f 45 4c 46 (\\x7fELF) and is not a #! script",
                magic.join(" ")
            )
        };
        self.add(
            &R_NOT_ELF,
            ENOEXEC,
            None,
            &[],
            message,
            "execve fails with ENOEXEC (Exec format error) before the point of no return; \
             note that shells then run the file as a shell script"
                .into(),
        );
    }

    pub(super) fn script(&mut self, interp: &str) {
        if interp.is_empty() {
            self.add(
                &R_SCRIPT_INTERP,
                ENOEXEC,
                None,
                &[],
                "the #! line names no interpreter".into(),
                "execve fails with ENOEXEC before the point of no return".into(),
            );
            return;
        }
        self.interp_path(None, interp, "#! interpreter", false);
    }

    /// The open_exec of an interpreter (ELF PT_INTERP or `#!`).
    pub(super) fn interp_path(
        &mut self,
        h: Option<&ProgramHeader>,
        path: &str,
        what: &str,
        elf: bool,
    ) {
        let (errno, why) = match self.env.path(path) {
            None => return,
            Some(PathState::Missing) => ("ENOENT", "does not exist"),
            Some(PathState::NotRegular) => ("EACCES", "is not a regular file"),
            Some(PathState::NotExecutable) => ("EACCES", "has no execute permission"),
            Some(PathState::Denied) => ("EACCES", "cannot be opened: permission denied"),
            Some(PathState::File { head }) => {
                if elf {
                    self.interp_head(h, path, head);
                }
                return;
            }
        };
        let rule = match (elf, errno) {
            (false, _) => &R_SCRIPT_INTERP,
            (true, "ENOENT") => &R_INTERP_MISSING,
            (true, _) => &R_INTERP_ACCESS,
        };
        self.add(
            rule,
            before(errno),
            h,
            &[],
            format!("the {what} {path} {why}"),
            format!(
                "execve fails with {errno} before the point of no return{}",
                if errno == "ENOENT" {
                    ": \"No such file or directory\" although the program itself exists"
                } else {
                    ""
                }
            ),
        );
    }

    /// The interpreter must itself be an ELF for this machine.
    pub(super) fn interp_head(&mut self, h: Option<&ProgramHeader>, path: &str, head: &[u8]) {
        if head.len() < 64 {
            self.add(
                &R_INTERP_SHORT,
                before("EIO"),
                h,
                &[("interpreter size", head.len() as u64)],
                format!(
                    "the interpreter {path} is {} bytes, shorter than an ELF header",
                    head.len()
                ),
                "execve fails with EIO (reading its header is short) before the point of no \
                 return"
                    .into(),
            );
            return;
        }
        let why = if head.get(..4) != Some(b"\x7fELF") {
            Some("is not an ELF file".to_string())
        } else {
            let layout = Layout::of(&head, self.env.host_machine);
            let machine = layout.map(|l| l.u16(&head, 18)).unwrap_or(0);
            (!self.machine_ok(machine, layout.map(|l| l.class).unwrap_or(0))).then(|| {
                format!(
                    "is an ELF for {} (e_machine {machine})",
                    machine_name(machine)
                )
            })
        };
        if let Some(why) = why {
            self.add(
                &R_INTERP_BAD,
                ELIBBAD,
                h,
                &[],
                format!("the interpreter {path} {why}"),
                "execve fails with ELIBBAD (Accessing a corrupted shared library) before the \
                 point of no return"
                    .into(),
            );
        }
    }

    /// e_machine and class this kernel runs: native, or 32-bit compat.
    pub(super) fn machine_ok(&self, machine: u16, class: u8) -> bool {
        match (self.env.host_machine, machine, class) {
            (h, m, 2) if h == m && h != EM_386 && h != EM_ARM => true,
            (EM_X86_64, EM_386, 1) | (EM_AARCH64, EM_ARM, 1) => true,
            (h, m, 1) if h == m && (h == EM_386 || h == EM_ARM) => true,
            _ => false,
        }
    }

    pub(super) fn elf(&mut self, report: &mut ElfReport) {
        let bytes = self.bytes;
        let Some(layout) = Layout::of(bytes, self.env.host_machine) else {
            return;
        };
        let Some(h) = layout.header(bytes) else {
            return;
        };
        report.header = Some(h.clone());
        let ehdr_size = if layout.class == 2 { 64 } else { 52 };
        if bytes.size() < ehdr_size as u64 {
            self.add(
                &R_TRUNCATED,
                ENOEXEC,
                None,
                &[
                    ("file size", bytes.size()),
                    ("header size", ehdr_size as u64),
                ],
                format!(
                    "the file is {} bytes, shorter than the {ehdr_size}-byte ELF header",
                    bytes.size()
                ),
                "execve fails with ENOEXEC before the point of no return (the missing fields \
                 read as zero)"
                    .into(),
            );
            return;
        }
        let mut refused = false;
        if h.e_type != ET_EXEC && h.e_type != ET_DYN {
            refused = true;
            self.add(
                &R_TYPE,
                ENOEXEC,
                None,
                &[("e_type", u64::from(h.e_type))],
                format!(
                    "e_type is {} ({}), not EXEC (2) or DYN (3)",
                    h.e_type, h.type_name
                ),
                "execve fails with ENOEXEC before the point of no return".into(),
            );
        }
        let ei_class = byte(bytes, 4).unwrap_or(0);
        let ei_data = byte(bytes, 5).unwrap_or(0);
        if !self.machine_ok(h.machine, layout.class) {
            // A big-endian file reads as a byte-swapped e_machine here.
            let swapped = h.machine.swap_bytes();
            let hint = if ei_data == 2 && machine_name(swapped) != "unknown" {
                format!(
                    "; the file is big-endian (EI_DATA 2), for {} (e_machine {swapped})",
                    machine_name(swapped)
                )
            } else {
                String::new()
            };
            self.add(
                &R_MACHINE,
                ENOEXEC,
                None,
                &[("e_machine", u64::from(h.machine))],
                format!(
                    "e_machine is {} ({}), this kernel runs {} ({}){hint}",
                    h.machine,
                    h.machine_name,
                    self.env.host_machine,
                    machine_name(self.env.host_machine)
                ),
                "execve fails with ENOEXEC before the point of no return".into(),
            );
            return;
        }
        if refused {
            return;
        }
        if ei_class != layout.class {
            self.add(
                &R_CLASS,
                WARNING,
                None,
                &[("EI_CLASS", u64::from(ei_class))],
                format!(
                    "EI_CLASS is {ei_class}, but a {} file is loaded as ELFCLASS{}: the kernel \
                     ignores EI_CLASS, readelf and other tools do not",
                    h.machine_name,
                    u32::from(layout.class) * 32
                ),
                "nothing at exec time".into(),
            );
        }
        if ei_data != 1 {
            self.add(
                &R_DATA,
                WARNING,
                None,
                &[("EI_DATA", u64::from(ei_data))],
                format!(
                    "EI_DATA is {ei_data}, not 1 (little-endian): the kernel ignores it and \
                     reads the header little-endian, readelf and other tools do not"
                ),
                "nothing at exec time".into(),
            );
        }
        let entsize = layout.phentsize();
        if h.phentsize != entsize {
            self.add(
                &R_PHENTSIZE,
                ENOEXEC,
                None,
                &[
                    ("e_phentsize", u64::from(h.phentsize)),
                    ("expected", u64::from(entsize)),
                ],
                format!(
                    "e_phentsize is {} bytes, sizeof(struct elf_phdr) is {entsize}",
                    h.phentsize
                ),
                "execve fails with ENOEXEC before the point of no return".into(),
            );
            return;
        }
        let total = u64::from(h.phnum) * u64::from(entsize);
        if total == 0 || total > 65536 {
            self.add(
                &R_PHNUM,
                ENOEXEC,
                None,
                &[("e_phnum", u64::from(h.phnum)), ("size", total)],
                format!(
                    "e_phnum is {}: the table is {total:#x} bytes, it must be 1..=65536 bytes \
                     (1..={} entries)",
                    h.phnum,
                    65536 / u64::from(entsize)
                ),
                "execve fails with ENOEXEC before the point of no return".into(),
            );
            return;
        }
        if h.phoff
            .checked_add(total)
            .is_none_or(|end| end > bytes.size())
        {
            self.add(
                &R_PHDRS_EOF,
                ENOEXEC,
                None,
                &[
                    ("e_phoff", h.phoff),
                    ("size", total),
                    ("file size", bytes.size()),
                ],
                format!(
                    "the program header table at e_phoff {:#x}, {total:#x} bytes, ends past the \
                     end of the file ({:#x} bytes)",
                    h.phoff,
                    bytes.size()
                ),
                "execve fails with ENOEXEC before the point of no return (load_elf_phdrs fails)"
                    .into(),
            );
            return;
        }
        let phdrs = layout.phdrs(bytes, &h);
        report.program_headers = phdrs.clone();
        if !self.interp(&phdrs, report) {
            return;
        }
        self.loads(&h, &phdrs, layout.class);
        self.warnings(&phdrs);
    }

    /// PT_INTERP, checked like load_elf_binary: only the first one counts.
    /// Returns false when the kernel stops here.
    pub(super) fn interp(&mut self, phdrs: &[ProgramHeader], report: &mut ElfReport) -> bool {
        let interps: Vec<&ProgramHeader> = phdrs.iter().filter(|p| p.p_type == PT_INTERP).collect();
        let Some(&p) = interps.first() else {
            return true;
        };
        if p.filesz > PATH_MAX || p.filesz < 2 {
            self.add(
                &R_INTERP_SIZE,
                ENOEXEC,
                Some(p),
                &[("p_filesz", p.filesz), ("PATH_MAX", PATH_MAX)],
                format!(
                    "PT_INTERP p_filesz is {:#x}: it must be 2..=PATH_MAX (0x1000)",
                    p.filesz
                ),
                "execve fails with ENOEXEC before the point of no return".into(),
            );
            return false;
        }
        let end = p.offset.checked_add(p.filesz);
        if end.is_none_or(|e| e > self.bytes.size()) {
            self.add(
                &R_INTERP_EOF,
                before("EIO"),
                Some(p),
                &[("p_offset", p.offset), ("p_filesz", p.filesz), ("file size", self.bytes.size())],
                format!(
                    "PT_INTERP at p_offset {:#x}, {:#x} bytes, ends past the end of the file ({:#x} bytes)",
                    p.offset,
                    p.filesz,
                    self.bytes.size()
                ),
                "execve fails with EIO (short read) before the point of no return".into(),
            );
            return false;
        }
        let last = end
            .and_then(|e| e.checked_sub(1))
            .and_then(|i| byte(self.bytes, i));
        let path = interp_string(self.bytes, p).unwrap_or_default();
        report.interpreter = Some(path.clone());
        if last != Some(0) {
            self.add(
                &R_INTERP_NUL,
                ENOEXEC,
                Some(p),
                &[("p_offset", p.offset), ("p_filesz", p.filesz)],
                format!("PT_INTERP {path:?} does not end with a NUL byte within p_filesz"),
                "execve fails with ENOEXEC before the point of no return".into(),
            );
            return false;
        }
        let before = self.problems.len();
        self.interp_path(Some(p), &path, "PT_INTERP interpreter", true);
        let ok = self.problems.len() == before;
        // elf(5) placement rules: the kernel does not care.
        let first_load = phdrs.iter().position(|q| q.p_type == PT_LOAD);
        let late = first_load.is_some_and(|l| l < p.index);
        if interps.len() > 1 || late {
            let message = if interps.len() > 1 {
                format!(
                    "{} PT_INTERP entries; the kernel uses the first",
                    interps.len()
                )
            } else {
                "PT_INTERP comes after a PT_LOAD".to_string()
            };
            self.add(
                &R_INTERP_ORDER,
                WARNING,
                Some(p),
                &[],
                message,
                "nothing: the kernel accepts it".into(),
            );
        }
        ok
    }
}
