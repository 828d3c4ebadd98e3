//! The ratatui front ends, drawing the same model data as `render`.
