//! The mem-leak workload: see the library module kdiag_workloads::mem_leak.

fn main() {
    kdiag_workloads::main::<kdiag_workloads::mem_leak::MemLeak>()
}
