//! The rules the Linux ELF loader (fs/binfmt_elf.c, 6.x) and elf(5) impose
//! on an executable, checked on its bytes.
//!
//! Pure and total: any input gives a report, never a panic (a fuzz target
//! holds us to that). All arithmetic on file values wraps or is checked, as
//! the kernel's unsigned long arithmetic does.
//!
//! Problems are listed in the order the kernel meets them, so the first
//! error is the one execve reports (`Problem::decisive`).

mod bytes;
mod checker;
mod image;
mod parse;
mod rules;
mod segments;
#[cfg(test)]
mod tests;

use crate::model::elf::{ElfEnv, ElfReport, FileKind, Problem, Severity, Stage};

pub use bytes::FileBytes;
use bytes::prefix;
use checker::Checker;
pub use image::Image;
use parse::{Layout, interp_string, shebang};

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
/// `bytes` is the whole file, or an `Image` of the parts the rules read.
pub fn check(bytes: &dyn FileBytes, env: &ElfEnv) -> ElfReport {
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
    if bytes.at(0, 4) == Some(b"\x7fELF") {
        report.kind = FileKind::Elf;
        c.elf(&mut report);
    } else if bytes.at(0, 2) == Some(b"#!") {
        let interpreter = shebang(prefix(bytes, BINPRM_BUF_SIZE as u64));
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
pub fn problems(bytes: &dyn FileBytes, env: &ElfEnv) -> Vec<Problem> {
    check(bytes, env).problems
}

/// Paths the file asks the kernel to open (PT_INTERP, `#!` interpreter):
/// `instruments::elf` looks them up and puts the answers in `ElfEnv::paths`.
pub fn paths_to_check(bytes: &dyn FileBytes, host_machine: u16) -> Vec<String> {
    if bytes.at(0, 2) == Some(b"#!") {
        let interp = shebang(prefix(bytes, BINPRM_BUF_SIZE as u64));
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
