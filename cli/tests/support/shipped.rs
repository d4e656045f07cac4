//! The shipped NATS server configs (deploy/nats) run as written, with only their store
//! directories, certificate directories and ports made local, and cuzk's roles logged in to them
//! over TLS as deploy/nats/accounts.conf names them.

use std::net::{IpAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cuzk_common::config::{LimitsProfile, NatsArgs, ParamArgs};
use cuzk_common::local_nats::{free_port, nats_server_binary};
use cuzk_wire::job::{JobInput, JobResult, JobSpec, JobStatus, Priority, JOB_SPEC_VERSION};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::openssl;

const CUZK: &str = env!("CARGO_BIN_EXE_cuzk");
pub const ROLES: [&str; 7] = [
    "admin",
    "submitter",
    "priority",
    "synth",
    "gpu",
    "gateway",
    "ledger",
];
/// Where the shipped configs expect the certificates.
const TLS_DIR: &str = "/etc/cuzk/nats/tls";
pub const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// A process killed on drop.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The password each role logs in with.
pub fn secret(role: &str) -> String {
    format!("{role}-secret")
}

pub fn log(dir: &Path, name: &str) -> std::fs::File {
    std::fs::File::create(dir.join(format!("{name}.log"))).unwrap()
}

/// A CA in `dir`, and for each server a directory laid out as the configs expect
/// (`ca.pem`, `server.pem`, `server-key.pem`) holding its own certificate, for both server and
/// client use (it serves clients and dials routes), naming its host and the loopback address.
pub fn certificates(dir: &Path, hosts: &[&str]) -> Vec<PathBuf> {
    let key = "ec_paramgen_curve:prime256v1";
    let new_key = ["-newkey", "ec", "-pkeyopt", key, "-nodes"];
    let ca = ["req", "-x509", "-days", "2", "-subj", "/CN=cuzk test CA"];
    let out = ["-keyout", "ca.key", "-out", "ca.pem"];
    openssl(dir, &[&ca[..], &new_key, &out].concat());
    hosts
        .iter()
        .map(|host| {
            let tls = dir.join(format!("tls-{host}"));
            std::fs::create_dir(&tls).unwrap();
            std::fs::copy(dir.join("ca.pem"), tls.join("ca.pem")).unwrap();
            let ext = format!(
                "subjectAltName=DNS:{host},IP:127.0.0.1\n\
                 extendedKeyUsage=serverAuth,clientAuth\n"
            );
            std::fs::write(tls.join("server.ext"), ext).unwrap();
            let subject = format!("/CN={host}");
            let request = ["req", "-subj", &subject, "-keyout", "server-key.pem"];
            openssl(
                &tls,
                &[&request[..], &new_key, &["-out", "server.csr"]].concat(),
            );
            let sign = "x509 -req -in server.csr -CA ../ca.pem -CAkey ../ca.key -CAcreateserial \
                        -days 2 -extfile server.ext -out server.pem";
            openssl(&tls, &sign.split_whitespace().collect::<Vec<_>>());
            tls
        })
        .collect()
}

/// A client certificate signed by the CA in `dir` (as docs/deploy.md makes one for mutual TLS).
pub fn client_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    let request = "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
                   -subj /CN=cuzk-client -keyout client-key.pem -out client.csr";
    openssl(dir, &request.split_whitespace().collect::<Vec<_>>());
    let sign = "x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                -extfile client.ext -out client.pem";
    openssl(dir, &sign.split_whitespace().collect::<Vec<_>>());
    (dir.join("client.pem"), dir.join("client-key.pem"))
}

/// The shipped config `deploy/nats/<name>`, copied under `dir` as deploy/nats is laid out (with
/// `accounts.conf` beside it, which it includes), its store moved to `store` and its
/// certificates to `tls`.
pub fn shipped_config(dir: &Path, name: &str, store: &Path, tls: &Path) -> PathBuf {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nats");
    std::fs::copy(deploy.join("accounts.conf"), dir.join("accounts.conf")).unwrap();
    let text = std::fs::read_to_string(deploy.join(name)).unwrap();
    for expected in ["/var/lib/cuzk/nats", TLS_DIR] {
        assert!(text.contains(expected), "{name} no longer names {expected}");
    }
    let text = text
        .replace("/var/lib/cuzk/nats", store.to_str().unwrap())
        .replace(TLS_DIR, tls.to_str().unwrap());
    let config = dir.join(name);
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, text).unwrap();
    config
}

pub struct Server {
    pub _process: Process,
    pub port: u16,
    pub monitor: u16,
}

/// Starts a server from `config` (logging to `<name>.log` in `dir`) on free client and
/// monitoring ports, with `args` besides and each role's password from `password` in its
/// environment.
pub fn start_server(
    dir: &Path,
    name: &str,
    config: &Path,
    args: &[String],
    password: impl Fn(&str) -> String,
) -> Server {
    let binary = nats_server_binary().expect("nats-server is installed");
    let (port, monitor) = (free_port().unwrap(), free_port().unwrap());
    let mut command = Command::new(binary);
    command
        .arg("-c")
        .arg(config)
        .args(["-p", &port.to_string(), "-m", &monitor.to_string()])
        .args(args)
        .stdout(Stdio::null())
        .stderr(log(dir, name));
    for role in ROLES {
        command.env(
            format!("CUZK_{}_PASSWORD", role.to_uppercase()),
            password(role),
        );
    }
    let process = Process(command.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{} did not start: {}",
            config.display(),
            std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        _process: process,
        port,
        monitor,
    }
}

/// What the server answers a plaintext client that logs in as the admin and pings: its INFO
/// line, then `PONG` if admitted.
pub async fn plaintext_login(port: u16) -> (String, String) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut stream = BufReader::new(stream);
    let mut info = String::new();
    stream.read_line(&mut info).await.unwrap();
    let connect = format!(
        "CONNECT {{\"user\":\"admin\",\"pass\":\"{}\",\"verbose\":false,\"pedantic\":false}}\r\nPING\r\n",
        secret("admin")
    );
    stream
        .get_mut()
        .write_all(connect.as_bytes())
        .await
        .unwrap();
    let mut reply = String::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_line(&mut reply)).await;
    assert!(read.is_ok(), "the server neither admits nor refuses");
    (info, reply)
}

/// A plaintext client is refused on `port`, whatever its password, and told TLS is required.
pub async fn refuses_plaintext(port: u16) {
    let (info, reply) = plaintext_login(port).await;
    assert!(
        !reply.starts_with("PONG"),
        "a plaintext client was admitted on port {port}: {reply}"
    );
    assert!(info.contains("\"tls_required\":true"), "{info}");
}

pub async fn http_get(address: (IpAddr, u16), path: &str) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET {path} HTTP/1.0\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default())
}

/// The server's `/varz`, read on loopback.
pub async fn varz(server: &Server) -> serde_json::Value {
    let varz = http_get((LOOPBACK, server.monitor), "/varz").await.unwrap();
    serde_json::from_str(&varz).unwrap()
}

/// This host's address on its default route, if it has one.
fn non_loopback_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("198.51.100.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Monitoring answers on loopback, and not on the host's other address, where the client port
/// does answer (so the address is reachable).
pub async fn monitoring_on_loopback_only(server: &Server) {
    let varz = varz(server).await;
    assert_eq!(varz["http_host"], "127.0.0.1", "{varz}");
    let Some(ip) = non_loopback_address() else {
        eprintln!("no address besides loopback: monitoring checked on loopback only");
        return;
    };
    assert!(
        TcpStream::connect((ip, server.port)).is_ok(),
        "{ip} is reachable"
    );
    let monitoring = http_get((ip, server.monitor), "/varz").await;
    assert!(monitoring.is_err(), "monitoring answers on {ip}");
}

/// The client side of a shipped deployment: the servers' URLs, the CA that signed them, the
/// replicas its streams get and the password each role logs in with.
pub struct Deployment {
    pub urls: String,
    pub ca: PathBuf,
    pub replicas: usize,
    pub password: fn(&str) -> String,
}

impl Deployment {
    pub fn new(servers: &[Server], ca: PathBuf, password: fn(&str) -> String) -> Self {
        let urls: Vec<String> = servers
            .iter()
            .map(|s| format!("tls://127.0.0.1:{}", s.port))
            .collect();
        Deployment {
            urls: urls.join(","),
            ca,
            replicas: servers.len(),
            password,
        }
    }

    /// `cuzk <command>` logged in as `role` over TLS to every server.
    pub fn cuzk(&self, command: &str, role: &str) -> Command {
        let mut cuzk = Command::new(CUZK);
        cuzk.arg(command)
            .args(["--nats-url", &self.urls])
            .args(["--nats-tls-ca", self.ca.to_str().unwrap()])
            .args([
                "--nats-user",
                role,
                "--nats-password",
                &(self.password)(role),
            ])
            .args(["--nats-inbox-prefix", &format!("_INBOX_{role}")])
            .args(["--nats-replicas", &self.replicas.to_string()])
            .args(["--nats-limits", "local"])
            .stdin(Stdio::null());
        // A client user is a tenant of its own name (deploy/nats/accounts.conf).
        if ["submitter", "priority", "gateway"].contains(&role) {
            cuzk.args(["--nats-tenant", role]);
        }
        // Workers change records, publish results and delete objects through the ledger service.
        if ["synth", "gpu"].contains(&role) {
            cuzk.arg("--nats-ledger-service");
        }
        cuzk
    }

    /// `cuzk provision` as the admin, retried while a fresh cluster elects its leaders.
    pub fn provision(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let output = self.cuzk("provision", "admin").output().unwrap();
            if output.status.success() {
                return;
            }
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(Instant::now() < deadline, "cuzk provision: {stderr}");
            eprintln!("retrying cuzk provision: {stderr}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// NATS settings of `role` (with the TLS client certificate `tls`, if any).
    pub fn nats_args(&self, role: &str, tls: Option<(PathBuf, PathBuf)>) -> NatsArgs {
        let (tls_cert, tls_key) = tls.unzip();
        NatsArgs {
            urls: Some(self.urls.split(',').map(str::to_owned).collect()),
            limits: Some(LimitsProfile::Local),
            user: Some(role.into()),
            password: Some((self.password)(role).into()),
            tls_ca: Some(self.ca.clone()),
            tls_cert,
            tls_key,
            ..Default::default()
        }
    }

    /// Whether the server on `port` refuses `user` logging in over TLS with `password` and no
    /// client certificate.
    pub async fn refuses(&self, port: u16, user: &str, password: &str) -> bool {
        let url = format!("tls://127.0.0.1:{port}");
        let login =
            async_nats::ConnectOptions::with_user_and_password(user.into(), password.into())
                .add_root_certificates(self.ca.clone())
                .require_tls(true)
                .connect(url.as_str());
        let login = tokio::time::timeout(Duration::from_secs(5), login).await;
        login.expect("connect answers").is_err()
    }

    /// The admin's connection, as cuzk's nodes connect.
    pub async fn admin(&self) -> async_nats::Client {
        let args = self
            .nats_args("admin", None)
            .resolve("shipped-test")
            .unwrap();
        cuzk_common::nats::connect(&args).await.unwrap()
    }

    /// Provisions, starts the ledger service as `ledger`, a synth node as `synth` and a GPU node
    /// on the CPU backend as `gpu`, and runs job `job_id` through them as `submitter` (`cuzk
    /// submit --wait`); its proof must verify.
    pub fn run_job(&self, dir: &Path, job_id: &str) {
        self.provision();
        let ledger = self
            .cuzk("ledger", "ledger")
            .stdout(log(dir, "ledger"))
            .stderr(log(dir, "ledger-err"))
            .spawn()
            .unwrap();
        let _ledger = Process(ledger);
        let synth = self
            .cuzk("synth-node", "synth")
            .args(["--synth-threads", "1"])
            .stdout(log(dir, "synth"))
            .stderr(log(dir, "synth-err"))
            .spawn()
            .unwrap();
        let _synth = Process(synth);
        let gpu = self
            .cuzk("gpu-node", "gpu")
            .args(["--gpu-backend", "cpu", "--gpu-cpu-threads", "1"])
            .arg("--allow-test-params")
            .stdout(log(dir, "gpu"))
            .stderr(log(dir, "gpu-err"))
            .spawn()
            .unwrap();
        let _gpu = Process(gpu);

        let spec = JobSpec {
            version: JOB_SPEC_VERSION,
            job_id: job_id.into(),
            circuit: "mimc".into(),
            params: serde_json::json!({"rounds": 300, "partitions": 2}),
            input: JobInput::Utf8("over tls".into()),
            priority: Priority::Normal,
        };
        let output = self
            .cuzk("submit", "submitter")
            .args(["--circuit", &spec.circuit])
            .args(["--params", &spec.params.to_string()])
            .args(["--input", "over tls", "--job-id", job_id])
            .args(["--wait", "--timeout-secs", "240"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "cuzk submit: {}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        let result: JobResult = serde_json::from_str(&stdout).unwrap();
        assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
        let params = ParamArgs::default().resolve(true).unwrap();
        let cache = cuzk_cli::shape_cache(&params).unwrap();
        cuzk_cli::verify_job_proof(&spec, &result, &cache).expect("the proof verifies");
    }
}
