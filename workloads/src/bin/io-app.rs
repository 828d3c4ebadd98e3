//! The io-app workload: see the library module kdiag_workloads::io_app.

fn main() {
    kdiag_workloads::main::<kdiag_workloads::io_app::IoApp>()
}
