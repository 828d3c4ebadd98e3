//! The rules the Linux ELF loader (fs/binfmt_elf.c, 6.x) and elf(5) impose
//! on an executable, checked on its bytes.
//!
//! Pure and total: any input gives a report, never a panic (a fuzz target
//! holds us to that). All arithmetic on file values wraps or is checked, as
//! the kernel's unsigned long arithmetic does.
//!
//! Problems are listed in the order the kernel meets them, so the first
//! error is the one execve reports (`Problem::decisive`).

use crate::model::elf::{
    ElfEnv, ElfHeader, ElfReport, FileKind, Number, PathState, Problem, ProgramHeader, Severity,
    Stage,
};

pub const EM_386: u16 = 3;
pub const EM_ARM: u16 = 40;
pub const EM_X86_64: u16 = 62;
pub const EM_AARCH64: u16 = 183;

const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PT_GNU_STACK: u32 = 0x6474_e551;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;
/// PATH_MAX: the longest PT_INTERP the kernel reads.
const PATH_MAX: u64 = 4096;
/// BINPRM_BUF_SIZE: how much of the file the kernel reads to pick a handler.
const BINPRM_BUF_SIZE: usize = 256;

/// Everything elf-check knows about one file: header, program headers and
/// problems in the kernel's order. The exec-trace analysis calls this.
pub fn check(bytes: &[u8], env: &ElfEnv) -> ElfReport {
    let mut c = Checker {
        env,
        bytes,
        problems: Vec::new(),
    };
    let mut report = ElfReport {
        kind: FileKind::Other,
        header: None,
        program_headers: Vec::new(),
        interpreter: None,
        problems: Vec::new(),
        verdict: String::new(),
    };
    c.permission();
    if bytes.get(..4) == Some(b"\x7fELF") {
        report.kind = FileKind::Elf;
        c.elf(&mut report);
    } else if bytes.starts_with(b"#!") {
        let interpreter = shebang(bytes);
        c.script(&interpreter);
        report.kind = FileKind::Script { interpreter };
    } else {
        c.not_elf();
    }
    let mut problems = c.problems;
    if let Some(first) = problems
        .iter_mut()
        .find(|p| p.severity == Severity::Error && p.stage != Stage::None)
    {
        first.decisive = true;
    }
    report.verdict = verdict(&problems);
    report.problems = problems;
    report
}

/// Just the problems (convenience for callers that only explain failures).
#[allow(dead_code)] // API for exec-trace
pub fn problems(bytes: &[u8], env: &ElfEnv) -> Vec<Problem> {
    check(bytes, env).problems
}

/// Paths the file asks the kernel to open (PT_INTERP, `#!` interpreter):
/// `sys::elf` looks them up and puts the answers in `ElfEnv::paths`.
pub fn paths_to_check(bytes: &[u8], host_machine: u16) -> Vec<String> {
    if bytes.starts_with(b"#!") {
        let interp = shebang(bytes);
        return if interp.is_empty() {
            vec![]
        } else {
            vec![interp]
        };
    }
    let Some(layout) = Layout::of(bytes, host_machine) else {
        return vec![];
    };
    let Some(h) = layout.header(bytes) else {
        return vec![];
    };
    layout
        .phdrs(bytes, &h)
        .iter()
        .find(|p| p.p_type == PT_INTERP)
        .and_then(|p| interp_string(bytes, p))
        .map(|s| vec![s])
        .unwrap_or_default()
}

/// The problem that explains an observed exec failure: the decisive one if
/// its errno matches `errno` (e.g. "EINVAL"), else any error with that errno.
/// `after_point_of_no_return` is true when the process then died by SIGSEGV
/// with si_code SI_KERNEL.
#[allow(dead_code)] // API for exec-trace
pub fn explain<'a>(
    report: &'a ElfReport,
    errno: Option<&str>,
    after_point_of_no_return: bool,
) -> Option<&'a Problem> {
    let stage_ok = |p: &Problem| match errno {
        None => p.stage == Stage::AfterExec,
        Some(_) => (p.stage == Stage::AfterPointOfNoReturn) == after_point_of_no_return,
    };
    let errno_ok = |p: &Problem| p.errno == errno;
    report
        .decisive()
        .filter(|p| errno_ok(p) && stage_ok(p))
        .or_else(|| {
            report
                .problems
                .iter()
                .find(|p| p.severity == Severity::Error && errno_ok(p) && stage_ok(p))
        })
}

/// Name of an e_machine value.
pub fn machine_name(m: u16) -> &'static str {
    match m {
        0 => "none",
        EM_386 => "Intel 80386",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "IBM S/390",
        EM_ARM => "ARM",
        EM_X86_64 => "x86-64",
        EM_AARCH64 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        _ => "unknown",
    }
}

fn type_name(t: u16) -> &'static str {
    match t {
        0 => "NONE",
        1 => "REL",
        ET_EXEC => "EXEC",
        ET_DYN => "DYN",
        4 => "CORE",
        _ => "unknown",
    }
}

fn ptype_name(t: u32) -> String {
    match t {
        0 => "NULL".into(),
        PT_LOAD => "LOAD".into(),
        2 => "DYNAMIC".into(),
        PT_INTERP => "INTERP".into(),
        4 => "NOTE".into(),
        5 => "SHLIB".into(),
        6 => "PHDR".into(),
        7 => "TLS".into(),
        0x6474_e550 => "GNU_EH_FRAME".into(),
        PT_GNU_STACK => "GNU_STACK".into(),
        0x6474_e552 => "GNU_RELRO".into(),
        0x6474_e553 => "GNU_PROPERTY".into(),
        t => format!("0x{t:x}"),
    }
}

fn flags_string(f: u32) -> String {
    let bit = |m: u32, c: char| if f & m != 0 { c } else { ' ' };
    [bit(PF_R, 'R'), bit(PF_W, 'W'), bit(PF_X, 'E')]
        .iter()
        .collect()
}

/// The interpreter of a `#!` line as binfmt_script reads it: after `#!` and
/// blanks, up to the next blank or newline, within the first 256 bytes.
fn shebang(bytes: &[u8]) -> String {
    let line = bytes.get(2..).unwrap_or_default();
    let line = &line[..line.len().min(BINPRM_BUF_SIZE - 2)];
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let start = line
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(line.len());
    let rest = &line[start..];
    let end = rest
        .iter()
        .position(|&b| b == b' ' || b == b'\t' || b == 0)
        .unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).into_owned()
}

/// The PT_INTERP string without its NUL, if it lies in the file.
fn interp_string(bytes: &[u8], p: &ProgramHeader) -> Option<String> {
    let start = usize::try_from(p.offset).ok()?;
    let len = usize::try_from(p.filesz.min(PATH_MAX)).ok()?;
    let raw = bytes.get(start..start.checked_add(len)?)?;
    let raw = raw.split(|&b| b == 0).next().unwrap_or_default();
    Some(String::from_utf8_lossy(raw).into_owned())
}

/// How to read the file: word size and byte order.
#[derive(Debug, Clone, Copy)]
struct Layout {
    class: u8,
    big: bool,
}

impl Layout {
    /// The layout the kernel reads, which e_ident does not decide: the
    /// native loader takes any file whose e_machine (read in the host's byte
    /// order) is the host's, as 64-bit; the compat loader takes the 32-bit
    /// machine (EM_386 on x86-64, EM_ARM on arm64) as 32-bit. EI_CLASS and
    /// EI_DATA are ignored (verified on 6.18: a file claiming ELFCLASS32 or
    /// big-endian with EM_X86_64 runs).
    fn of(bytes: &[u8], host: u16) -> Option<Layout> {
        if bytes.get(..4) != Some(b"\x7fELF") {
            return None;
        }
        let machine = u16::from_le_bytes(Self::raw::<2>(bytes, 18));
        let class = match (host, machine) {
            (EM_X86_64, EM_386) | (EM_AARCH64, EM_ARM) | (EM_386 | EM_ARM, _) => 1,
            _ => 2,
        };
        Some(Layout { class, big: false })
    }

    fn phentsize(self) -> u16 {
        if self.class == 2 { 56 } else { 32 }
    }

    /// Read `N` bytes at `off`, zero past the end of the file (the kernel
    /// reads the header into a zeroed buffer).
    fn raw<const N: usize>(bytes: &[u8], off: u64) -> [u8; N] {
        let mut out = [0u8; N];
        for (i, b) in out.iter_mut().enumerate() {
            if let Some(v) = off
                .checked_add(i as u64)
                .and_then(|o| usize::try_from(o).ok())
                .and_then(|o| bytes.get(o))
            {
                *b = *v;
            }
        }
        out
    }

    fn u16(self, bytes: &[u8], off: u64) -> u16 {
        let r = Self::raw::<2>(bytes, off);
        if self.big {
            u16::from_be_bytes(r)
        } else {
            u16::from_le_bytes(r)
        }
    }

    fn u32(self, bytes: &[u8], off: u64) -> u32 {
        let r = Self::raw::<4>(bytes, off);
        if self.big {
            u32::from_be_bytes(r)
        } else {
            u32::from_le_bytes(r)
        }
    }

    fn u64(self, bytes: &[u8], off: u64) -> u64 {
        let r = Self::raw::<8>(bytes, off);
        if self.big {
            u64::from_be_bytes(r)
        } else {
            u64::from_le_bytes(r)
        }
    }

    /// A word: 4 bytes in ELF32, 8 in ELF64.
    fn word(self, bytes: &[u8], off: u64) -> u64 {
        if self.class == 2 {
            self.u64(bytes, off)
        } else {
            u64::from(self.u32(bytes, off))
        }
    }

    fn header(self, bytes: &[u8]) -> Option<ElfHeader> {
        let w = if self.class == 2 { 8 } else { 4 };
        let e_type = self.u16(bytes, 16);
        let machine = self.u16(bytes, 18);
        let entry = self.word(bytes, 24);
        let phoff = self.word(bytes, 24 + w);
        // e_shoff, e_flags, e_ehsize precede e_phentsize.
        let phentsize = self.u16(bytes, 24 + 3 * w + 6);
        let phnum = self.u16(bytes, 24 + 3 * w + 8);
        Some(ElfHeader {
            class: match bytes.get(4) {
                Some(&c @ (1 | 2)) => c * 32,
                _ => 0,
            },
            data: match bytes.get(5) {
                Some(1) => "little",
                Some(2) => "big",
                _ => "invalid",
            },
            e_type,
            type_name: type_name(e_type),
            machine,
            machine_name: machine_name(machine),
            entry,
            phoff,
            phentsize,
            phnum,
        })
    }

    /// The program headers that lie within the file, read with this
    /// layout's entry size (at most 65536 bytes of them, like the kernel).
    fn phdrs(self, bytes: &[u8], h: &ElfHeader) -> Vec<ProgramHeader> {
        let size = u64::from(self.phentsize());
        let max = (65536 / size).min(u64::from(h.phnum));
        let mut out = Vec::new();
        for i in 0..max {
            let Some(base) = i.checked_mul(size).and_then(|o| o.checked_add(h.phoff)) else {
                break;
            };
            if base
                .checked_add(size)
                .is_none_or(|end| end > bytes.len() as u64)
            {
                break;
            }
            let (p_type, p_flags, offset, vaddr, filesz, memsz, align) = if self.class == 2 {
                (
                    self.u32(bytes, base),
                    self.u32(bytes, base + 4),
                    self.u64(bytes, base + 8),
                    self.u64(bytes, base + 16),
                    self.u64(bytes, base + 32),
                    self.u64(bytes, base + 40),
                    self.u64(bytes, base + 48),
                )
            } else {
                (
                    self.u32(bytes, base),
                    self.u32(bytes, base + 24),
                    u64::from(self.u32(bytes, base + 4)),
                    u64::from(self.u32(bytes, base + 8)),
                    u64::from(self.u32(bytes, base + 16)),
                    u64::from(self.u32(bytes, base + 20)),
                    u64::from(self.u32(bytes, base + 28)),
                )
            };
            out.push(ProgramHeader {
                index: i as usize,
                p_type,
                type_name: ptype_name(p_type),
                flags: flags_string(p_flags),
                p_flags,
                offset,
                vaddr,
                filesz,
                memsz,
                align,
            });
        }
        out
    }
}

/// What a rule predicts, reused by many rules.
#[derive(Clone, Copy)]
struct Effect {
    severity: Severity,
    errno: Option<&'static str>,
    stage: Stage,
    /// si_code of the SIGSEGV a user-space crash gets.
    si_code: Option<&'static str>,
}

const ENOEXEC: Effect = before("ENOEXEC");
const ELIBBAD: Effect = before("ELIBBAD");
const WARNING: Effect = Effect {
    severity: Severity::Warning,
    errno: None,
    stage: Stage::None,
    si_code: None,
};

const fn before(errno: &'static str) -> Effect {
    Effect {
        severity: Severity::Error,
        errno: Some(errno),
        stage: Stage::BeforePointOfNoReturn,
        si_code: None,
    }
}

const fn after(errno: &'static str) -> Effect {
    Effect {
        severity: Severity::Error,
        errno: Some(errno),
        stage: Stage::AfterPointOfNoReturn,
        si_code: Some("SI_KERNEL"),
    }
}

const fn crash(si_code: &'static str) -> Effect {
    Effect {
        severity: Severity::Error,
        errno: None,
        stage: Stage::AfterExec,
        si_code: Some(si_code),
    }
}

/// One rule: stable id, quote and source.
struct Rule {
    id: &'static str,
    quote: &'static str,
    source: &'static str,
}

const R_PERMISSION: Rule = Rule {
    id: "exec-permission",
    quote: "execve(2): EACCES: Execute permission is denied for the file or a script or ELF interpreter.",
    source: "execve(2); fs/exec.c: do_open_execat",
};
const R_NOT_ELF: Rule = Rule {
    id: "not-elf",
    quote: "elf(5): EI_MAG0..EI_MAG3: the first four bytes of the magic number are 0x7f, 'E', 'L', 'F'. \
            No binary handler (ELF, #! script, binfmt_misc) recognises other files.",
    source: "fs/exec.c: search_binary_handler; load_elf_binary: memcmp(e_ident, ELFMAG, SELFMAG)",
};
const R_SCRIPT_INTERP: Rule = Rule {
    id: "script-interpreter",
    quote: "execve(2): a script starts with \"#!interpreter [optional-arg]\"; the interpreter must be \
            a valid pathname for an executable file.",
    source: "fs/binfmt_script.c: load_script → open_exec(interp)",
};
const R_TRUNCATED: Rule = Rule {
    id: "header-truncated",
    quote: "elf(5): the ELF header (Elf64_Ehdr, 64 bytes; Elf32_Ehdr, 52 bytes) is at the start of \
            the file. The kernel reads the first BINPRM_BUF_SIZE bytes into a zeroed buffer.",
    source: "fs/exec.c: prepare_binprm; fs/binfmt_elf.c: load_elf_binary",
};
const R_CLASS: Rule = Rule {
    id: "elf-class",
    quote: "elf(5): EI_CLASS identifies the architecture for this binary: ELFCLASS32 or ELFCLASS64.",
    source: "elf(5); the kernel picks the layout from e_machine (elf_check_arch), not EI_CLASS",
};
const R_DATA: Rule = Rule {
    id: "elf-data",
    quote: "elf(5): EI_DATA specifies the data encoding of the processor-specific data in the file: \
            ELFDATA2LSB (1) or ELFDATA2MSB (2).",
    source: "elf(5); the kernel reads headers in its own byte order",
};
const R_TYPE: Rule = Rule {
    id: "elf-type",
    quote: "if (elf_ex->e_type != ET_EXEC && elf_ex->e_type != ET_DYN) goto out; /* -ENOEXEC */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_MACHINE: Rule = Rule {
    id: "elf-machine",
    quote: "if (!elf_check_arch(elf_ex)) goto out; /* -ENOEXEC */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_PHENTSIZE: Rule = Rule {
    id: "phentsize",
    quote: "If the size of this structure has changed, then punt, since we will be doing the wrong \
            thing: if (elf_ex->e_phentsize != sizeof(struct elf_phdr)) goto out;",
    source: "fs/binfmt_elf.c: load_elf_phdrs",
};
const R_PHNUM: Rule = Rule {
    id: "phnum",
    quote: "Sanity check the number of program headers and their total size: \
            size = sizeof(struct elf_phdr) * e_phnum; if (size == 0 || size > 65536) goto out;",
    source: "fs/binfmt_elf.c: load_elf_phdrs",
};
const R_PHDRS_EOF: Rule = Rule {
    id: "phdrs-beyond-eof",
    quote: "retval = elf_read(elf_file, elf_phdata, size, elf_ex->e_phoff); /* a short read fails */",
    source: "fs/binfmt_elf.c: load_elf_phdrs",
};
const R_INTERP_SIZE: Rule = Rule {
    id: "interp-size",
    quote: "if (elf_ppnt->p_filesz > PATH_MAX || elf_ppnt->p_filesz < 2) goto out_free_ph; /* -ENOEXEC */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_INTERP_EOF: Rule = Rule {
    id: "interp-beyond-eof",
    quote: "retval = elf_read(bprm->file, elf_interpreter, elf_ppnt->p_filesz, elf_ppnt->p_offset); \
            /* a short read is -EIO */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_INTERP_NUL: Rule = Rule {
    id: "interp-not-terminated",
    quote: "elf(5): PT_INTERP: the location and size of a null-terminated pathname to invoke as an \
            interpreter. Kernel: make sure path is NULL terminated, else -ENOEXEC.",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_INTERP_MISSING: Rule = Rule {
    id: "interp-missing",
    quote: "interpreter = open_exec(elf_interpreter); retval = PTR_ERR(interpreter); \
            if (IS_ERR(interpreter)) goto out_free_ph;",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_INTERP_SHORT: Rule = Rule {
    id: "interp-short",
    quote: "retval = elf_read(interpreter, interp_elf_ex, sizeof(*interp_elf_ex), 0); \
            /* a short read is -EIO */",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_INTERP_ACCESS: Rule = Rule {
    id: "interp-not-executable",
    quote: "interpreter = open_exec(elf_interpreter); /* -EACCES: not a regular file, or no \
            execute permission */",
    source: "fs/binfmt_elf.c: load_elf_binary → fs/exec.c: do_open_execat",
};
const R_INTERP_BAD: Rule = Rule {
    id: "interp-bad-elf",
    quote: "Some simple consistency checks for the interpreter: retval = -ELIBBAD; \
            not an ELF interpreter, or !elf_check_arch(interp_elf_ex).",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_INTERP_ORDER: Rule = Rule {
    id: "interp-order",
    quote: "elf(5): PT_INTERP may not occur more than once in a file. If it is present, it must \
            precede any loadable segment entry.",
    source: "elf(5)",
};
const R_DYN_EXTENT: Rule = Rule {
    id: "dyn-zero-extent",
    quote: "total_size = total_mapping_size(elf_phdata, elf_ex->e_phnum); \
            if (!total_size) { retval = -EINVAL; goto out_free_dentry; }",
    source: "fs/binfmt_elf.c: load_elf_binary (ET_DYN)",
};
const R_CONGRUENCE: Rule = Rule {
    id: "load-congruence",
    quote: "elf(5): Loadable process segments must have congruent values for p_vaddr and p_offset, \
            modulo the page size.",
    source: "elf_map: off = p_offset - ELF_PAGEOFFSET(p_vaddr); vm_mmap: if (offset_in_page(offset)) return -EINVAL;",
};
const R_OFFSET_OVERFLOW: Rule = Rule {
    id: "load-offset-overflow",
    quote: "vm_mmap: if (unlikely(offset + PAGE_ALIGN(len) < offset)) return -EINVAL;",
    source: "mm/util.c: vm_mmap (from elf_map)",
};
const R_MIN_ADDR: Rule = Rule {
    id: "load-below-mmap-min-addr",
    quote: "cap_mmap_addr: if (addr < dac_mmap_min_addr) and the task lacks CAP_SYS_RAWIO: \
            ret = -EPERM (vm.mmap_min_addr).",
    source: "security/commoncap.c: cap_mmap_addr (from vm_mmap / vm_brk_flags)",
};
const R_MAP_TASK_SIZE: Rule = Rule {
    id: "load-map-beyond-task-size",
    quote: "__get_unmapped_area: if (len > TASK_SIZE) return -ENOMEM; \
            if (addr > TASK_SIZE - len) return -ENOMEM;",
    source: "mm/mmap.c: __get_unmapped_area (from elf_map → vm_mmap)",
};
const R_BSS_TASK_SIZE: Rule = Rule {
    id: "load-bss-beyond-task-size",
    quote: "elf_load: if (p_memsz > p_filesz) error = vm_brk_flags(zero_start, zero_end - zero_start, ...); \
            __get_unmapped_area: if (addr > TASK_SIZE - len) return -ENOMEM;",
    source: "fs/binfmt_elf.c: elf_load → mm/mmap.c: vm_brk_flags",
};
const R_FILE_RANGE: Rule = Rule {
    id: "load-file-range",
    quote: "elf_load: Zero the end of the last mapped page but ignore any errors if the segment \
            isn't writable: if (padzero(zero_start) && (prot & PROT_WRITE)) return -EFAULT;",
    source: "fs/binfmt_elf.c: elf_load (pages past the end of the file cannot be touched: SIGBUS)",
};
const R_FILESZ: Rule = Rule {
    id: "load-filesz-gt-memsz",
    quote: "elf(5): PT_LOAD: The file size may not be larger than the memory size. Kernel: \
            if (... || elf_ppnt->p_filesz > elf_ppnt->p_memsz || ...) { retval = -EINVAL; ... }",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_RANGE: Rule = Rule {
    id: "load-beyond-task-size",
    quote: "Check to see if the section's size will overflow the allowed task size: \
            if (BAD_ADDR(k) || ... || p_memsz > TASK_SIZE || TASK_SIZE - p_memsz < k) retval = -EINVAL;",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_ENTRY: Rule = Rule {
    id: "entry-beyond-task-size",
    quote: "elf_entry = e_entry; if (BAD_ADDR(elf_entry)) { retval = -EINVAL; goto out_free_dentry; } \
            where BAD_ADDR(x) is x >= TASK_SIZE",
    source: "fs/binfmt_elf.c: load_elf_binary",
};
const R_NO_LOAD: Rule = Rule {
    id: "no-load",
    quote: "elf(5): PT_LOAD: the array element specifies a loadable segment. Without one nothing \
            is mapped, yet the kernel starts the program at e_entry.",
    source: "fs/binfmt_elf.c: load_elf_binary (no PT_LOAD is not an error)",
};
const R_ENTRY_OUTSIDE: Rule = Rule {
    id: "entry-outside-load",
    quote: "elf(5): e_entry gives the virtual address to which the system first transfers control. \
            It must lie in an executable PT_LOAD segment.",
    source: "elf(5); start_thread(regs, elf_entry, ...)",
};
const R_EXEC_STACK: Rule = Rule {
    id: "exec-stack",
    quote: "elf(5): PT_GNU_STACK: GNU extension which is used by the Linux kernel to control the \
            state of the stack via the flags set in the p_flags member.",
    source: "load_elf_binary: executable_stack = EXSTACK_ENABLE_X; \
             setup_arg_pages warns \"started with executable stack\"",
};
const R_ALIGN_POW2: Rule = Rule {
    id: "align-not-power-of-two",
    quote: "elf(5): p_align: Values of zero and one mean no alignment is required. Otherwise, \
            p_align should be a positive, integral power of two.",
    source: "elf(5); maximum_alignment skips non-power-of-two alignments as invalid",
};
const R_ALIGN_CONGRUENCE: Rule = Rule {
    id: "align-congruence",
    quote: "elf(5): p_align: ... and p_vaddr should equal p_offset, modulo p_align.",
    source: "elf(5)",
};
const R_ORDER: Rule = Rule {
    id: "load-order",
    quote: "elf(5): Loadable segment entries in the program header table appear in ascending \
            order, sorted on the p_vaddr member.",
    source: "elf(5)",
};
const R_OVERLAP: Rule = Rule {
    id: "load-overlap",
    quote: "elf(5): PT_LOAD: the bytes from the file are mapped to the beginning of the memory \
            segment; segments that share addresses map over each other (later ones use MAP_FIXED).",
    source: "fs/binfmt_elf.c: load_elf_binary (MAP_FIXED after the first PT_LOAD)",
};

struct Checker<'a> {
    env: &'a ElfEnv,
    bytes: &'a [u8],
    problems: Vec<Problem>,
}

/// The page size, never zero and a power of two (guards bad environments).
fn page(env: &ElfEnv) -> u64 {
    if env.page_size.is_power_of_two() {
        env.page_size
    } else {
        4096
    }
}

impl Checker<'_> {
    #[allow(clippy::too_many_arguments)]
    fn add(
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
    fn fatal(
        &mut self,
        rule: &Rule,
        errno: &'static str,
        h: &ProgramHeader,
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
        self.add(rule, after(errno), Some(h), numbers, message, kernel);
    }

    fn permission(&mut self) {
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

    fn not_elf(&mut self) {
        let magic: Vec<String> = self
            .bytes
            .iter()
            .take(4)
            .map(|b| format!("{b:02x}"))
            .collect();
        let message = if self.bytes.is_empty() {
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

    fn script(&mut self, interp: &str) {
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
    fn interp_path(&mut self, h: Option<&ProgramHeader>, path: &str, what: &str, elf: bool) {
        let (errno, why) = match self.env.path(path) {
            None => return,
            Some(PathState::Missing) => ("ENOENT", "does not exist"),
            Some(PathState::NotRegular) => ("EACCES", "is not a regular file"),
            Some(PathState::NotExecutable) => ("EACCES", "has no execute permission"),
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
    fn interp_head(&mut self, h: Option<&ProgramHeader>, path: &str, head: &[u8]) {
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
            let layout = Layout::of(head, self.env.host_machine);
            let machine = layout.map(|l| l.u16(head, 18)).unwrap_or(0);
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
    fn machine_ok(&self, machine: u16, class: u8) -> bool {
        match (self.env.host_machine, machine, class) {
            (h, m, 2) if h == m && h != EM_386 && h != EM_ARM => true,
            (EM_X86_64, EM_386, 1) | (EM_AARCH64, EM_ARM, 1) => true,
            (h, m, 1) if h == m && (h == EM_386 || h == EM_ARM) => true,
            _ => false,
        }
    }

    fn elf(&mut self, report: &mut ElfReport) {
        let bytes = self.bytes;
        let Some(layout) = Layout::of(bytes, self.env.host_machine) else {
            return;
        };
        let Some(h) = layout.header(bytes) else {
            return;
        };
        report.header = Some(h.clone());
        let ehdr_size = if layout.class == 2 { 64 } else { 52 };
        if bytes.len() < ehdr_size {
            self.add(
                &R_TRUNCATED,
                ENOEXEC,
                None,
                &[
                    ("file size", bytes.len() as u64),
                    ("header size", ehdr_size as u64),
                ],
                format!(
                    "the file is {} bytes, shorter than the {ehdr_size}-byte ELF header",
                    bytes.len()
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
        let ei_class = bytes.get(4).copied().unwrap_or(0);
        let ei_data = bytes.get(5).copied().unwrap_or(0);
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
            .is_none_or(|end| end > bytes.len() as u64)
        {
            self.add(
                &R_PHDRS_EOF,
                ENOEXEC,
                None,
                &[
                    ("e_phoff", h.phoff),
                    ("size", total),
                    ("file size", bytes.len() as u64),
                ],
                format!(
                    "the program header table at e_phoff {:#x}, {total:#x} bytes, ends past the \
                     end of the file ({:#x} bytes)",
                    h.phoff,
                    bytes.len()
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
        self.warnings(&h, &phdrs);
    }

    /// PT_INTERP, checked like load_elf_binary: only the first one counts.
    /// Returns false when the kernel stops here.
    fn interp(&mut self, phdrs: &[ProgramHeader], report: &mut ElfReport) -> bool {
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
        if end.is_none_or(|e| e > self.bytes.len() as u64) {
            self.add(
                &R_INTERP_EOF,
                before("EIO"),
                Some(p),
                &[("p_offset", p.offset), ("p_filesz", p.filesz), ("file size", self.bytes.len() as u64)],
                format!(
                    "PT_INTERP at p_offset {:#x}, {:#x} bytes, ends past the end of the file ({:#x} bytes)",
                    p.offset,
                    p.filesz,
                    self.bytes.len()
                ),
                "execve fails with EIO (short read) before the point of no return".into(),
            );
            return false;
        }
        let last = end
            .and_then(|e| e.checked_sub(1))
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.bytes.get(i))
            .copied();
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

    /// The PT_LOAD loop of load_elf_binary / elf_load / elf_map, in order.
    fn loads(&mut self, h: &ElfHeader, phdrs: &[ProgramHeader], class: u8) {
        let ps = page(self.env);
        let pagestart = |x: u64| x & !(ps - 1);
        let pagealign = |x: u64| x.wrapping_add(ps - 1) & !(ps - 1);
        let task = if class == 1 {
            // 32-bit tasks under a 64-bit kernel (x86: IA32_PAGE_OFFSET).
            if self.env.host_machine == EM_X86_64 {
                0xffff_e000
            } else {
                0x1_0000_0000 - ps
            }
        } else {
            self.env.task_size
        };
        let exec = h.e_type == ET_EXEC;
        let min = self.env.mmap_min_addr;
        let file_len = self.bytes.len() as u64;
        let loads: Vec<&ProgramHeader> = phdrs.iter().filter(|p| p.p_type == PT_LOAD).collect();

        if !exec && !loads.is_empty() {
            let lo = loads.iter().map(|p| pagestart(p.vaddr)).min().unwrap_or(0);
            let hi = loads
                .iter()
                .map(|p| p.vaddr.wrapping_add(p.memsz))
                .max()
                .unwrap_or(0);
            if hi.wrapping_sub(lo) == 0 {
                let first = loads[0];
                self.fatal(
                    &R_DYN_EXTENT,
                    "EINVAL",
                    first,
                    &[("total_size", 0)],
                    "the PT_LOAD segments of this ET_DYN file span zero bytes".into(),
                );
                return;
            }
        }

        for p in &loads {
            let pageoff = p.vaddr & (ps - 1);
            let n = |extra: &[(&'static str, u64)]| -> Vec<(&'static str, u64)> {
                let mut v = vec![
                    ("p_offset", p.offset),
                    ("p_vaddr", p.vaddr),
                    ("p_filesz", p.filesz),
                    ("p_memsz", p.memsz),
                    ("p_align", p.align),
                ];
                v.extend_from_slice(extra);
                v
            };
            // elf_map: the file part.
            if p.filesz != 0 {
                let size = pagealign(p.filesz.wrapping_add(pageoff));
                let off = p.offset.wrapping_sub(pageoff);
                let addr = pagestart(p.vaddr);
                if size != 0 {
                    if off & (ps - 1) != 0 {
                        self.fatal(&R_CONGRUENCE, "EINVAL", p, &n(&[("page size", ps), ("p_offset % page", p.offset & (ps - 1)), ("p_vaddr % page", pageoff)]),
                            format!(
                                "program header {} (PT_LOAD) has p_offset {:#x} and p_vaddr {:#x}, which are not congruent modulo the page size {:#x} ({:#x} vs {:#x}){}",
                                p.index, p.offset, p.vaddr, ps, p.offset & (ps - 1), pageoff,
                                if p.align > 1 && p.align < ps && p.offset.wrapping_sub(p.vaddr) % p.align == 0 {
                                    format!("; they are congruent modulo p_align {:#x}, which is why readelf sees nothing wrong", p.align)
                                } else {
                                    String::new()
                                }
                            ));
                        return;
                    }
                    if off.checked_add(pagealign(size)).is_none() {
                        self.fatal(&R_OFFSET_OVERFLOW, "EINVAL", p, &n(&[]),
                            format!("program header {}: p_offset {:#x} plus the mapping size {:#x} overflows", p.index, p.offset, size));
                        return;
                    }
                    if exec {
                        if size > task || addr > task - size {
                            self.fatal(&R_MAP_TASK_SIZE, "ENOMEM", p, &n(&[("TASK_SIZE", task)]),
                                format!("program header {} maps {:#x} bytes at {:#x}, beyond TASK_SIZE {:#x}", p.index, size, addr, task));
                            return;
                        }
                        if addr < min {
                            self.fatal(&R_MIN_ADDR, "EPERM", p, &n(&[("vm.mmap_min_addr", min)]),
                                format!("program header {} maps at {:#x}, below vm.mmap_min_addr {:#x} (allowed only with CAP_SYS_RAWIO, e.g. root)", p.index, addr, min));
                            return;
                        }
                    }
                }
                // padzero: the partial page after the file data must be writable.
                if p.memsz > p.filesz && p.p_flags & PF_W != 0 {
                    let zero_start = p.vaddr.wrapping_add(p.filesz);
                    let data_end = p.offset.wrapping_add(p.filesz);
                    if zero_start & (ps - 1) != 0 && pagestart(data_end) >= file_len {
                        self.fatal(&R_FILE_RANGE, "EFAULT", p, &n(&[("file size", file_len)]),
                            format!("program header {}: its file data ends at offset {:#x}, in a page past the end of the file ({:#x} bytes), so zeroing the rest of that page faults", p.index, data_end, file_len));
                        return;
                    }
                }
            }
            // elf_load: the bss part.
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
                if pagealign(len) < len || (exec && len != 0 && (len > task || zs > task - len)) {
                    self.fatal(&R_BSS_TASK_SIZE, "ENOMEM", p, &n(&[("TASK_SIZE", task), ("bss start", zs), ("bss length", len)]),
                        format!(
                            "program header {}: p_memsz {:#x} makes the zero-filled part {:#x}..{:#x} end past TASK_SIZE {:#x}",
                            p.index, p.memsz, zs, zs.wrapping_add(len), task
                        ));
                    return;
                }
                if exec && len != 0 && zs < min {
                    self.fatal(&R_MIN_ADDR, "EPERM", p, &n(&[("vm.mmap_min_addr", min)]),
                        format!("program header {}: its zero-filled part starts at {:#x}, below vm.mmap_min_addr {:#x}", p.index, zs, min));
                    return;
                }
            }
            // load_elf_binary's range check after mapping.
            if p.filesz > p.memsz {
                self.fatal(
                    &R_FILESZ,
                    "EINVAL",
                    p,
                    &n(&[]),
                    format!(
                        "program header {} (PT_LOAD) has p_filesz {:#x} larger than p_memsz {:#x}",
                        p.index, p.filesz, p.memsz
                    ),
                );
                return;
            }
            if p.vaddr >= task || p.memsz > task || task - p.memsz < p.vaddr {
                self.fatal(&R_RANGE, "EINVAL", p, &n(&[("TASK_SIZE", task)]),
                    format!("program header {}: p_vaddr {:#x} + p_memsz {:#x} reaches past TASK_SIZE {:#x}", p.index, p.vaddr, p.memsz, task));
                return;
            }
            if p.filesz != 0 && p.offset.checked_add(p.filesz).is_none_or(|e| e > file_len) {
                self.add(&R_FILE_RANGE, WARNING, Some(p), &n(&[("file size", file_len)]),
                    format!("program header {}: p_offset {:#x} + p_filesz {:#x} ends past the end of the file ({:#x} bytes)", p.index, p.offset, p.filesz, file_len),
                    "exec succeeds, but touching the pages past the end of the file raises SIGBUS".into());
            }
        }

        // The entry point of a static program (no interpreter): checked after the loop.
        let has_interp = phdrs.iter().any(|p| p.p_type == PT_INTERP);
        if exec && !has_interp && h.entry >= task {
            let first = None;
            self.add(&R_ENTRY, after("EINVAL"), first, &[("e_entry", h.entry), ("TASK_SIZE", task)],
                format!("e_entry {:#x} is at or above TASK_SIZE {:#x}", h.entry, task),
                "execve fails with EINVAL after the point of no return (begin_new_exec already replaced the old image), so the kernel kills the process with SIGSEGV (si_code SI_KERNEL, from force_fatal_sig in bprm_execve)".into());
            return;
        }
        if loads.is_empty() {
            self.add(&R_NO_LOAD, CRASH_MAPERR, None, &[("e_entry", h.entry)],
                "the file has no PT_LOAD segment: nothing of it is mapped".into(),
                format!("execve succeeds, then the program faults at its entry point {:#x}: SIGSEGV with si_code SEGV_MAPERR (a fault in user space, not SI_KERNEL)", h.entry));
            return;
        }
        if exec && !has_interp {
            let inside = loads
                .iter()
                .find(|p| h.entry >= p.vaddr && h.entry - p.vaddr < p.memsz);
            let (code, why) = match inside {
                None => ("SEGV_MAPERR", "is in no PT_LOAD segment".to_string()),
                Some(p) if p.p_flags & PF_X == 0 => (
                    "SEGV_ACCERR",
                    format!("is in program header {}, which is not executable", p.index),
                ),
                Some(_) => return,
            };
            let effect = if code == "SEGV_MAPERR" {
                CRASH_MAPERR
            } else {
                CRASH_ACCERR
            };
            self.add(&R_ENTRY_OUTSIDE, effect, inside.copied(), &[("e_entry", h.entry)],
                format!("e_entry {:#x} {why}", h.entry),
                format!("execve succeeds, then the program faults at {:#x}: SIGSEGV with si_code {code} (user space)", h.entry));
        }
    }

    /// elf(5) rules the kernel tolerates.
    fn warnings(&mut self, _h: &ElfHeader, phdrs: &[ProgramHeader]) {
        let ps = page(self.env);
        let loads: Vec<&ProgramHeader> = phdrs.iter().filter(|p| p.p_type == PT_LOAD).collect();
        for p in &loads {
            if p.align > 1 && !p.align.is_power_of_two() {
                self.add(
                    &R_ALIGN_POW2,
                    WARNING,
                    Some(p),
                    &[("p_align", p.align)],
                    format!(
                        "program header {}: p_align {:#x} is not a power of two",
                        p.index, p.align
                    ),
                    "nothing: the kernel ignores that alignment".into(),
                );
            } else if p.align > 1
                && p.offset.wrapping_sub(p.vaddr) & (p.align - 1) != 0
                && p.align <= ps
            {
                // Above the page size the kernel's congruence check already spoke.
                let already = self
                    .problems
                    .iter()
                    .any(|q| q.rule == R_CONGRUENCE.id && q.phdr == Some(p.index));
                if !already {
                    self.add(&R_ALIGN_CONGRUENCE, WARNING, Some(p), &[("p_offset", p.offset), ("p_vaddr", p.vaddr), ("p_align", p.align)],
                        format!("program header {}: p_offset {:#x} and p_vaddr {:#x} differ modulo p_align {:#x}", p.index, p.offset, p.vaddr, p.align),
                        "nothing while they stay congruent modulo the page size".into());
                }
            }
        }
        for w in loads.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b.vaddr < a.vaddr {
                self.add(&R_ORDER, WARNING, Some(b), &[("p_vaddr", b.vaddr), ("previous p_vaddr", a.vaddr)],
                    format!("program header {} (p_vaddr {:#x}) comes after program header {} (p_vaddr {:#x})", b.index, b.vaddr, a.index, a.vaddr),
                    "usually nothing; for ET_DYN the load address is computed from the first PT_LOAD".into());
            }
        }
        for (i, a) in loads.iter().enumerate() {
            for b in loads.iter().skip(i + 1) {
                let a_end = a.vaddr.saturating_add(a.memsz);
                let b_end = b.vaddr.saturating_add(b.memsz);
                if a.memsz != 0 && b.memsz != 0 && a.vaddr < b_end && b.vaddr < a_end {
                    self.add(&R_OVERLAP, WARNING, Some(b), &[("p_vaddr", b.vaddr), ("end", b_end), ("other p_vaddr", a.vaddr), ("other end", a_end)],
                        format!("program header {} ({:#x}..{:#x}) overlaps program header {} ({:#x}..{:#x})", b.index, b.vaddr, b_end, a.index, a.vaddr, a_end),
                        "exec succeeds; the later segment's pages replace the earlier one's".into());
                }
            }
        }
        if let Some(s) = phdrs
            .iter()
            .find(|p| p.p_type == PT_GNU_STACK && p.p_flags & PF_X != 0)
        {
            self.add(&R_EXEC_STACK, WARNING, Some(s), &[("p_flags", u64::from(s.p_flags))],
                format!("program header {} (PT_GNU_STACK) has flags {}: the stack is executable", s.index, s.flags.trim()),
                "exec succeeds with an executable stack; the kernel logs \"started with executable stack\"".into());
        }
    }
}

const CRASH_MAPERR: Effect = crash("SEGV_MAPERR");
const CRASH_ACCERR: Effect = crash("SEGV_ACCERR");

/// One sentence for the whole file.
fn verdict(problems: &[Problem]) -> String {
    match problems.iter().find(|p| p.decisive) {
        None if problems.is_empty() => "clean: the kernel's loader rules are all met".into(),
        None => format!("runs, with {} warning(s)", problems.len()),
        Some(p) => match p.stage {
            Stage::BeforePointOfNoReturn => format!(
                "execve fails with {} before the point of no return ({})",
                p.errno.unwrap_or("an error"),
                p.rule
            ),
            Stage::AfterPointOfNoReturn => format!(
                "execve fails with {} after the point of no return, then SIGSEGV (SI_KERNEL) ({})",
                p.errno.unwrap_or("an error"),
                p.rule
            ),
            Stage::AfterExec => format!(
                "execve succeeds, then SIGSEGV ({}) in user space ({})",
                p.si_code.unwrap_or("SEGV_MAPERR"),
                p.rule
            ),
            Stage::None => "runs".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::elf::PathFact;

    /// (type, flags, offset, vaddr, filesz, memsz, align)
    type Ph = (u32, u32, u64, u64, u64, u64, u64);

    /// An x86-64 ELF64 with these program headers, padded to `len` bytes.
    fn elf(e_type: u16, entry: u64, phdrs: &[Ph], len: usize) -> Vec<u8> {
        let mut f = b"\x7fELF\x02\x01\x01".to_vec();
        f.resize(16, 0);
        f.extend_from_slice(&e_type.to_le_bytes());
        f.extend_from_slice(&EM_X86_64.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&entry.to_le_bytes());
        f.extend_from_slice(&64u64.to_le_bytes());
        f.extend_from_slice(&[0; 12]);
        f.extend_from_slice(&64u16.to_le_bytes());
        f.extend_from_slice(&56u16.to_le_bytes());
        f.extend_from_slice(&(phdrs.len() as u16).to_le_bytes());
        f.extend_from_slice(&[0; 6]);
        for &(t, fl, off, va, fs, ms, al) in phdrs {
            for (v, w) in [
                (t as u64, 4),
                (fl as u64, 4),
                (off, 8),
                (va, 8),
                (va, 8),
                (fs, 8),
                (ms, 8),
                (al, 8),
            ] {
                f.extend_from_slice(&v.to_le_bytes()[..w]);
            }
        }
        f.resize(len.max(f.len()), 0);
        f
    }

    fn env() -> ElfEnv {
        ElfEnv {
            host_machine: EM_X86_64,
            page_size: 4096,
            mmap_min_addr: 65536,
            task_size: 0x7fff_ffff_f000,
            mode: Some(0o755),
            paths: vec![],
        }
    }

    const RX: u32 = PF_R | PF_X;
    const RW: u32 = PF_R | PF_W;
    const RWX: u32 = PF_R | PF_W | PF_X;

    /// The lab's bad_elf (so2-lab.md, Exercise 5), header for header.
    fn lab_bad_elf() -> Vec<u8> {
        elf(
            ET_EXEC,
            0x400130,
            &[
                (PT_LOAD, RWX, 0xf0, 0x4000f0, 0xbe11, 0xbe18, 0x10),
                (PT_LOAD, RW, 0xbf20, 0x40c000, 0x2c20, 0x3008, 0x20),
                (PT_GNU_STACK, RWX, 0, 0, 0, 0, 0x10),
            ],
            60992,
        )
    }

    fn good() -> Vec<u8> {
        elf(
            ET_EXEC,
            0x4000b0,
            &[(PT_LOAD, RX, 0, 0x400000, 0xc0, 0xc0, 0x1000)],
            0xc0,
        )
    }

    fn rules(r: &ElfReport) -> Vec<&str> {
        r.problems.iter().map(|p| p.rule).collect()
    }

    #[test]
    fn lab_bad_elf_is_a_congruence_failure_after_the_point_of_no_return() {
        let r = check(&lab_bad_elf(), &env());
        let d = r.decisive().expect("a decisive problem");
        assert_eq!(d.rule, "load-congruence");
        assert_eq!(d.phdr, Some(1));
        assert_eq!(d.errno, Some("EINVAL"));
        assert_eq!(d.stage, Stage::AfterPointOfNoReturn);
        assert_eq!((d.signal, d.si_code), (Some("SIGSEGV"), Some("SI_KERNEL")));
        let n = |name: &str| d.numbers.iter().find(|n| n.name == name).map(|n| n.value);
        assert_eq!(n("p_offset"), Some(0xbf20));
        assert_eq!(n("p_vaddr"), Some(0x40c000));
        assert!(d.message.contains("0xbf20") && d.message.contains("0x40c000"));
        assert!(d.message.contains("p_align 0x20"), "{}", d.message);
        assert!(
            d.quote
                .contains("congruent values for p_vaddr and p_offset")
        );
        // The RWE GNU_STACK is reported too, as a warning.
        assert!(rules(&r).contains(&"exec-stack"));
        assert_eq!(
            explain(&r, Some("EINVAL"), true).map(|p| p.rule),
            Some("load-congruence")
        );
        assert!(explain(&r, Some("ENOENT"), false).is_none());
    }

    #[test]
    fn good_file_is_clean() {
        let r = check(&good(), &env());
        assert!(r.problems.is_empty(), "{:?}", rules(&r));
        assert_eq!(r.program_headers.len(), 1);
    }

    #[test]
    fn segment_rules_in_kernel_order() {
        let cases: &[(&[Ph], u64, &str, &str)] = &[
            (
                &[(PT_LOAD, RX, 0, 0x400000, 0x40, 0x20, 0x1000)],
                0x400000,
                "load-filesz-gt-memsz",
                "EINVAL",
            ),
            (
                &[(PT_LOAD, RW, 0, 0x400000, 0x40, 0x8000_0000_0000, 0x1000)],
                0x400000,
                "load-bss-beyond-task-size",
                "ENOMEM",
            ),
            (
                &[(PT_LOAD, RX, 0, 0x1000, 0xc0, 0xc0, 0x1000)],
                0x1000,
                "load-below-mmap-min-addr",
                "EPERM",
            ),
            (
                &[(PT_LOAD, RX, 0, 0xffff_ffff_8100_0000, 0xc0, 0xc0, 0x1000)],
                0x400000,
                "load-map-beyond-task-size",
                "ENOMEM",
            ),
            (
                &[(PT_LOAD, RX, 0, 0x400000, 0xc0, 0xc0, 0x1000)],
                0xffff_ffff_8100_0000,
                "entry-beyond-task-size",
                "EINVAL",
            ),
            (
                &[(PT_LOAD, RW, 0, 0x400000, 0x1100, 0x3000, 0x1000)],
                0x400000,
                "load-file-range",
                "EFAULT",
            ),
        ];
        for (phdrs, entry, rule, errno) in cases {
            let r = check(&elf(ET_EXEC, *entry, phdrs, 0xc0), &env());
            let d = r
                .decisive()
                .unwrap_or_else(|| panic!("{rule}: nothing decisive"));
            assert_eq!((d.rule, d.errno), (*rule, Some(*errno)));
            assert_eq!(d.stage, Stage::AfterPointOfNoReturn, "{rule}");
        }
    }

    #[test]
    fn failures_before_the_point_of_no_return() {
        let mut e = env();
        let path = "/nonexistent/ld.so";
        let mut f = elf(
            ET_EXEC,
            0x4000b0,
            &[
                (PT_INTERP, PF_R, 0x100, 0, path.len() as u64 + 1, 0, 1),
                (PT_LOAD, RX, 0, 0x400000, 0x120, 0x120, 0x1000),
            ],
            0x120,
        );
        f[0x100..0x100 + path.len()].copy_from_slice(path.as_bytes());
        assert_eq!(paths_to_check(&f, EM_X86_64), vec![path.to_string()]);
        // Unknown to the environment: nothing claimed.
        assert!(check(&f, &e).problems.is_empty());
        e.paths.push(PathFact {
            path: path.into(),
            state: PathState::Missing,
        });
        let d = check(&f, &e).decisive().cloned().unwrap();
        assert_eq!(
            (d.rule, d.errno, d.phdr),
            ("interp-missing", Some("ENOENT"), Some(0))
        );
        assert_eq!(d.stage, Stage::BeforePointOfNoReturn);
        assert_eq!(d.signal, None);
        e.paths[0].state = PathState::File {
            head: b"#!/bin/sh\n".repeat(8),
        };
        assert_eq!(check(&f, &e).decisive().unwrap().errno, Some("ELIBBAD"));
        e.paths[0].state = PathState::File {
            head: b"#!/bin/sh\n".to_vec(),
        };
        assert_eq!(check(&f, &e).decisive().unwrap().errno, Some("EIO"));
        e.paths[0].state = PathState::File {
            head: good()[..64].to_vec(),
        };
        assert!(check(&f, &e).problems.is_empty());
        f[0x100 + path.len()] = b'x';
        assert_eq!(
            check(&f, &e).decisive().unwrap().rule,
            "interp-not-terminated"
        );

        let decisive = |b: &[u8]| check(b, &env()).decisive().map(|p| (p.rule, p.errno));
        let mut bad = good();
        bad[3] = b'G';
        assert_eq!(decisive(&bad), Some(("not-elf", Some("ENOEXEC"))));
        assert_eq!(decisive(b""), Some(("not-elf", Some("ENOEXEC"))));
        assert_eq!(
            decisive(&good()[..30]),
            Some(("header-truncated", Some("ENOEXEC")))
        );
        let mut bad = good();
        bad[56] = 0; // e_phnum
        assert_eq!(decisive(&bad), Some(("phnum", Some("ENOEXEC"))));
        let mut bad = good();
        bad[54] = 32; // e_phentsize
        assert_eq!(decisive(&bad), Some(("phentsize", Some("ENOEXEC"))));
        let mut bad = good();
        bad[18] = EM_AARCH64 as u8;
        assert_eq!(decisive(&bad), Some(("elf-machine", Some("ENOEXEC"))));
        let mut bad = good();
        bad[16] = 1; // ET_REL
        assert_eq!(decisive(&bad), Some(("elf-type", Some("ENOEXEC"))));
        let mut e = env();
        e.mode = Some(0o644);
        assert_eq!(check(&good(), &e).decisive().unwrap().errno, Some("EACCES"));
    }

    #[test]
    fn class_and_data_are_ignored_by_the_kernel_but_warned_about() {
        let mut f = good();
        f[4] = 1;
        f[5] = 2;
        let r = check(&f, &env());
        assert!(r.decisive().is_none());
        assert_eq!(rules(&r), ["elf-class", "elf-data"]);
    }

    #[test]
    fn no_load_and_entry_outside_crash_in_user_space() {
        let r = check(
            &elf(
                ET_EXEC,
                0x400080,
                &[(PT_GNU_STACK, RW, 0, 0, 0, 0, 0x10)],
                0x80,
            ),
            &env(),
        );
        let d = r.decisive().unwrap();
        assert_eq!(
            (d.rule, d.stage, d.si_code),
            ("no-load", Stage::AfterExec, Some("SEGV_MAPERR"))
        );
        assert_eq!(explain(&r, None, false).map(|p| p.rule), Some("no-load"));
        let r = check(
            &elf(
                ET_EXEC,
                0x400080,
                &[(PT_LOAD, PF_R, 0, 0x400000, 0xc0, 0xc0, 0x1000)],
                0xc0,
            ),
            &env(),
        );
        assert_eq!(r.decisive().unwrap().si_code, Some("SEGV_ACCERR"));
    }

    #[test]
    fn warnings_the_kernel_tolerates() {
        let f = elf(
            ET_EXEC,
            0x4000b0,
            &[
                (PT_LOAD, RX, 0, 0x400000, 0x1000, 0x1000, 0x3000),
                (PT_LOAD, RW, 0x1000, 0x3ff000, 0x100, 0x100, 0x1000),
                (PT_LOAD, RW, 0x1800, 0x400800, 0x100, 0x100, 0x1000),
            ],
            0x2000,
        );
        let r = check(&f, &env());
        assert!(r.decisive().is_none(), "{:?}", rules(&r));
        let got = rules(&r);
        for want in ["align-not-power-of-two", "load-order", "load-overlap"] {
            assert!(got.contains(&want), "{want} missing from {got:?}");
        }
        assert!(r.problems.iter().all(|p| p.severity == Severity::Warning));
    }

    #[test]
    fn dyn_with_zero_extent_is_einval() {
        let r = check(
            &elf(ET_DYN, 0, &[(PT_LOAD, RX, 0, 0, 0, 0, 0x1000)], 0x80),
            &env(),
        );
        assert_eq!(
            r.decisive().map(|p| (p.rule, p.errno)),
            Some(("dyn-zero-extent", Some("EINVAL")))
        );
    }

    #[test]
    fn scripts_name_their_interpreter() {
        let s = b"#! /nonexistent/interp -x\necho hi\n";
        assert_eq!(
            paths_to_check(s, EM_X86_64),
            vec!["/nonexistent/interp".to_string()]
        );
        let mut e = env();
        e.paths.push(PathFact {
            path: "/nonexistent/interp".into(),
            state: PathState::Missing,
        });
        let r = check(s, &e);
        assert_eq!(
            r.kind,
            FileKind::Script {
                interpreter: "/nonexistent/interp".into()
            }
        );
        assert_eq!(
            r.decisive().map(|p| (p.rule, p.errno)),
            Some(("script-interpreter", Some("ENOENT")))
        );
    }

    /// Always-on robustness check (the fuzz target goes much further):
    /// every truncation and many byte corruptions of the lab's file.
    #[test]
    fn never_panics_on_truncated_or_corrupted_files() {
        let lab = lab_bad_elf();
        let head = &lab[..64 + 3 * 56 + 8];
        for len in 0..head.len() {
            check(&head[..len], &env());
        }
        let mut state = 0x1234_5678_u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut b = head.to_vec();
            let at = (state % b.len() as u64) as usize;
            b[at] = (state >> 32) as u8;
            let at2 = ((state >> 16) % b.len() as u64) as usize;
            b[at2] ^= 0xff;
            let r = check(&b, &env());
            assert!(r.problems.iter().filter(|p| p.decisive).count() <= 1);
        }
    }
}
