//! Times as the formats write them (RFC 3339) and as condense computes with them (milliseconds
//! since the Unix epoch, UTC).
//!
//! Only two rules need times — time-based microcompact (how long since the previous request) and
//! the replay of a recorded session — and both need just this conversion, so it lives here rather
//! than pulling a calendar crate into every build.

/// Milliseconds since the Unix epoch of an RFC 3339 time (`2025-07-16T19:34:48.385Z`,
/// `2025-07-16T21:34:48+02:00`, a space instead of `T`, any number of fraction digits), or why it
/// is not one. Times before 1970 are refused: nothing condense reads is that old.
pub fn parse_rfc3339(text: &str) -> Result<u64, String> {
    let bad = |what: &str| format!("`{text}` is not an RFC 3339 time ({what})");
    let bytes = text.as_bytes();
    if bytes.len() < 20 {
        return Err(bad("too short: expected YYYY-MM-DDTHH:MM:SS and a zone"));
    }
    // `get`, not indexing: a multi-byte character may sit where a digit belongs.
    let number =
        |range: std::ops::Range<usize>, what: &str| number_in(text, range).ok_or_else(|| bad(what));
    if bytes[4] != b'-' || bytes[7] != b'-' || !matches!(bytes[10], b'T' | b't' | b' ') {
        return Err(bad("expected YYYY-MM-DDTHH:MM:SS"));
    }
    if bytes[13] != b':' || bytes[16] != b':' {
        return Err(bad("expected HH:MM:SS"));
    }
    let year = number(0..4, "year")?;
    let month = number(5..7, "month")?;
    let day = number(8..10, "day")?;
    let hour = number(11..13, "hour")?;
    let minute = number(14..16, "minute")?;
    // A leap second reads as the last millisecond of its minute.
    let second = number(17..19, "second")?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad("no such date"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("no such time of day"));
    }
    let mut rest = text.get(19..).ok_or_else(|| bad("expected a zone"))?;
    let mut millis = 0i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("a '.' without fraction digits"));
        }
        // Milliseconds: the first three digits, padded; finer digits do not matter here.
        let first: String = fraction[..digits.min(3)].chars().collect();
        millis = format!("{first:0<3}")
            .parse::<i64>()
            .map_err(|_| bad("fraction"))?;
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        zone if zone.len() == 6
            && matches!(zone.as_bytes()[0], b'+' | b'-')
            && zone.as_bytes()[3] == b':' =>
        {
            let hours = number_in(zone, 1..3).ok_or_else(|| bad("zone hours"))?;
            let minutes = number_in(zone, 4..6).ok_or_else(|| bad("zone minutes"))?;
            if hours > 23 || minutes > 59 {
                return Err(bad("no such zone offset"));
            }
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            sign * (hours * 60 + minutes)
        }
        _ => return Err(bad("expected Z or ±HH:MM after the time")),
    };
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second.min(59)
            - offset_minutes * 60;
    let millis = seconds * 1_000 + if second == 60 { 999 } else { millis };
    u64::try_from(millis).map_err(|_| bad("before 1970"))
}

/// The decimal number in `text[range]`, digits only (no sign, no spaces).
fn number_in(text: &str, range: std::ops::Range<usize>) -> Option<i64> {
    let digits = text.get(range)?;
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `YYYY-MM-DD` (UTC) of a time in milliseconds since the epoch.
pub fn date_of(ms: u64) -> String {
    let (year, month, day) = civil_from_days((ms / 86_400_000) as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of a time in milliseconds since the epoch: what reports print.
pub fn format_rfc3339(ms: u64) -> String {
    let of_day = ms % 86_400_000;
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        date_of(ms),
        of_day / 3_600_000,
        of_day / 60_000 % 60,
        of_day / 1_000 % 60,
        of_day % 1_000
    )
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn claude_code_timestamps_parse() {
        assert_eq!(
            parse_rfc3339("2025-07-16T19:34:48.385Z"),
            Ok(1_752_694_488_385)
        );
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_rfc3339("2025-07-16T21:34:48.385+02:00"),
            parse_rfc3339("2025-07-16T19:34:48.385Z")
        );
        assert_eq!(
            parse_rfc3339("2025-07-16 19:34:48.3851234z"),
            Ok(1_752_694_488_385)
        );
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00.5Z"), Ok(951_782_400_500));
    }

    #[test]
    fn what_is_not_a_time_says_why() {
        for (text, why) in [
            ("2025-07-16", "too short"),
            ("2025-13-01T00:00:00Z", "no such date"),
            ("2025-02-29T00:00:00Z", "no such date"),
            ("2025-07-16T24:00:00Z", "no such time"),
            ("2025-07-16T10:00:00", "too short"),
            ("2025-07-16T10:00:00+0200", "expected Z"),
            ("2025-07-16T10:00:00.Z", "fraction digits"),
            ("1969-12-31T23:59:59Z", "before 1970"),
            ("2025-07-1xT10:00:00Z", "day"),
            ("2025-07-16T10:00:00é", "expected Z"),
        ] {
            let error = parse_rfc3339(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
            assert!(error.contains(text), "{error}");
        }
    }

    #[test]
    fn dates_are_civil_dates() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(1_763_700_000_000), "2025-11-21");
        assert_eq!(date_of(951_782_400_000), "2000-02-29");
        assert_eq!(
            format_rfc3339(1_752_694_488_385),
            "2025-07-16T19:34:48.385Z"
        );
    }

    proptest! {
        #[test]
        fn formatting_and_parsing_are_inverse(ms in 0u64..8_000_000_000_000) {
            prop_assert_eq!(parse_rfc3339(&format_rfc3339(ms)), Ok(ms));
        }

        #[test]
        fn any_text_is_parsed_or_refused_without_panicking(text in "\\PC{0,40}") {
            let _ = parse_rfc3339(&text);
        }
    }
}
