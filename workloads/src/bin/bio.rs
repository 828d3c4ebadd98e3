//! The bio workload: see the library module kdiag_workloads::bio.

fn main() {
    kdiag_workloads::main::<kdiag_workloads::bio::Bio>()
}
