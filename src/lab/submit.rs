//! `kdiag lab submit`: the caller's own lab folder packed (submission.rs)
//! into one bundle, for the learner and variant the machine says.

use std::path::PathBuf;

use super::submission;
use crate::grade::CheckFile;

/// What `lab submit` made: the bundle's path, its files, and whom and
/// which variant it is for.
pub struct Submitted {
    pub out: PathBuf,
    pub files: Vec<String>,
    pub learner: String,
    pub seed: String,
}

/// `kdiag lab submit`: pack the answers of `dir` (the caller's own lab
/// folder) with their files, the seed and the attempts into a bundle at
/// `out` (default `kdiag-LAB-LEARNER`, `.tar` unless `folder`). On a course
/// server the learner is the account that invoked sudo, the attempts are
/// the service's and the bundle is signed with the journal.
pub fn submit(
    checks: &CheckFile,
    dir: &super::state::LabDir,
    out: Option<PathBuf>,
    folder: bool,
    learner: Option<String>,
) -> anyhow::Result<Submitted> {
    let lab = &checks.lab;
    let answers = crate::grade::answers::Answers::load(&dir.answers())?;
    if answers.keys().is_empty() {
        return Err(crate::error::usage(format!(
            "no answers yet in {}: run kdiag lab {lab} first",
            dir.answers().display(),
        )));
    }
    let server = crate::course::policy::server()?;
    if let Some(server) = &server
        && let Some(l) = learner.as_ref().filter(|l| **l != server.learner)
    {
        return Err(crate::error::usage(format!(
            "on this course server a submission is yours, learner {}: drop --learner {l}",
            server.learner
        )));
    }
    submission::own_folder(dir)?;
    let seed = super::seed::choose(None, Some(dir))?;
    let learner = match &server {
        Some(server) => server.learner.clone(),
        None => learner.unwrap_or_else(super::user_name),
    };
    let attempts = match &server {
        Some(server) => (server.attempts(lab)?, super::attempts::ATTESTED),
        None => (super::attempts::local(dir), super::attempts::UNATTESTED),
    };
    let seed_token = seed.token.as_str().to_string();
    let mut packed = submission::pack(
        checks,
        &answers,
        &dir.path,
        &learner,
        &seed_token,
        seed.source,
        attempts,
    )?;
    if let Some(server) = &server {
        let signed = server.sign(lab, &packed)?;
        packed.push((crate::course::attest::FILE.to_string(), signed));
    }
    let name = submission::default_name(lab, &learner);
    let out = out.unwrap_or_else(|| PathBuf::from(if folder { name } else { name + ".tar" }));
    if folder {
        submission::write_folder(&out, &packed)?;
    } else {
        submission::write_archive(&out, &packed)?;
    }
    Ok(Submitted {
        out,
        files: packed.into_iter().map(|(n, _)| n).collect(),
        learner,
        seed: seed_token,
    })
}
