//! ELF headers as the loader sees them, and the problems `elf-check` finds.
//! Plain data: parsing and rules live in `analysis::elf_rules`.

use serde::Serialize;

/// What kind of file the first bytes say it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum FileKind {
    /// An ELF file (possibly broken).
    Elf,
    /// A `#!` script; `interpreter` is the path after `#!`.
    Script { interpreter: String },
    /// Neither: execve answers ENOEXEC.
    Other,
}

/// The ELF file header fields the loader reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElfHeader {
    /// 32 or 64 (EI_CLASS), 0 if invalid.
    pub class: u8,
    /// "little" or "big" (EI_DATA), or "invalid".
    pub data: &'static str,
    pub e_type: u16,
    pub type_name: &'static str,
    pub machine: u16,
    pub machine_name: &'static str,
    pub entry: u64,
    pub phoff: u64,
    pub phentsize: u16,
    pub phnum: u16,
}

/// One program header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgramHeader {
    pub index: usize,
    pub p_type: u32,
    pub type_name: String,
    /// PF_R/PF_W/PF_X as "RWE", like readelf.
    pub flags: String,
    pub p_flags: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub align: u64,
}

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The kernel refuses the file or the program dies at start.
    Error,
    /// Breaks elf(5) or risks a crash, but the kernel tolerates it.
    Warning,
}

/// When, relative to exec, the consequence happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// execve returns the errno; the calling program goes on.
    BeforePointOfNoReturn,
    /// execve "returns" the errno after `begin_new_exec` destroyed the old
    /// image: the kernel kills the process with SIGSEGV (si_code SI_KERNEL).
    AfterPointOfNoReturn,
    /// execve succeeds; the new program then faults in user space.
    AfterExec,
    /// Nothing fails at exec time.
    None,
}

/// A number shown with a problem (always printed in hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Number {
    pub name: String,
    pub value: u64,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Stable identifier, e.g. "load-congruence".
    pub rule: &'static str,
    pub severity: Severity,
    /// Index of the program header at fault, if any.
    pub phdr: Option<usize>,
    /// The program header itself, for display.
    pub header: Option<ProgramHeader>,
    /// The numbers that break the rule.
    pub numbers: Vec<Number>,
    /// One line saying what is wrong, with the numbers.
    pub message: String,
    /// The rule, quoted.
    pub quote: &'static str,
    /// Where the rule comes from: "elf(5)" or a kernel function.
    pub source: &'static str,
    /// The errno execve returns ("EINVAL"), if it fails.
    pub errno: Option<&'static str>,
    pub stage: Stage,
    /// The signal that follows ("SIGSEGV"), if any.
    pub signal: Option<&'static str>,
    /// Its si_code: "SI_KERNEL" after the point of no return, "SEGV_MAPERR"
    /// or "SEGV_ACCERR" for a fault in user space.
    pub si_code: Option<&'static str>,
    /// What the kernel does, in a sentence.
    pub kernel: String,
    /// True for the problem the kernel meets first: its errno is the one
    /// execve returns. At most one problem is decisive.
    pub decisive: bool,
}

/// The whole result of checking one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElfReport {
    pub kind: FileKind,
    pub header: Option<ElfHeader>,
    pub program_headers: Vec<ProgramHeader>,
    /// The PT_INTERP path, if any (lossy UTF-8, without the NUL).
    pub interpreter: Option<String>,
    pub problems: Vec<Problem>,
    /// What execve will do, in a sentence.
    pub verdict: String,
}

impl ElfReport {
    /// The problem that decides execve's outcome, if any.
    pub fn decisive(&self) -> Option<&Problem> {
        self.problems.iter().find(|p| p.decisive)
    }
}

/// Facts about this machine and the file system that the rules need.
/// `instruments::elf` collects them; tests build them by hand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElfEnv {
    /// e_machine of the running kernel (EM_X86_64 = 62, EM_AARCH64 = 183).
    pub host_machine: u16,
    pub page_size: u64,
    /// vm.mmap_min_addr: lower mappings need CAP_SYS_RAWIO.
    pub mmap_min_addr: u64,
    /// TASK_SIZE for 64-bit processes (x86-64: 0x7ffffffff000).
    pub task_size: u64,
    /// The largest zero-filled (bss) mapping memory accounting grants now,
    /// in bytes: RAM + swap under vm.overcommit_memory=0, CommitLimit -
    /// Committed_AS under 2, None (no limit) under 1 or when unknown.
    pub commit_limit: Option<u64>,
    /// Permission bits of the checked file, if known (exec bit → EACCES).
    pub mode: Option<u32>,
    /// What the file system says about paths the file names (PT_INTERP,
    /// `#!` interpreter). A path not listed is reported as unchecked.
    pub paths: Vec<PathFact>,
}

/// One path as `open_exec` would find it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathFact {
    pub path: String,
    pub state: PathState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum PathState {
    /// Does not exist (ENOENT).
    Missing,
    /// Not a regular file (EACCES).
    NotRegular,
    /// A regular file without any execute bit (EACCES).
    NotExecutable,
    /// Its directory or itself cannot be searched or read by the user
    /// (EACCES).
    Denied,
    /// A regular executable file; `head` holds its first 64 bytes.
    File { head: Vec<u8> },
}

impl ElfEnv {
    /// The facts about `path`, if collected.
    pub fn path(&self, path: &str) -> Option<&PathState> {
        self.paths.iter().find(|p| p.path == path).map(|p| &p.state)
    }
}
