//! Plain data types shared by collectors, analyses and renderers. No I/O.

pub mod block;
