//! Instruments' own pipelines, stage by stage (collect → model).

pub mod profile;
