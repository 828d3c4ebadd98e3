//! Pure functions over model data: classification, folding, pattern
//! detection, rules. Unit-tested on fixtures without privileges.

pub mod io_filter;
pub mod io_pattern;
