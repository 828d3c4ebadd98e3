//! Which variant a learner works on: the one seed rule of `lab`, `lab
//! list`, `lab submit` and `check`, decided by the course, not the
//! learner. On a course server (`course::policy`) it is the account's
//! course token, and nothing the learner writes or types changes it: not
//! `--seed`, not `$KDIAG_SEED`, not the lab's `progress.toml`. Elsewhere
//! (the learner's own machine, or an administrator) it is `--seed`, else
//! the lab's last seed, else `$KDIAG_SEED`, else the self-study seed of the
//! user name.

use super::state::{LabDir, Progress};
use super::submission::SeedSource;
use crate::course::policy::{self, Ask, Caller};
use crate::course::{Token, token};
use crate::error;

/// A seed and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    pub token: Token,
    pub source: SeedSource,
}

/// The seed of the caller's runs of the lab in `dir` (None: no lab
/// folder, e.g. checking an answers file), `given` by `--seed`.
pub fn choose(given: Option<&str>, dir: Option<&LabDir>) -> anyhow::Result<Seed> {
    let last = dir.and_then(|d| Token::parse(&Progress::load(&d.progress()).seed).ok());
    match policy::caller()? {
        Caller::Learner(learner) => {
            if given.is_some() {
                policy::allow(&Ask::Seed)?;
            }
            if std::env::var_os("KDIAG_SEED").is_some() {
                eprintln!(
                    "kdiag: warning: $KDIAG_SEED is ignored on this course server: your variant \
                     is your account's"
                );
            }
            let Some(server) = learner.server else {
                return Err(error::missing(
                    "on this course server your variant is your account's, which kdiag knows \
                     only when run through sudo: run sudo kdiag ... (each check is counted there)",
                ));
            };
            let token = server.token();
            if let Some(old) = last.filter(|t| *t != token) {
                eprintln!(
                    "kdiag: warning: your lab folder's progress.toml names seed {old}, not your \
                     course seed {token}: your answers are checked against {token}, the variant \
                     the course gave your account"
                );
            }
            Ok(Seed {
                token,
                source: SeedSource::Course,
            })
        }
        Caller::Free => {
            let given = match given {
                Some(s) => Some(Token::parse(s).map_err(error::usage)?),
                None => last,
            };
            if let Some(token) = given {
                return Ok(Seed {
                    token,
                    source: SeedSource::Given,
                });
            }
            if let Ok(v) = std::env::var("KDIAG_SEED") {
                return Ok(Seed {
                    token: Token::parse(&v)
                        .map_err(|e| error::usage(format!("KDIAG_SEED: {e}")))?,
                    source: SeedSource::Given,
                });
            }
            Ok(Seed {
                token: token::self_study_token(&super::user_name()),
                source: SeedSource::SelfStudy,
            })
        }
    }
}
