//! Where a server listens: `host:port` (TCP) or `unix:PATH` (also `unix://PATH`, the form
//! Curio's `[Cuzk] Address` takes). Parsed from flags, the environment and config files alike.

use std::path::PathBuf;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ListenAddr {
    Tcp(String),
    Unix(PathBuf),
}

impl FromStr for ListenAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<ListenAddr, String> {
        if let Some(path) = s
            .strip_prefix("unix://")
            .or_else(|| s.strip_prefix("unix:"))
        {
            if path.is_empty() {
                return Err(format!("{s}: the unix socket path is empty"));
            }
            return Ok(ListenAddr::Unix(path.into()));
        }
        match s.rsplit_once(':') {
            Some((_, port)) if port.parse::<u16>().is_ok() => Ok(ListenAddr::Tcp(s.to_owned())),
            _ => Err(format!("{s}: expected host:port or unix:PATH")),
        }
    }
}

impl TryFrom<String> for ListenAddr {
    type Error = String;
    fn try_from(s: String) -> Result<ListenAddr, String> {
        s.parse()
    }
}

impl From<ListenAddr> for String {
    fn from(addr: ListenAddr) -> String {
        addr.to_string()
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => f.write_str(addr),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse() {
        assert_eq!(
            "127.0.0.1:9820".parse(),
            Ok(ListenAddr::Tcp("127.0.0.1:9820".into()))
        );
        assert_eq!("[::1]:0".parse(), Ok(ListenAddr::Tcp("[::1]:0".into())));
        assert_eq!(
            "unix:/run/cuzk.sock".parse(),
            Ok(ListenAddr::Unix("/run/cuzk.sock".into()))
        );
        assert_eq!(
            "unix:///run/cuzk.sock".parse(),
            Ok(ListenAddr::Unix("/run/cuzk.sock".into()))
        );
        assert!("unix:".parse::<ListenAddr>().is_err());
        assert!("localhost".parse::<ListenAddr>().is_err());
        assert!("localhost:http".parse::<ListenAddr>().is_err());
    }
}
