//! Shared pieces of the bundled workloads: scratch directories, seeds and the
//! ground truth each workload describes with `--describe`.
