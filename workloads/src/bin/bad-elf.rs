//! The bad-elf generator: see the library module kdiag_workloads::bad_elf.

fn main() -> std::process::ExitCode {
    kdiag_workloads::bad_elf::main()
}
