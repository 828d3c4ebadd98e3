//! Pure functions over model data: classification, folding, pattern
//! detection, rules. Unit-tested on fixtures without privileges.
pub mod fold;
