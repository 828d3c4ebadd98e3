//! The memory workload: see the library module kdiag_workloads::memory.

fn main() {
    kdiag_workloads::main::<kdiag_workloads::memory::Memory>()
}
