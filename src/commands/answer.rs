//! `kdiag answer LAB KEY VALUE`: record a finding in the lab's answers file
//! (in your state directory, so it works from any directory). A file you
//! name as evidence is recorded by its full path, so it is found later
//! wherever you run kdiag from.

use crate::error;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab (e.g. 0-demo)
    pub lab: String,
    /// The finding's key, e.g. who.pid (the lab's steps show them)
    pub key: String,
    /// Your answer
    pub value: String,
    #[command(flatten)]
    pub files: super::args::Files,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = args.files.source();
    let (lab, checks) = crate::lab::load(&source, &args.lab)?;
    let Some(check) = checks.checks.iter().find(|c| c.id == args.key) else {
        let keys: Vec<&str> = checks.checks.iter().map(|c| c.id.as_str()).collect();
        return Err(error::usage(format!(
            "lab {} has no finding {:?}; its keys are: {}",
            lab.id,
            args.key,
            keys.join(", ")
        )));
    };
    let dir = args.files.lab_dir(&lab.id)?;
    if check.is_artifact() {
        let path = std::path::absolute(&args.value)?;
        if !path.is_file() {
            eprintln!(
                "kdiag: warning: {} is not a file (yet); the check will fail until it is",
                path.display()
            );
        }
    }
    let recorded = crate::lab::state::record(&dir, &args.key, &args.value, check.is_artifact())?;
    if let Some(server) = crate::course::policy::server()? {
        crate::lab::attested::journal_answer(&server, &lab.id, &args.key)?;
    }
    let file = dir.answers();
    println!(
        "{} = {:?} recorded in {}",
        args.key,
        recorded,
        file.display()
    );
    Ok(error::OK)
}
