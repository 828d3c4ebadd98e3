//! Text output of `kdiag doctor`: the probes, how to fix what is not ok,
//! and which tier each feature uses.

use std::io::{self, Write};

use crate::model::capability::{DoctorReport, Status};
use crate::render::table::{Align, Table};

fn status(s: Status) -> &'static str {
    match s {
        Status::Ok => "ok",
        Status::Missing => "missing",
        Status::Denied => "denied",
    }
}

pub fn write(out: &mut impl Write, report: &DoctorReport) -> io::Result<()> {
    let items = report.probes.items();
    let mut checks = Table::new([
        ("CHECK", Align::Left),
        ("STATUS", Align::Left),
        ("DETAIL", Align::Left),
    ]);
    for (name, check) in &items {
        checks.push(vec![
            name.to_string(),
            status(check.status).into(),
            check.detail.clone(),
        ]);
    }
    checks.write(out)?;

    let fixes: Vec<_> = items
        .iter()
        .filter_map(|(n, c)| Some((n, c.fix.as_ref()?)))
        .collect();
    if !fixes.is_empty() {
        writeln!(out, "\nHow to fix:")?;
        for (name, fix) in fixes {
            writeln!(out, "  {name}: {fix}")?;
        }
    }

    writeln!(out)?;
    let mut features = Table::new([
        ("FEATURE", Align::Left),
        ("TIER", Align::Left),
        ("ALSO", Align::Left),
        ("NOTE", Align::Left),
    ]);
    for f in &report.features {
        let also: Vec<&str> = f.available.iter().skip(1).map(|t| t.label()).collect();
        features.push(vec![
            f.name.clone(),
            f.tier.map_or("none", |t| t.label()).into(),
            if also.is_empty() {
                "-".into()
            } else {
                also.join(",")
            },
            f.note.clone(),
        ]);
    }
    features.write(out)
}
