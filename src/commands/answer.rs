//! `kdiag answer LAB KEY VALUE`: record a finding in the lab's answers file
//! (what `kdiag lab` and `kdiag check` read).

use std::path::PathBuf;

use anyhow::Context;

use crate::error;
use crate::lab::{self, Source, answers::Answers};
use crate::sys::privilege;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab (e.g. 0-demo)
    pub lab: String,
    /// The finding's key, e.g. who.pid (the lab's step names them)
    pub key: String,
    /// Your answer
    pub value: String,
    /// The directory `kdiag lab` uses (one folder per lab)
    #[arg(long, value_name = "DIR", default_value = "kdiag-labs")]
    pub dir: PathBuf,
    /// Read labs and checks from this directory instead of the built-in ones
    #[arg(long, value_name = "DIR")]
    pub labs: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = Source { dir: args.labs };
    let checks = super::lab::load_checks(&source, &source.lab(&args.lab)?.id)?;
    if !checks.checks.iter().any(|c| c.id == args.key) {
        let keys: Vec<&str> = checks.checks.iter().map(|c| c.id.as_str()).collect();
        return Err(error::usage(format!(
            "lab {} has no finding {:?}; its keys are: {}",
            args.lab,
            args.key,
            keys.join(", ")
        )));
    }
    let dir = lab::lab_dir(&args.dir, &args.lab);
    let file = dir.join("answers.toml");
    let mut answers = Answers::load(&file)?;
    answers.set(&args.key, &args.value)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(&file, answers.to_toml())
        .with_context(|| format!("cannot write {}", file.display()))?;
    let _ = privilege::chown_to_invoker(&file);
    println!(
        "{} = {:?} recorded in {}",
        args.key,
        args.value,
        file.display()
    );
    Ok(error::OK)
}
