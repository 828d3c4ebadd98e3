//! The io-stall workload: see the library module kdiag_workloads::io_stall.

fn main() {
    kdiag_workloads::main::<kdiag_workloads::io_stall::IoStall>()
}
