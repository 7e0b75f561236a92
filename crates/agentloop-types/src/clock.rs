//! Time and identifiers, with a fixed clock for byte-stable tests.
//!
//! `AGENTLOOP_NOW=2026-01-01T00:00:00Z` freezes the clock: every timestamp is that instant, every
//! measured duration is 0 and run ids are derived from it, so two runs write identical traces.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

fn fixed() -> Option<SystemTime> {
    let s = std::env::var("AGENTLOOP_NOW").ok()?;
    humantime::parse_rfc3339_weak(&s).ok()
}

pub fn is_fixed() -> bool {
    fixed().is_some()
}

pub fn now() -> SystemTime {
    fixed().unwrap_or_else(SystemTime::now)
}

/// RFC 3339 with millisecond precision, UTC.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

pub fn now_rfc3339() -> String {
    rfc3339(now())
}

pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s).ok()
}

/// Measures elapsed wall time; always 0 under a fixed clock.
pub struct Stopwatch(Instant);

impl Stopwatch {
    pub fn start() -> Self {
        Stopwatch(Instant::now())
    }
    pub fn elapsed(&self) -> Duration {
        if is_fixed() {
            Duration::ZERO
        } else {
            self.0.elapsed()
        }
    }
    pub fn ms(&self) -> u64 {
        self.elapsed().as_millis() as u64
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A new ULID run id; deterministic under a fixed clock.
pub fn new_run_id() -> String {
    match fixed() {
        Some(t) => {
            let ms = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
            let seq = SEQ.fetch_add(1, Ordering::Relaxed) as u128;
            let salt = std::env::var("AGENTLOOP_SEED").ok().and_then(|s| s.parse::<u128>().ok()).unwrap_or(0);
            ulid::Ulid::from_parts(ms, (salt << 16) + seq).to_string()
        }
        None => ulid::Ulid::new().to_string(),
    }
}

/// Parses "90", "90s", "10m", "1h30m" into a duration.
pub fn parse_duration(s: &str) -> Result<Duration, BadDuration> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    humantime::parse_duration(s).map_err(|source| BadDuration { text: s.to_string(), source })
}

/// Text that is no duration, with the parser's reason.
#[derive(Debug, Clone, PartialEq)]
pub struct BadDuration {
    pub text: String,
    source: humantime::DurationError,
}

impl std::fmt::Display for BadDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is not a duration ({}); use e.g. 90, 90s, 10m or 1h", self.text, self.source)
    }
}

impl std::error::Error for BadDuration {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A duration written as seconds (`90`) or a human string (`"90s"`, `"10m"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dur(pub std::time::Duration);

impl Dur {
    pub const fn secs(n: u64) -> Self {
        Dur(std::time::Duration::from_secs(n))
    }
}

impl serde::Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(self.0).to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            F(f64),
            S(String),
        }
        match <Raw as serde::Deserialize>::deserialize(d)? {
            Raw::N(n) => Ok(Dur::secs(n)),
            // `try_`: a number too large for a duration is refused, never a panic.
            Raw::F(f) => std::time::Duration::try_from_secs_f64(f)
                .map(Dur)
                .map_err(|_| serde::de::Error::custom(format!("{f} is not a duration (seconds, at least 0)"))),
            Raw::S(s) => parse_duration(&s).map(Dur).map_err(serde::de::Error::custom),
        }
    }
}
