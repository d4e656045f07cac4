//! How a process reaches NATS, and the sizes of the streams and buckets it creates
//! (`[nats]`).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units::{Bytes, Secret, Span};
use super::{invalid, settings::settings, ConfigError};
use crate::topology::{
    inputs_bucket_of, valid_inputs_bucket, valid_tenant, Limits, DEFAULT_ACK_WAIT,
};

pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";
/// How long a NATS request or JetStream acknowledgement is awaited, unless configured.
pub const DEFAULT_NATS_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LimitsProfile {
    Production,
    Local,
}

settings! {
    table "nats": NatsArgs => NatsConfig resolve(default_name: &str) {
        /// NATS server URLs, comma separated (all servers of a cluster).
        #[arg(long = "nats-url", env = "CUZK_NATS_URL", value_delimiter = ',')]
        urls: Vec<String> = vec![DEFAULT_NATS_URL.to_owned()], shown "nats://127.0.0.1:4222",
            check |urls: &Vec<String>| !urls.is_empty() && urls.iter().all(|u| !u.trim().is_empty())
                => "at least one non-empty URL is required";
        /// Client name shown by the server.
        #[arg(long = "nats-name", env = "CUZK_NATS_NAME")]
        name: String = default_name.to_owned(), shown "the command's, e.g. cuzk-synth";
        #[arg(long = "nats-user", env = "CUZK_NATS_USER")]
        user: String => Option<String> = None;
        #[arg(long = "nats-password", env = "CUZK_NATS_PASSWORD", hide_env_values = true)]
        password: Secret => Option<Secret> = None;
        /// A `.creds` file (JWT + nkey seed).
        #[arg(long = "nats-creds", env = "CUZK_NATS_CREDS")]
        creds: PathBuf => Option<PathBuf> = None;
        /// A file holding an nkey seed.
        #[arg(long = "nats-nkey-seed-file", env = "CUZK_NATS_NKEY_SEED_FILE")]
        nkey_seed_file: PathBuf => Option<PathBuf> = None;
        /// CA certificate to verify the servers with (enables TLS).
        #[arg(long = "nats-tls-ca", env = "CUZK_NATS_TLS_CA")]
        tls_ca: PathBuf => Option<PathBuf> = None;
        /// Client certificate and key for mutual TLS.
        #[arg(long = "nats-tls-cert", env = "CUZK_NATS_TLS_CERT", requires = "nats.tls_key")]
        tls_cert: PathBuf => Option<PathBuf> = None;
        #[arg(long = "nats-tls-key", env = "CUZK_NATS_TLS_KEY", requires = "nats.tls_cert")]
        tls_key: PathBuf => Option<PathBuf> = None;
        /// Inbox prefix, so server permissions can pin each role's reply subjects.
        #[arg(long = "nats-inbox-prefix", env = "CUZK_NATS_INBOX_PREFIX")]
        inbox_prefix: String => Option<String> = None;
        /// Keep job records, publish results and delete objects through the ledger service
        /// (`cuzk ledger`) instead of directly: for worker users whose permissions allow none
        /// of the three (deploy/nats/accounts.conf).
        #[arg(long = "nats-ledger-service", env = "CUZK_NATS_LEDGER_SERVICE",
            num_args = 0..=1, default_missing_value = "true")]
        ledger_service: bool = false, shown "false";
        /// Replicas for streams and buckets this process creates (1, or 3 in a cluster).
        #[arg(long = "nats-replicas", env = "CUZK_NATS_REPLICAS")]
        replicas: usize = 1, shown "1", check |n| (1..=5).contains(n) => "must be 1..=5";
        /// Timeout of a single NATS request or publish acknowledgement.
        #[arg(long = "nats-timeout", env = "CUZK_NATS_TIMEOUT")]
        timeout: Span => Duration = DEFAULT_NATS_TIMEOUT, shown "10s",
            check |t| !t.is_zero() => "must be positive",
            was "nats-timeout-secs" "CUZK_NATS_TIMEOUT_SECS" "timeout_secs";
        /// Time without an ack or progress before a job or partition is redelivered (set when
        /// the consumers are first created).
        #[arg(long = "nats-ack-wait", env = "CUZK_NATS_ACK_WAIT")]
        ack_wait: Span => Duration = DEFAULT_ACK_WAIT, shown "30s",
            check |t| *t >= Duration::from_secs(3)
                => "must be at least 3s (progress acks go every third)",
            was "nats-ack-wait-secs" "CUZK_NATS_ACK_WAIT_SECS" "ack_wait_secs";
        /// Sizes of the streams and buckets this process creates: `production` (24.1 GiB
        /// reserved per server) or `local` (0.5 GiB, for private servers and tests); the
        /// settings below override parts of it. Set when a stream is first created.
        #[arg(long = "nats-limits", env = "CUZK_NATS_LIMITS", value_enum)]
        limits: LimitsProfile = LimitsProfile::Production, shown "production";
        /// Jobs the jobs stream holds at most; a submission beyond it is refused (default: the
        /// profile's).
        #[arg(long = "nats-max-queued-jobs", env = "CUZK_NATS_MAX_QUEUED_JOBS")]
        max_queued_jobs: i64 => Option<i64> = None,
            check |n| n.is_none_or(|n| n >= 1) => "must be at least 1";
        /// Bytes the blob buckets hold at most, together (a quarter each,
        /// common/src/topology.rs); an upload beyond it is refused and retried later (default:
        /// the profile's).
        #[arg(long = "nats-blobs-max-bytes", env = "CUZK_NATS_BLOBS_MAX_BYTES")]
        blobs_max_bytes: Bytes => Option<i64> = None,
            check |n| n.is_none_or(|n| n >= 1) => "must be positive";
        /// Bytes the inputs bucket holds at most; an upload beyond it is refused (default: the
        /// profile's).
        #[arg(long = "nats-inputs-max-bytes", env = "CUZK_NATS_INPUTS_MAX_BYTES")]
        inputs_max_bytes: Bytes => Option<i64> = None,
            check |n| n.is_none_or(|n| n >= 1) => "must be positive";
        /// Days job records, results and staged inputs are kept (default: the profile's).
        #[arg(long = "nats-retention-days", env = "CUZK_NATS_RETENTION_DAYS")]
        retention_days: u32 => Option<u32> = None;
        /// Jobs per hour the farm ends at most; with the retention, what the records bucket is
        /// sized for (default: the profile's, an 8-GPU farm's, docs/deploy.md).
        #[arg(long = "nats-jobs-per-hour", env = "CUZK_NATS_JOBS_PER_HOUR")]
        jobs_per_hour: u32 => Option<u32> = None;
        /// The tenant this client submits, cancels and reads jobs as: its submit, cancel and
        /// listing subjects, results and job records carry it, and the server lets each user
        /// use its own tenant's only (deploy/nats/accounts.conf). Unset: the untenanted path
        /// (the admin's, or anyone's on a server without users).
        #[arg(long = "nats-tenant", env = "CUZK_NATS_TENANT")]
        tenant: String => Option<String> = None,
            check |t: &Option<String>| t.as_deref().is_none_or(valid_tenant)
                => "must be 1-32 of A-Z a-z 0-9 _ - and not `high`";
        /// The inputs bucket this client stages large inputs into: a tenant's own,
        /// `cuzk-inputs-<tenant>` (the only one its jobs may name), or the shared
        /// `cuzk-inputs` of the untenanted path; `cuzk provision` creates the one given here.
        #[arg(long = "nats-inputs-bucket", env = "CUZK_NATS_INPUTS_BUCKET")]
        inputs_bucket: String = inputs_bucket_of(tenant.as_deref()),
            shown "cuzk-inputs-<tenant>, or cuzk-inputs without a tenant",
            check |b| valid_inputs_bucket(b)
                => "must be cuzk-inputs or cuzk-inputs-<tenant> (1-32 of A-Z a-z 0-9 _ -)";
        derived {
            /// The stream and bucket sizes: the profile's, with the settings that override it.
            stream_limits: Limits = limits_of(
                limits,
                [max_queued_jobs, blobs_max_bytes, inputs_max_bytes],
                retention_days,
                jobs_per_hour,
            );
        }
    }
}

fn limits_of(
    profile: LimitsProfile,
    [queued, blobs, inputs]: [Option<i64>; 3],
    retention_days: Option<u32>,
    jobs_per_hour: Option<u32>,
) -> Limits {
    let profile = match profile {
        LimitsProfile::Production => Limits::default(),
        LimitsProfile::Local => Limits::local(),
    };
    Limits {
        max_queued_jobs: queued.unwrap_or(profile.max_queued_jobs),
        blobs_max_bytes: blobs.unwrap_or(profile.blobs_max_bytes),
        inputs_max_bytes: inputs.unwrap_or(profile.inputs_max_bytes),
        retention_days: retention_days.unwrap_or(profile.retention_days),
        jobs_per_hour: jobs_per_hour.unwrap_or(profile.jobs_per_hour),
        ..profile
    }
}

impl NatsConfig {
    fn check(&self) -> Result<(), ConfigError> {
        if self.user.is_some() != self.password.is_some() {
            return Err(invalid(
                "nats.user",
                "user and password must be given together",
            ));
        }
        let methods = [
            self.user.is_some(),
            self.creds.is_some(),
            self.nkey_seed_file.is_some(),
        ];
        if methods.iter().filter(|m| **m).count() > 1 {
            return Err(invalid(
                "nats.creds",
                "choose one of user/password, creds, nkey seed",
            ));
        }
        if let Some(tenant) = &self.tenant {
            let own = inputs_bucket_of(Some(tenant));
            if self.inputs_bucket != own {
                return Err(invalid(
                    "nats.inputs_bucket",
                    format!("tenant {tenant}'s jobs may name its own inputs bucket only, {own}"),
                ));
            }
        }
        super::readable_files(&[
            ("nats.creds", &self.creds),
            ("nats.nkey_seed_file", &self.nkey_seed_file),
            ("nats.tls_ca", &self.tls_ca),
            ("nats.tls_cert", &self.tls_cert),
            ("nats.tls_key", &self.tls_key),
        ])?;
        self.stream_limits
            .check()
            .map_err(|e| invalid("nats.jobs_per_hour", e.message))
    }
}
