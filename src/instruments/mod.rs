pub mod offcpu;
