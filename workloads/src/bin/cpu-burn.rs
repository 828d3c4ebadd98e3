//! The cpu-burn workload: see the library module kdiag_workloads::cpu_burn.

fn main() {
    kdiag_workloads::main::<kdiag_workloads::cpu_burn::CpuBurn>()
}
