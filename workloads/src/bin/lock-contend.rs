//! The lock-contend workload: see the library module kdiag_workloads::lock_contend.

fn main() {
    kdiag_workloads::main::<kdiag_workloads::lock_contend::LockContend>()
}
