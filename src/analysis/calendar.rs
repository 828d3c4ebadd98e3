//! Calendar dates from Unix time, without a date crate: ps's START column
//! and profile's timestamps.

/// Year, month, day, hour, minute of seconds since the epoch (proleptic
/// Gregorian, Howard Hinnant's days-to-civil).
pub fn civil(secs: i64) -> (i64, i64, i64, i64, i64) {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60)
}

/// `2026-11-22T07:02:28Z` for seconds since the epoch.
pub fn utc_iso8601(secs: i64) -> String {
    let (y, m, d, hh, mm) = civil(secs);
    format!(
        "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{:02}Z",
        secs.rem_euclid(60)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0));
        assert_eq!(civil(951_782_400), (2000, 2, 29, 0, 0));
        assert_eq!(utc_iso8601(1_795_418_548), "2026-11-23T07:22:28Z");
    }
}
