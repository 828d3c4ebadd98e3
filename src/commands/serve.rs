//! `kdiag serve`: the root service that traces for users who may not (a
//! course server's learners), on a Unix socket; and `forward`, the client's
//! choice to ask it. What a caller may ask is `course::policy`'s, for the
//! uid the kernel gives (`service::server` asks it), never one in the request.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::FromArgMatches;

use super::Command;
use crate::course::policy;
use crate::error;
use crate::service::{Peer, client, listener, server};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The socket to listen on, when systemd does not pass one (socket activation)
    #[arg(long, value_name = "PATH", default_value = listener::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Requests of one user served at a time
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub per_user: u16,
    /// Requests of one user accepted per minute
    #[arg(long, value_name = "N", default_value_t = 60, value_parser = clap::value_parser!(u16).range(1..))]
    pub per_minute: u16,
}

/// The commands the service runs for a caller: those that need root to
/// trace a process of theirs, and the course's decisions. Never `watch`
/// (an exporter of the machine), `time` or `workload` (commands to run),
/// `grade` or `course` (the instructor's).
fn served(command: &Command) -> bool {
    matches!(
        command,
        Command::Ps(_)
            | Command::Top(_)
            | Command::Diagnose(_)
            | Command::Profile(_)
            | Command::Offcpu(_)
            | Command::Faults(_)
            | Command::Syscalls(_)
            | Command::Iosnoop(_)
            | Command::ExecTrace(_)
            | Command::Execsnoop(_)
            | Command::Check(_)
            | Command::Lab(_)
            | Command::Answer(_)
    )
}

/// Run `command` through the service when this kdiag may not trace (not
/// root, without CAP_BPF and CAP_PERFMON) and a service listens: the
/// run's exit code; None to run it here.
pub fn forward(command: &Command) -> anyhow::Result<Option<u8>> {
    if !client::needed() || !served(command) {
        return Ok(None);
    }
    let Some(path) = client::socket() else {
        return Ok(None);
    };
    let argv = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| error::usage("the kdiag service takes arguments in UTF-8 only"))?;
    client::run(&path, argv).map(Some)
}

pub fn run(args: Args, app: fn() -> clap::Command) -> anyhow::Result<u8> {
    // Root's, never a learner's sudo rule: it binds and replaces sockets.
    policy::require_admin("kdiag serve")?;
    let listening = listener::listen(&args.socket)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let limits = server::Limits {
        per_user: args.per_user.into(),
        total: 256,
        runs_per_minute: args.per_minute.into(),
        request_deadline: Duration::from_secs(5),
    };
    let decide = Arc::new(move |peer: &Peer, argv: &[String]| decide(app, peer, argv));
    eprintln!(
        "kdiag serve: listening on {}",
        match &listening.bound {
            Some(p) => p.display().to_string(),
            None => "the socket systemd passed".into(),
        }
    );
    server::serve(&listening.listener, limits, decide, &stop)?;
    Ok(0)
}

/// What to run for `peer` asking `argv`: the command line parsed as the
/// client's was, a served command, no `-- CMD` (it would run outside the
/// caller's session and container), the policy's asks for the peer's uid;
/// `ps` narrowed to the caller's processes.
fn decide(
    app: fn() -> clap::Command,
    peer: &Peer,
    argv: &[String],
) -> Result<Vec<String>, (String, u8)> {
    let refused = |msg: String| (msg, error::USAGE);
    let matches = app()
        .try_get_matches_from(std::iter::once("kdiag").chain(argv.iter().map(String::as_str)))
        .map_err(|e| refused(e.to_string()))?;
    let command = Command::from_arg_matches(&matches).map_err(|e| refused(e.to_string()))?;
    if !served(&command) {
        return Err(refused(format!(
            "the kdiag service does not run `kdiag {}` for users",
            argv.first().map_or("", String::as_str)
        )));
    }
    if argv.iter().any(|a| a == "--") {
        return Err(refused(
            "the kdiag service traces your processes, it does not start them: start the \
             command yourself and name it with -p PID"
                .into(),
        ));
    }
    if !peer.shares_pid_namespace() {
        return Err(refused(
            "the kdiag service sees the host's PIDs and yours are another PID namespace's (a \
             container's): run the container with the host's PIDs (podman --pid=host)"
                .into(),
        ));
    }
    policy::allow_peer(peer.uid, &super::learner_asks(&command))
        .map_err(|e| (format!("{e:#}"), error::exit_code(&e)))?;
    let mut argv = argv.to_vec();
    if let Command::Ps(a) = &command
        && a.user.is_none()
    {
        argv.extend(["--user".into(), peer.uid.to_string()]);
    }
    Ok(argv)
}
