//! Seeds are tokens: any string of `[A-Za-z0-9_-]`, 1 to 64 characters
//! (numbers are tokens too). The parameters come from a hash of the token's
//! bytes, so the same token gives the same parameters on every machine and
//! Rust version. The token `0` (and no `--seed`) is the documented default
//! layout, the original lab's values.
//!
//! A *course token* (`xxxx-xxxx-xxxx`, lowercase Crockford base32) is what
//! kdiag's course code gives each learner; its truth is for the instructor,
//! so no command a learner can run prints it (see [`is_course_token`]).

/// The default layout's token.
pub const DEFAULT: &str = "0";
/// Lowercase Crockford base32: no i, l, o, u.
const CROCKFORD: &[u8] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// A validated seed token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed(String);

impl Default for Seed {
    fn default() -> Seed {
        Seed(DEFAULT.to_string())
    }
}

impl Seed {
    /// Check `token`'s form; the error says what a token may be.
    pub fn parse(token: &str) -> Result<Seed, String> {
        let ok = (1..=64).contains(&token.len())
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(Seed(token.to_string()))
        } else {
            Err(format!(
                "--seed: bad token {token:?}: use 1 to 64 letters, digits, '_' or '-'"
            ))
        }
    }

    pub fn token(&self) -> &str {
        &self.0
    }

    /// The documented default layout (no `--seed`, or `--seed 0`).
    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT
    }

    /// A learner's course token, whose truth only the instructor may see.
    pub fn is_course(&self) -> bool {
        is_course_token(&self.0)
    }

    /// 64 bits from the token's bytes: FNV-1a, then SplitMix64's finaliser
    /// so that tokens differing in one character land far apart.
    pub fn hash(&self) -> u64 {
        mix(fnv1a(self.0.as_bytes()))
    }

    /// A generator for this seed, salted per use (see [`Rng::new`]).
    pub fn rng(&self, salt: &str) -> Rng {
        Rng::new(self.hash(), salt)
    }
}

/// True for a course token: exactly `xxxx-xxxx-xxxx` in lowercase Crockford
/// base32 (`0123456789abcdefghjkmnpqrstvwxyz`).
pub fn is_course_token(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 14
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 9 => *c == b'-',
            _ => CROCKFORD.contains(c),
        })
}

/// The refusal every learner-facing `--describe` gives for a course token.
pub const COURSE_REFUSAL: &str =
    "the truth of a course seed is for the instructor: kdiag lab solution --course FILE";

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in bytes {
        h = (h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small deterministic PRNG (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`, salted per use so that parameters drawn for
    /// different purposes do not move together.
    pub fn new(seed: u64, salt: &str) -> Rng {
        Rng(seed ^ fnv1a(salt.as_bytes()))
    }

    /// A generator with exactly this state (bad-elf's default layout).
    pub fn from_state(state: u64) -> Rng {
        Rng(state)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// One element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let a: Vec<u64> = (0..5).map(|_| Rng::new(7, "x").range(3, 9)).collect();
        let b: Vec<u64> = (0..5).map(|_| Rng::new(7, "x").range(3, 9)).collect();
        assert_eq!(a, b);
        let mut r = Rng::new(1, "y");
        assert!(
            (0..1000)
                .map(|_| r.range(3, 9))
                .all(|v| (3..=9).contains(&v))
        );
        assert_ne!(Rng::new(1, "y").next_u64(), Rng::new(2, "y").next_u64());
    }

    #[test]
    fn tokens() {
        for ok in ["0", "7", "alice", "a_b-C9", &"x".repeat(64)] {
            assert!(Seed::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "é", "a/b", "a.b", &"x".repeat(65)] {
            assert!(Seed::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Seed::default().is_default() && Seed::parse("0").unwrap().is_default());
        assert!(!Seed::parse("00").unwrap().is_default());
        // Same bytes, same hash; a one-character change moves it.
        let h = |t: &str| Seed::parse(t).unwrap().hash();
        assert_eq!(h("alice"), h("alice"));
        assert_ne!(h("alice"), h("alicf"));
        assert_ne!(h("7"), h("07"));
    }

    #[test]
    fn course_tokens_have_one_exact_form() {
        for yes in ["abcd-efgh-jkmn", "0000-0000-0000", "zzzz-9y8x-pqrs"] {
            assert!(is_course_token(yes), "{yes}");
            assert!(Seed::parse(yes).unwrap().is_course());
        }
        for no in [
            "abcd-efgh-jkm",   // short
            "abcd-efgh-jkmnp", // long
            "ABCD-EFGH-JKMN",  // uppercase
            "abcd-efgh-ijkl",  // i and l are not Crockford
            "abcd-efgu-jkmn",  // nor u
            "abcd_efgh_jkmn",
            "abcdefgh-jkmn-",
            "7",
        ] {
            assert!(!is_course_token(no), "{no}");
        }
    }
}
