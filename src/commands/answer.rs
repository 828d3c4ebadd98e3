//! `kdiag answer LAB KEY VALUE`: record a finding in the lab's answers file
//! (what `kdiag lab` and `kdiag check` read).

use crate::error;
use crate::lab::answers::Answers;
use crate::sys::process::user_files;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab (e.g. 0-demo)
    pub lab: String,
    /// The finding's key, e.g. who.pid (the lab's step names them)
    pub key: String,
    /// Your answer
    pub value: String,
    #[command(flatten)]
    pub files: super::lab::Files,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = args.files.source();
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
    let dir = args.files.lab_dir(&args.lab);
    let file = dir.join("answers.toml");
    let mut answers = Answers::load(&file)?;
    answers.set(&args.key, &args.value)?;
    user_files::create_dir_all(&dir)?;
    user_files::write(&file, answers.to_toml())?;
    println!(
        "{} = {:?} recorded in {}",
        args.key,
        args.value,
        file.display()
    );
    Ok(error::OK)
}
