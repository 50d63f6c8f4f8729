//! Clause values parsed once: timestamps (RFC 3339 strings, Unix milliseconds) and
//! semantic versions, by the rules of LaunchDarkly's Go evaluator (`ldmodel/parse_time.go`,
//! `ldmodel/parse_values.go`, and `github.com/launchdarkly/go-semver` in its
//! "allow missing minor and patch" mode).

use std::cmp::Ordering;

/// A timestamp as nanoseconds since the Unix epoch.
pub(crate) type Nanos = i128;

/// A JSON number of Unix milliseconds as a timestamp (truncated to whole milliseconds,
/// as Go's `time.Unix(0, int64(ms) * 1e6)`).
pub(crate) fn millis(ms: f64) -> Nanos {
    // `as` saturates; NaN is 0.
    i128::from(ms as i64) * 1_000_000
}

/// An RFC 3339 date-time (`2024-01-02T03:04:05.123Z`, `…+01:00`; `T`/`t` and `Z`/`z`;
/// a one-digit hour; up to 9 fraction digits) as a timestamp. Out-of-range days and
/// leap seconds roll over as Go's `time.Date` does.
pub(crate) fn rfc3339(s: &str) -> Option<Nanos> {
    if !s.is_ascii() {
        return None;
    }
    let mut scan = Scanner { s: s.as_bytes() };
    let (year, _) = scan.field(|c| c == b'-', false, 4, 4, 0, 9999)?;
    let (month, _) = scan.field(|c| c == b'-', false, 2, 2, 1, 12)?;
    let (day, _) = scan.field(|c| c == b'T' || c == b't', false, 2, 2, 1, 31)?;
    let (hour, _) = scan.field(|c| c == b':', false, 1, 2, 0, 23)?;
    let (minute, _) = scan.field(|c| c == b':', false, 2, 2, 0, 59)?;
    let end_of_seconds = |c| matches!(c, b'.' | b'Z' | b'z' | b'+' | b'-');
    let (second, mut term) = scan.field(end_of_seconds, false, 2, 2, 0, 60)?;
    let mut nanos: i64 = 0;
    if term == Some(b'.') {
        let (fraction, t) = scan.until(|c| matches!(c, b'Z' | b'z' | b'+' | b'-'));
        term = t;
        if term.is_none() || fraction.len() > 9 {
            return None;
        }
        nanos = positive(fraction)?;
        for _ in fraction.len()..9 {
            nanos *= 10;
        }
    }
    let mut offset_seconds: i64 = 0;
    if let Some(sign @ (b'+' | b'-')) = term {
        let (hours, _) = scan.field(|c| c == b':', false, 2, 2, 0, 99)?;
        let (minutes, _) = scan.field(|_| false, true, 2, 2, 0, 59)?;
        offset_seconds = (minutes + hours * 60) * 60;
        if sign == b'+' {
            offset_seconds = -offset_seconds;
        }
    }
    let days = days_from_civil(year, month, 1) + (day - 1);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second + offset_seconds;
    Some(Nanos::from(seconds) * 1_000_000_000 + Nanos::from(nanos))
}

/// Days from 1970-01-01 to `y-m-d` (proleptic Gregorian; Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Decimal digits only (any length, leading zeros allowed), as Go's time parser reads.
fn positive(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 18 {
        return None;
    }
    s.iter().try_fold(0i64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
    })
}

/// Go's `simpleASCIIScanner`: read up to a terminator.
struct Scanner<'a> {
    s: &'a [u8],
}

impl<'a> Scanner<'a> {
    /// The bytes before the first terminator, and the terminator (`None`: end of input).
    fn until(&mut self, term: impl Fn(u8) -> bool) -> (&'a [u8], Option<u8>) {
        match self.s.iter().position(|&c| term(c)) {
            Some(i) => {
                let (head, rest) = self.s.split_at(i);
                self.s = &rest[1..];
                (head, Some(rest[0]))
            }
            None => {
                let head = self.s;
                self.s = &[];
                (head, None)
            }
        }
    }

    /// Go's `parseDateTimeNumericField`.
    fn field(
        &mut self,
        term: impl Fn(u8) -> bool,
        eof_ok: bool,
        min_len: usize,
        max_len: usize,
        min: i64,
        max: i64,
    ) -> Option<(i64, Option<u8>)> {
        let (s, t) = self.until(term);
        if s.is_empty() || (!eof_ok && t.is_none()) || s.len() < min_len || s.len() > max_len {
            return None;
        }
        let n = positive(s)?;
        (min..=max).contains(&n).then_some((n, t))
    }
}

/// A semantic version, compared by precedence (build metadata ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SemVer {
    major: u64,
    minor: u64,
    patch: u64,
    prerelease: Box<str>,
}

impl SemVer {
    /// Parse `s`: `major[.minor[.patch]][-prerelease][+build]`, numbers without leading
    /// zeros; a missing minor or patch is 0.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        if !s.is_ascii() {
            return None;
        }
        let (core, build) = match s.split_once('+') {
            Some((core, build)) => (core, Some(build)),
            None => (s, None),
        };
        let (numbers, prerelease) = match core.split_once('-') {
            Some((numbers, pre)) => (numbers, Some(pre)),
            None => (core, None),
        };
        let mut parts = numbers.split('.');
        let major = number(parts.next()?)?;
        let minor = parts.next().map_or(Some(0), number)?;
        let patch = parts.next().map_or(Some(0), number)?;
        if parts.next().is_some() {
            return None;
        }
        if let Some(pre) = prerelease
            && !pre.split('.').all(|id| {
                !id.is_empty()
                    && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
                    && !(id.len() > 1
                        && id.bytes().all(|c| c.is_ascii_digit())
                        && id.starts_with('0'))
            })
        {
            return None;
        }
        if let Some(build) = build
            && !build.split('.').all(|id| {
                !id.is_empty() && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            })
        {
            return None;
        }
        Some(Self {
            major,
            minor,
            patch,
            prerelease: prerelease.unwrap_or("").into(),
        })
    }

    /// Precedence order (semver 2.0 §11).
    pub(crate) fn precedence(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(
                || match (self.prerelease.is_empty(), other.prerelease.is_empty()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => prerelease_order(&self.prerelease, &other.prerelease),
                },
            )
    }
}

/// A version number: digits, no leading zero (but `0` itself).
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

fn prerelease_order(a: &str, b: &str) -> Ordering {
    let mut a = a.split('.');
    let mut b = b.split('.');
    loop {
        match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let order = match (number(x), number(y)) {
                    (Some(x), Some(y)) => x.cmp(&y),
                    (Some(_), None) => Ordering::Less,
                    (None, Some(_)) => Ordering::Greater,
                    (None, None) => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_as_go_reads_it() {
        let epoch = rfc3339("1970-01-01T00:00:00Z").unwrap();
        assert_eq!(epoch, 0);
        assert_eq!(rfc3339("1970-01-01T00:00:01.5Z"), Some(1_500_000_000));
        assert_eq!(rfc3339("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(rfc3339("1969-12-31t23:00:00-01:00"), Some(0));
        assert_eq!(rfc3339("1970-01-01T1:00:00z"), Some(3_600_000_000_000));
        assert_eq!(
            rfc3339("2017-12-06T00:00:00.000-07:00"),
            Some(Nanos::from(1_512_543_600_000i64) * 1_000_000)
        );
        // Go's time.Date rolls February 30th over to March 1st/2nd.
        assert_eq!(
            rfc3339("2021-02-29T00:00:00Z"),
            rfc3339("2021-03-01T00:00:00Z")
        );
        for bad in [
            "",
            "2017-12-06",
            "2017-12-06T00:00:00",
            "2017-12-06T00:00Z",
            "17-12-06T00:00:00Z",
            "2017-13-06T00:00:00Z",
            "2017-12-06T00:00:00.0123456789Z",
            "2017-12-06T00:00:00+0100",
            "x2017-12-06T00:00:00Z",
            "2017-12-06T00:00:00.Z",
        ] {
            assert_eq!(rfc3339(bad), None, "{bad}");
        }
        assert_eq!(millis(1.9), 1_000_000);
        assert_eq!(millis(-1.0), -1_000_000);
    }

    #[test]
    fn semver_with_missing_minor_and_patch() {
        let v = |s| SemVer::parse(s).unwrap_or_else(|| panic!("{s}"));
        assert_eq!(v("2").precedence(&v("2.0.0")), Ordering::Equal);
        assert_eq!(v("2.1").precedence(&v("2.1.0")), Ordering::Equal);
        assert_eq!(v("2.0.0-rc.1").precedence(&v("2.0.0")), Ordering::Less);
        assert_eq!(
            v("2.0.0-rc.1").precedence(&v("2.0.0-rc.beta")),
            Ordering::Less
        );
        assert_eq!(
            v("2.0.0-rc.2").precedence(&v("2.0.0-rc.10")),
            Ordering::Less
        );
        assert_eq!(v("2.0.0-rc").precedence(&v("2.0.0-rc.1")), Ordering::Less);
        assert_eq!(v("2.0.0+build").precedence(&v("2.0.0")), Ordering::Equal);
        assert_eq!(v("2-rc1").precedence(&v("2.0.0-rc1")), Ordering::Equal);
        for bad in [
            "",
            "v2",
            "2.",
            "02.0.0",
            "2.0.0.0",
            "2.0.0-",
            "2.0.0-01",
            "2.0.0+",
            "a.b.c",
            "2.0.0-a..b",
        ] {
            assert_eq!(SemVer::parse(bad), None, "{bad}");
        }
    }
}
