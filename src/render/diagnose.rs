//! `kdiag diagnose`'s report: the verdict first, then the numbers behind
//! it and what to run next.

use std::io::{self, Write};

use crate::model::diagnosis::{Diagnosis, Observation};

pub fn report(out: &mut impl Write, o: &Observation, d: &Diagnosis) -> io::Result<()> {
    writeln!(out, "Verdict: {}: {}", d.verdict.name(), d.summary)?;
    writeln!(
        out,
        "PID {} ({}), watched for {:.1} s\n",
        o.pid, o.comm, o.window_s
    )?;
    writeln!(out, "Evidence:")?;
    for e in &d.evidence {
        writeln!(out, "  {e}")?;
    }
    if !d.next.is_empty() {
        writeln!(out, "\nNext, for the why:")?;
        for n in &d.next {
            writeln!(out, "  {n}")?;
        }
    }
    Ok(())
}
