//! Who a caller is and what it may do. Three modes, from the settings:
//! - open (no `--auth-file`, no `--tls-client-ca`): anyone who reaches the port may do anything,
//!   as before there were clients;
//! - certified (`--tls-client-ca` alone): the TLS layer admits only certificates the CA signed,
//!   and each such client has every power;
//! - clients (`--auth-file`): each caller presents a bearer token (`authorization: Bearer …`)
//!   or a client certificate listed in the file, and may do what its powers allow.
//!
//! Powers: `submit` (SubmitProof, Prove), `high_priority` (a job at high priority: Curio's HIGH
//! or CRITICAL, or PoSt's default), `srs_admin` (PreloadSRS, EvictSRS), `cancel_any` (cancel any
//! job; without it a client cancels only the jobs it submitted). AwaitProof, GetStatus and
//! GetMetrics need a known caller only.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use tonic::Status;

use cuzk_wire::excerpt;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Fatal: the gateway does not start without its clients.
    #[error("cannot read the clients file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Fatal: the gateway does not start with a clients file it cannot trust.
    #[error("the clients file {path} is invalid: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Power {
    Submit,
    HighPriority,
    SrsAdmin,
    CancelAny,
}

impl Power {
    const ALL: [Power; 4] = [
        Power::Submit,
        Power::HighPriority,
        Power::SrsAdmin,
        Power::CancelAny,
    ];

    fn name(self) -> &'static str {
        match self {
            Power::Submit => "submit",
            Power::HighPriority => "high_priority",
            Power::SrsAdmin => "srs_admin",
            Power::CancelAny => "cancel_any",
        }
    }
}

/// A caller, once known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `None` when the gateway is open: nobody is named, and job ids carry no owner.
    name: Option<Arc<str>>,
    powers: Vec<Power>,
}

impl Caller {
    fn anyone() -> Caller {
        Caller {
            name: None,
            powers: Power::ALL.to_vec(),
        }
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn may(&self, power: Power) -> bool {
        self.powers.contains(&power)
    }

    /// `PERMISSION_DENIED` unless the caller has `power`; `what` names the refused act.
    pub fn require(&self, power: Power, what: &str) -> Result<(), Status> {
        if self.may(power) {
            return Ok(());
        }
        Err(Status::permission_denied(format!(
            "client {} may not {what}: it lacks the {} power",
            self.name().unwrap_or("(anonymous)"),
            power.name()
        )))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientsFile {
    #[serde(default)]
    client: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    token: Option<String>,
    cert_sha256: Option<String>,
    #[serde(default)]
    powers: Vec<Power>,
}

/// Shortest bearer token accepted: 128 bits as hex.
const MIN_TOKEN_LEN: usize = 32;
/// Longest client name: it shows in logs and refusals.
const MAX_NAME_LEN: usize = 64;

enum Mode {
    Open,
    Certified,
    Clients {
        /// By the SHA-256 of the token, so a lookup reveals nothing about near misses.
        tokens: HashMap<[u8; 32], Caller>,
        certs: HashMap<[u8; 32], Caller>,
    },
}

pub struct Access(Mode);

impl Access {
    pub fn open() -> Access {
        Access(Mode::Open)
    }

    /// The access the settings ask for: the clients in `auth_file`, else every client
    /// certificate the CA signed when `client_ca` is set, else anyone.
    pub fn load(auth_file: Option<&Path>, client_ca: bool) -> Result<Access, AuthError> {
        match auth_file {
            Some(path) => Access::clients(path),
            None if client_ca => Ok(Access(Mode::Certified)),
            None => Ok(Access::open()),
        }
    }

    pub fn is_open(&self) -> bool {
        matches!(self.0, Mode::Open)
    }

    /// Whether a caller may connect without a client certificate: one with a token may.
    pub fn certificates_optional(&self) -> bool {
        matches!(&self.0, Mode::Clients { tokens, .. } if !tokens.is_empty())
    }

    fn clients(path: &Path) -> Result<Access, AuthError> {
        let invalid = |message: String| AuthError::Invalid {
            path: path.to_owned(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
            path: path.to_owned(),
            source,
        })?;
        warn_if_readable_by_others(path);
        let file: ClientsFile = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if file.client.is_empty() {
            return Err(invalid("it names no [[client]]".into()));
        }
        let (mut tokens, mut certs, mut names) = (HashMap::new(), HashMap::new(), Vec::new());
        for entry in file.client {
            let name = entry.name;
            let named = name.len() <= MAX_NAME_LEN
                && !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !named {
                return Err(invalid(format!(
                    "client name {:?} is not 1-{MAX_NAME_LEN} characters of [A-Za-z0-9._-]",
                    excerpt(&name)
                )));
            }
            if names.contains(&name) {
                return Err(invalid(format!("client {name} is named twice")));
            }
            if entry.token.is_none() && entry.cert_sha256.is_none() {
                return Err(invalid(format!(
                    "client {name} has neither a token nor a cert_sha256"
                )));
            }
            let caller = Caller {
                name: Some(name.as_str().into()),
                powers: entry.powers,
            };
            if let Some(token) = entry.token {
                let usable =
                    token.len() >= MIN_TOKEN_LEN && token.bytes().all(|b| b.is_ascii_graphic());
                if !usable {
                    return Err(invalid(format!(
                        "client {name}'s token must be at least {MIN_TOKEN_LEN} printable ASCII characters"
                    )));
                }
                if tokens
                    .insert(sha256(token.as_bytes()), caller.clone())
                    .is_some()
                {
                    return Err(invalid(format!("client {name}'s token is another's too")));
                }
            }
            if let Some(fingerprint) = entry.cert_sha256 {
                let digest = fingerprint_bytes(&fingerprint).ok_or_else(|| {
                    invalid(format!(
                        "client {name}'s cert_sha256 is not 32 bytes of hex (colons allowed)"
                    ))
                })?;
                if certs.insert(digest, caller).is_some() {
                    return Err(invalid(format!(
                        "client {name}'s certificate is another's too"
                    )));
                }
            }
            names.push(name);
        }
        Ok(Access(Mode::Clients { tokens, certs }))
    }

    /// Who sent `request`: `UNAUTHENTICATED` unless the gateway is open or the caller shows a
    /// known token or client certificate.
    pub fn caller<T>(&self, request: &tonic::Request<T>) -> Result<Caller, Status> {
        let certificate = || {
            request
                .peer_certs()
                .and_then(|certs| certs.first().map(|c| sha256(c.as_ref())))
        };
        match &self.0 {
            Mode::Open => Ok(Caller::anyone()),
            Mode::Certified => match certificate() {
                Some(digest) => Ok(Caller {
                    name: Some(format!("cert-{}", hex::encode(&digest[..8])).into()),
                    powers: Power::ALL.to_vec(),
                }),
                None => Err(Status::unauthenticated(
                    "this gateway needs a client certificate",
                )),
            },
            Mode::Clients { tokens, certs } => {
                if let Some(header) = request.metadata().get("authorization") {
                    let token = header
                        .to_str()
                        .ok()
                        .and_then(|h| h.strip_prefix("Bearer "))
                        .ok_or_else(|| {
                            Status::unauthenticated(
                                "the authorization header is not `Bearer <token>`",
                            )
                        })?;
                    return tokens
                        .get(&sha256(token.as_bytes()))
                        .cloned()
                        .ok_or_else(|| Status::unauthenticated("unknown bearer token"));
                }
                match certificate() {
                    Some(digest) => certs.get(&digest).cloned().ok_or_else(|| {
                        Status::unauthenticated(format!(
                            "client certificate {} is not in the clients file",
                            hex::encode(digest)
                        ))
                    }),
                    None => Err(Status::unauthenticated(
                        "this gateway needs a bearer token (authorization: Bearer <token>) or a client certificate",
                    )),
                }
            }
        }
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// `ab:cd:…` or `abcd…`, 32 bytes.
fn fingerprint_bytes(text: &str) -> Option<[u8; 32]> {
    let digits: String = text.chars().filter(|c| *c != ':').collect();
    hex::decode(digits).ok()?.try_into().ok()
}

/// Tokens in a file others may read are tokens others may use.
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                "the clients file is readable by users other than its owner; chmod 600 it"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN_A: &str = "a-token-of-at-least-thirty-two-characters";

    fn file(text: &str) -> (tempfile::NamedTempFile, Result<Access, AuthError>) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        let access = Access::load(Some(f.path()), false);
        (f, access)
    }

    fn with_token(token: &str) -> tonic::Request<()> {
        let mut request = tonic::Request::new(());
        let value = format!("Bearer {token}").parse().unwrap();
        request.metadata_mut().insert("authorization", value);
        request
    }

    #[test]
    fn tokens_name_clients_and_their_powers() {
        let (_f, access) = file(&format!(
            "[[client]]\nname = \"curio\"\ntoken = \"{TOKEN_A}\"\npowers = [\"submit\", \"high_priority\"]\n\
             [[client]]\nname = \"ops\"\ncert_sha256 = \"{}\"\npowers = [\"srs_admin\", \"cancel_any\"]\n",
            "ab:".repeat(31) + "ab"
        ));
        let access = access.unwrap();
        assert!(!access.is_open() && access.certificates_optional());
        let curio = access.caller(&with_token(TOKEN_A)).unwrap();
        assert_eq!(curio.name(), Some("curio"));
        assert!(curio.may(Power::HighPriority) && !curio.may(Power::CancelAny));
        let denied = curio.require(Power::SrsAdmin, "evict keys").unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert!(denied
            .message()
            .contains("client curio may not evict keys: it lacks the srs_admin power"));
        for request in [
            with_token("wrong-token-wrong-token-wrong-token"),
            tonic::Request::new(()),
        ] {
            let refused = access.caller(&request).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        }
        let open = Access::open().caller(&tonic::Request::new(())).unwrap();
        assert!(open.name().is_none() && Power::ALL.iter().all(|p| open.may(*p)));
    }

    #[test]
    fn bad_clients_files_are_refused() {
        for (text, expected) in [
            ("", "no [[client]]"),
            (
                "[[client]]\nname = \"a\"\n",
                "neither a token nor a cert_sha256",
            ),
            (
                "[[client]]\nname = \"a\"\ntoken = \"short\"\n",
                "at least 32",
            ),
            (
                "[[client]]\nname = \"a b\"\ntoken = \"x\"\n",
                "is not 1-64 characters",
            ),
            (
                "[[client]]\nname = \"a\"\ncert_sha256 = \"abcd\"\n",
                "32 bytes of hex",
            ),
            (
                "[[client]]\nname = \"a\"\ntoken = \"x\"\npowers = [\"root\"]\n",
                "root",
            ),
        ] {
            let (_f, access) = file(text);
            let e = access.err().expect(text).to_string();
            assert!(e.contains(expected), "{text}: {e}");
        }
        let twice = format!(
            "[[client]]\nname = \"a\"\ntoken = \"{TOKEN_A}\"\n[[client]]\nname = \"b\"\ntoken = \"{TOKEN_A}\"\n"
        );
        let e = file(&twice).1.err().unwrap().to_string();
        assert!(e.contains("another's too"), "{e}");
    }
}
