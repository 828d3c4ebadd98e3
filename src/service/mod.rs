//! `kdiag serve` and its clients: a root service on a Unix socket that
//! traces for users who may not, deciding by who the kernel says is
//! calling (`sys::peer`). protocol.rs: the frames; listener.rs: the socket
//! (socket activation or bound by hand); server.rs: connections, limits and
//! the runs; client.rs: the unprivileged side. What a caller may ask is
//! `course::policy`'s, applied by `commands::serve`.

pub use crate::sys::peer::Peer;

pub mod client;
pub mod listener;
pub mod protocol;
pub mod server;
