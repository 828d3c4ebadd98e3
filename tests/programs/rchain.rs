use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn rchain_leaf(n: u64) -> u64 {
    let mut x = n;
    for _ in 0..2000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    }
    black_box(x)
}
#[inline(never)]
fn rchain_d(n: u64) -> u64 { black_box(rchain_leaf(n + 1)) ^ 3 }
#[inline(never)]
fn rchain_c(n: u64) -> u64 { black_box(rchain_d(n * 3)) + 1 }
#[inline(never)]
fn rchain_b(n: u64) -> u64 { black_box(rchain_c(n + 7)) ^ 5 }
#[inline(never)]
fn rchain_a(n: u64) -> u64 { black_box(rchain_b(n ^ 5)) + 2 }

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut acc = 0u64;
    while Instant::now() < end {
        for i in 0..1000 {
            acc = acc.wrapping_add(rchain_a(acc + i));
        }
    }
    // Kept so the loop is not optimised away; exit 0, as profile passes the status on.
    std::hint::black_box(acc);
}
