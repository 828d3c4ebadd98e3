//! What a learner may ask of kdiag on a course server: the one place that
//! decides it. On a machine without an installed course (a learner's own
//! laptop) nothing is refused. With a course installed, a caller who is
//! not an administrator is a **learner**: who they are comes from the
//! kernel (the real uid, or SUDO_UID when kdiag runs as root through
//! sudo, which sets it), never from an argument or a file they can write.
//!
//! An **administrator** is root itself, a member of the `sudo`, `admin` or
//! `wheel` group, or an account the installed course lists in `admins`:
//! databases and files only root can write.
//!
//! A learner may not choose their variant (`--seed`) or the checks
//! (`--labs`). Through sudo (root for them) they also may not observe
//! other users: `watch` (a root exporter: `--listen`, `--otlp`), another
//! user's PID or a cgroup; system-wide instruments are narrowed to their
//! processes at the source (`observed_user`). The kernel's own rules are the model
//! (`perf_event_paranoid`, ptrace's access checks): a user observes their
//! own processes.

use super::attest::{self, Server};
use crate::sys::process::privilege;

/// Groups whose members administer the machine (Debian, Ubuntu, Fedora).
pub const ADMIN_GROUPS: &[&str] = &["sudo", "admin", "wheel"];

/// Who runs kdiag, as the course sees it.
pub enum Caller {
    /// No course installed, or an administrator: nothing is refused.
    Free,
    /// A learner on a course server.
    Learner(Learner),
}

pub struct Learner {
    pub uid: u32,
    /// Through sudo: kdiag is root for them, and the course server
    /// (journal, limits, signature) is open. None when they run kdiag as
    /// themselves, which cannot read the course.
    pub server: Option<Server>,
}

/// Whether `uid` administers this machine (`course`: the installed one,
/// for its `admins`, when kdiag can read it).
pub fn is_admin(uid: u32, course: Option<&super::Course>) -> bool {
    uid == 0
        || privilege::in_group(uid, ADMIN_GROUPS)
        || course
            .is_some_and(|c| privilege::user_name(uid).is_some_and(|name| c.admins.contains(&name)))
}

/// Refuse `what` unless the caller administers the machine: root, or an
/// administrator through sudo (never a learner's sudo rule).
pub fn require_admin(what: &str) -> anyhow::Result<()> {
    let admin = match privilege::invoker() {
        Some(who) => is_admin(who.uid, attest::installed()?.as_ref()),
        None => privilege::is_root(),
    };
    if admin {
        return Ok(());
    }
    Err(crate::error::usage(format!(
        "{what} is for the server's administrator: run it as root, or through sudo as a member \
         of the {} group (not through a learner's sudo rule)",
        ADMIN_GROUPS.join(", ")
    )))
}

/// The user whose processes the caller observes when not everyone's: a
/// learner's own (through sudo on a course server, or served by
/// `kdiag serve`). Panels that list every process keep only theirs.
pub fn observed_user() -> anyhow::Result<Option<u32>> {
    Ok(match caller()? {
        Caller::Learner(l) => Some(l.uid),
        Caller::Free => match privilege::invoker() {
            Some(who)
                if privilege::served() && !is_admin(who.uid, attest::installed()?.as_ref()) =>
            {
                Some(who.uid)
            }
            _ => None,
        },
    })
}

/// Who the caller is.
pub fn caller() -> anyhow::Result<Caller> {
    if !attest::is_installed() {
        return Ok(Caller::Free);
    }
    match privilege::invoker() {
        Some(who) => {
            let course = attest::installed()?;
            if is_admin(who.uid, course.as_ref()) {
                return Ok(Caller::Free);
            }
            let server = course.map(|c| Server::open(c, who.uid)).transpose()?;
            Ok(Caller::Learner(Learner {
                uid: who.uid,
                server,
            }))
        }
        // SAFETY: getuid cannot fail.
        None => match unsafe { libc::getuid() } {
            uid if is_admin(uid, None) => Ok(Caller::Free),
            uid => Ok(Caller::Learner(Learner { uid, server: None })),
        },
    }
}

/// The course server when the caller is a learner through sudo.
pub fn server() -> anyhow::Result<Option<Server>> {
    Ok(match caller()? {
        Caller::Learner(l) => l.server,
        Caller::Free => None,
    })
}

/// Something a command asks for that a learner may be refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// Choosing the variant (`--seed`, `--course`, `$KDIAG_SEED`).
    Seed,
    /// Other labs and checks (`--labs DIR`).
    Labs,
    /// `watch`: the machine exported (`--listen`, `--otlp`).
    Watch,
    /// A process kdiag did not start.
    Pid(u32),
    /// Every process of a user (`execsnoop -u`): only the caller's own.
    User(u32),
    /// A cgroup or systemd unit (anyone's processes).
    Cgroup,
}

/// Refuse `ask` when the caller is a learner who may not have it, with a
/// message that says why and what they may do instead (exit 2: not
/// theirs to ask).
pub fn allow(ask: &Ask) -> anyhow::Result<()> {
    allow_all(std::slice::from_ref(ask))
}

/// Every ask of a command, in order: the first refusal.
pub fn allow_all(asks: &[Ask]) -> anyhow::Result<()> {
    if asks.is_empty() {
        return Ok(());
    }
    match caller()? {
        Caller::Free => Ok(()),
        Caller::Learner(l) => refuse(asks, l.uid, l.server.is_some()),
    }
}

/// Every ask of a caller of `kdiag serve`, whom the kernel named
/// (`SO_PEERCRED`'s uid): the service is root for them, as sudo would be,
/// so a caller who is not an administrator is refused what a learner
/// through sudo is, whether or not a course is installed.
pub fn allow_peer(uid: u32, asks: &[Ask]) -> anyhow::Result<()> {
    if is_admin(uid, attest::installed()?.as_ref()) {
        return Ok(());
    }
    refuse(asks, uid, true)
}

fn refuse(asks: &[Ask], uid: u32, sudo: bool) -> anyhow::Result<()> {
    asks.iter()
        .find_map(|a| refusal(a, uid, sudo))
        .map_or(Ok(()), Err)
}

/// Why learner `uid` may not have `ask` (`sudo`: kdiag is root for them).
fn refusal(ask: &Ask, uid: u32, sudo: bool) -> Option<anyhow::Error> {
    const WHY: &str = "on this course server";
    let msg = match ask {
        Ask::Seed => format!(
            "{WHY} your variant is your account's: kdiag chooses it (no --seed, --course or \
             $KDIAG_SEED for learners); run the lab through sudo without them"
        ),
        Ask::Labs => format!(
            "{WHY} the labs and checks are the course's: --labs is for instructors; run the \
             built-in labs (kdiag lab list)"
        ),
        _ if !sudo => return None, // as themselves the kernel decides
        Ask::Watch => format!(
            "{WHY} learners may not run kdiag watch (it observes and exports the whole machine, \
             --listen and --otlp included); observe your own processes: kdiag top, kdiag \
             diagnose -p PID"
        ),
        Ask::Pid(pid) => match crate::sys::procfs::real_uid(*pid) {
            Some(owner) if owner != uid => format!(
                "{WHY} learners observe only their own processes: PID {pid} is {}'s, not yours \
                 (as the kernel refuses ptrace and perf on another user's process); kdiag ps -u \
                 {} lists yours",
                privilege::user_name(owner).unwrap_or_else(|| format!("uid {owner}")),
                privilege::user_name(uid).unwrap_or_else(|| uid.to_string())
            ),
            _ => return None, // theirs, or gone (the command says so)
        },
        Ask::User(u) if *u == uid => return None,
        Ask::User(_) => format!(
            "{WHY} learners observe only their own processes: -u names another user; use -u {}",
            privilege::user_name(uid).unwrap_or_else(|| uid.to_string())
        ),
        Ask::Cgroup => format!(
            "{WHY} learners observe only their own processes: a cgroup or unit holds anyone's; \
             name your process with -p PID, or run it with -- CMD"
        ),
    };
    Some(crate::error::usage(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learner_is_refused_what_observes_others_and_told_why() {
        // Through sudo: every refusal; as themselves only the course's.
        let me = std::process::id();
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let other = uid + 1;
        assert!(refusal(&Ask::Pid(me), uid, true).is_none(), "own process");
        let e = refusal(&Ask::Pid(me), other, true).unwrap().to_string();
        assert!(
            e.contains(&format!("PID {me} is")) && e.contains("not yours"),
            "{e}"
        );
        assert!(refusal(&Ask::Pid(me), other, false).is_none());
        assert!(refusal(&Ask::Watch, other, false).is_none());
        let e = refusal(&Ask::Watch, other, true).unwrap().to_string();
        assert!(e.contains("kdiag watch") && e.contains("--listen"), "{e}");
        for ask in [Ask::Seed, Ask::Labs] {
            assert!(refusal(&ask, other, false).is_some(), "{ask:?}");
        }
        let e = refusal(&Ask::User(uid), other, true).unwrap();
        assert_eq!(crate::error::exit_code(&e), crate::error::USAGE);
        assert!(e.to_string().contains("-u names another user"), "{e}");
    }

    #[test]
    fn root_and_the_admin_groups_administer() {
        assert!(is_admin(0, None));
        let mut course = super::super::Course::generate(vec![]).unwrap();
        // An account in no admin group, named in the course.
        let nobody = 65534;
        if privilege::user_name(nobody).is_some() && !privilege::in_group(nobody, ADMIN_GROUPS) {
            assert!(!is_admin(nobody, Some(&course)));
            course.admins = vec![privilege::user_name(nobody).unwrap()];
            assert!(is_admin(nobody, Some(&course)));
        }
    }
}
