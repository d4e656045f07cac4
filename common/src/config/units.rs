//! The value types settings are written in: byte counts and spans of time with units, a
//! secret that never prints, and the conversions from what a flag, a variable or a file says
//! to what a node uses.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A byte count: a number, optionally with a unit (`15GiB`, `22.5 GiB`, `512MiB`, `80GB`;
/// binary `KiB`..`TiB`, decimal `KB`..`TB`, `B`).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let (number, unit) = split_unit(text);
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count"))?;
    let bytes = value * scale as f64;
    // Every byte setting lands in an i64 somewhere (NATS limits are signed).
    if !bytes.is_finite() || bytes < 0.0 || bytes > i64::MAX as f64 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as u64)
}

/// A span of time: a number of seconds, or a number with a unit (`500ms`, `90s`, `10m`, `1h`,
/// `7d`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = split_unit(text);
    let scale = match unit.to_ascii_lowercase().as_str() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h, d)")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a span of time"))?;
    Duration::try_from_secs_f64(value * scale).map_err(|_| format!("{text:?} is out of range"))
}

fn split_unit(text: &str) -> (&str, &str) {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    (&t[..split], t[split..].trim())
}

/// How a byte or time setting is written in a file: a plain number (bytes; seconds) or a
/// string with a unit.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Number(u64),
    Text(String),
}

/// A byte count as a flag, a variable or a file gives it ([`parse_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl FromStr for Bytes {
    type Err = String;
    fn from_str(text: &str) -> Result<Bytes, String> {
        parse_bytes(text).map(Bytes)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        match Written::deserialize(d)? {
            Written::Number(n) => Ok(Bytes(n)),
            Written::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// A span of time as a flag, a variable or a file gives it ([`parse_duration`]; a plain
/// number is seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

impl Span {
    pub const fn secs(secs: u64) -> Span {
        Span(Duration::from_secs(secs))
    }
}

impl FromStr for Span {
    type Err = String;
    fn from_str(text: &str) -> Result<Span, String> {
        parse_duration(text).map(Span)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        match Written::deserialize(d)? {
            Written::Number(n) => Ok(Span::secs(n)),
            Written::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// A password: kept out of `Debug` and `Serialize`, since configs are logged and printed by
/// `--check-config`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Secret {
        Secret(text)
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(text: &str) -> Result<Secret, Self::Err> {
        Ok(Secret(text.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("<redacted>")
    }
}

/// What a node uses, made from what a setting was written as.
pub trait FromArg<A> {
    fn from_arg(arg: A) -> Self;
}

impl<T> FromArg<T> for T {
    fn from_arg(arg: T) -> T {
        arg
    }
}

impl<T> FromArg<T> for Option<T> {
    fn from_arg(arg: T) -> Option<T> {
        Some(arg)
    }
}

impl FromArg<Span> for Duration {
    fn from_arg(arg: Span) -> Duration {
        arg.0
    }
}

impl FromArg<Bytes> for u64 {
    fn from_arg(arg: Bytes) -> u64 {
        arg.0
    }
}

impl FromArg<Bytes> for Option<u64> {
    fn from_arg(arg: Bytes) -> Option<u64> {
        Some(arg.0)
    }
}

impl FromArg<Bytes> for Option<i64> {
    fn from_arg(arg: Bytes) -> Option<i64> {
        // parse_bytes bounds every count by i64::MAX.
        Some(i64::try_from(arg.0).unwrap_or(i64::MAX))
    }
}

impl FromArg<Bytes> for usize {
    fn from_arg(arg: Bytes) -> usize {
        usize::try_from(arg.0).unwrap_or(usize::MAX)
    }
}

impl FromArg<Bytes> for u32 {
    fn from_arg(arg: Bytes) -> u32 {
        u32::try_from(arg.0).unwrap_or(u32::MAX)
    }
}

/// A setting's own check, with the closure's argument typed by the setting.
pub fn holds<T>(value: &T, check: impl Fn(&T) -> bool) -> bool {
    check(value)
}

/// A setting from a second environment name: another program's name for it, or an old one of
/// ours (`old_name_of`: the setting it names now, said on stderr when used). One that does not
/// parse is named on stderr and left out, as if unset.
pub fn other_env<T: FromStr>(name: &str, old_name_of: Option<&str>) -> Option<T>
where
    T::Err: fmt::Display,
{
    let text = std::env::var(name).ok().filter(|v| !v.is_empty())?;
    if let Some(setting) = old_name_of {
        eprintln!("warning: {name} is an old name of setting {setting}; it is still read");
    }
    match text.parse() {
        Ok(value) => Some(value),
        Err(e) => {
            eprintln!("warning: {name}={text:?} ignored: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_units() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("15GiB"), Ok(15 << 30));
        assert_eq!(parse_bytes("22.5 GiB"), Ok(45 << 29));
        assert_eq!(parse_bytes("80GB"), Ok(80_000_000_000));
        assert_eq!(parse_bytes("512mib"), Ok(512 << 20));
        assert!(parse_bytes("15 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_bytes("GiB").is_err());
        assert!(parse_bytes("-1GiB").is_err());
        assert!(parse_bytes("9TiB").is_ok() && parse_bytes("9000000TiB").is_err());
    }

    #[test]
    fn spans_take_units_and_bare_seconds() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert!(parse_duration("1 fortnight").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1e400").is_err());
    }

    #[test]
    fn secrets_never_print() {
        let secret = Secret::from("hunter2".to_owned());
        assert_eq!(secret.expose(), "hunter2");
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert!(!serde_json::to_string(&secret).unwrap().contains("hunter2"));
    }
}
