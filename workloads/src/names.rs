//! Seed-dependent function names. A workload compiles several functions
//! with the same signature and work but different names, and its seed picks
//! the one that does the work, so a profile of one learner's run shows a
//! name that another learner's does not.
//!
//! Each copy is `#[inline(never)]` and differs from the others by a salt
//! derived from its name (kept opaque with `black_box`): identical bodies
//! could otherwise be merged into one address with several names, and a
//! profiler would name the wrong one. Frame pointers are on for the whole
//! workspace (.cargo/config.toml), so stacks walk through them.

/// A per-name constant, computed at compile time.
pub const fn salt(name: &str) -> u64 {
    let b = name.as_bytes();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < b.len() {
        h = (h ^ b[i] as u64).wrapping_mul(0x100_0000_01b3);
        i += 1;
    }
    h | 1
}

/// `named_fns! { fn [a, b, c](x: u64) -> u64, |salt| { body } }` defines
/// `a`, `b` and `c` (each with `salt`, its own constant, in scope), plus
/// `NAMES` (their names, in order) and `FNS` (pointers to them, same order).
/// Use it once per module.
#[macro_export]
macro_rules! named_fns {
    (fn [$($name:ident),+ $(,)?] $params:tt -> $ret:ty, |$salt:ident| $body:block) => {
        $( $crate::named_fns!(@one $name $params -> $ret, |$salt| $body); )+
        /// The functions' names, as profilers show them (after the module path).
        pub const NAMES: &[&str] = &[$(stringify!($name)),+];
        /// The functions, in the order of `NAMES`.
        pub const FNS: &[$crate::named_fns!(@type $params -> $ret)] = &[$($name),+];
    };
    (@one $name:ident ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty, |$salt:ident| $body:block) => {
        #[inline(never)]
        pub fn $name($($arg: $ty),*) -> $ret {
            #[allow(unused_variables)]
            let $salt: u64 = ::std::hint::black_box($crate::names::salt(stringify!($name)));
            $body
        }
    };
    (@type ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty) => {
        fn($($ty),*) -> $ret
    };
}

#[cfg(test)]
mod tests {
    mod demo {
        crate::named_fns! {
            fn [one, two, three](x: u64) -> u64, |salt| { x.wrapping_mul(salt) }
        }
    }

    #[test]
    fn distinct_functions_in_order() {
        assert_eq!(demo::NAMES, ["one", "two", "three"]);
        let results: Vec<u64> = demo::FNS.iter().map(|f| f(3)).collect();
        assert_eq!(results[0], 3u64.wrapping_mul(super::salt("one")));
        assert!(results[0] != results[1] && results[1] != results[2]);
        let addrs: Vec<usize> = demo::FNS.iter().map(|f| *f as usize).collect();
        assert!(addrs[0] != addrs[1] && addrs[1] != addrs[2]);
    }
}
