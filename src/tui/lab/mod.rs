//! `kdiag lab`'s interactive app: the steps on the side, the step's text
//! and questions, and the step's live instrument panel, fed by collector
//! threads in the same process (bottom-style: one message channel, redraw
//! on events). `state.rs` is the pure model and its `update`, `view.rs`
//! draws it, `panels/` one file per instrument panel, `markdown.rs` the
//! step texts, `app.rs` the threads and the loop, `plain.rs` the same lab
//! one command a line. The lab engine stays outside: the front end in
//! commands/lab/session.rs hands it in as a `Driver`.

pub mod app;
pub mod collect;
pub mod event;
pub mod markdown;
pub mod panels;
pub mod plain;
pub mod state;
pub mod view;
