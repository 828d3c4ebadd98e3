//! Text output of `kdiag elf-check`.

use std::io::{self, Write};

use crate::model::elf::{ElfReport, FileKind, Severity, Stage};
use crate::render::table::{Align, Table};

pub fn report(out: &mut impl Write, path: &str, r: &ElfReport) -> io::Result<()> {
    match (&r.kind, &r.header) {
        (FileKind::Elf, Some(h)) => {
            let class = if h.class == 0 {
                "ELF (class invalid)".to_string()
            } else {
                format!("ELF{}", h.class)
            };
            writeln!(
                out,
                "{path}: {class} {}-endian {} {}, entry {:#x}, {} program headers at {:#x}",
                h.data, h.type_name, h.machine_name, h.entry, h.phnum, h.phoff
            )?;
        }
        (FileKind::Script { interpreter }, _) => {
            writeln!(out, "{path}: not ELF, a #! script for {interpreter:?}")?;
        }
        _ => writeln!(out, "{path}: not an ELF file")?,
    }
    if !r.program_headers.is_empty() {
        writeln!(out)?;
        let mut t = Table::new([
            ("#", Align::Right),
            ("TYPE", Align::Left),
            ("OFFSET", Align::Right),
            ("VADDR", Align::Right),
            ("FILESZ", Align::Right),
            ("MEMSZ", Align::Right),
            ("FLG", Align::Left),
            ("ALIGN", Align::Left),
        ]);
        for p in &r.program_headers {
            t.push(vec![
                p.index.to_string(),
                p.type_name.clone(),
                format!("{:#x}", p.offset),
                format!("{:#x}", p.vaddr),
                format!("{:#x}", p.filesz),
                format!("{:#x}", p.memsz),
                p.flags.clone(),
                format!("{:#x}", p.align),
            ]);
        }
        t.write(out)?;
    }
    if let Some(i) = &r.interpreter {
        writeln!(out, "interpreter: {i}")?;
    }
    writeln!(out)?;
    if r.problems.is_empty() {
        writeln!(out, "no problems found")?;
    }
    for p in &r.problems {
        let sev = match p.severity {
            Severity::Error => "ERROR",
            Severity::Warning => "WARNING",
        };
        let at = p
            .phdr
            .map(|i| format!(" (program header {i})"))
            .unwrap_or_default();
        let first = match (p.decisive, p.stage) {
            (false, _) => "",
            (true, Stage::AfterExec) => "  <- the new program crashes here",
            (true, _) => "  <- execve fails here",
        };
        writeln!(out, "{sev} {}{at}{first}", p.rule)?;
        writeln!(out, "  {}", p.message)?;
        if !p.numbers.is_empty() {
            let nums: Vec<String> = p
                .numbers
                .iter()
                .map(|n| format!("{} {:#x}", n.name, n.value))
                .collect();
            writeln!(out, "  numbers: {}", nums.join(", "))?;
        }
        writeln!(out, "  rule:    {}", p.quote)?;
        writeln!(out, "  source:  {}", p.source)?;
        writeln!(out, "  kernel:  {}", p.kernel)?;
        writeln!(out)?;
    }
    writeln!(out, "verdict: {}", r.verdict)
}
