//! The scheduling workload: see the library module kdiag_workloads::scheduling.

fn main() {
    kdiag_workloads::main::<kdiag_workloads::scheduling::Scheduling>()
}
