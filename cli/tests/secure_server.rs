//! The shipped one-server config (deploy/nats/auth.conf and the users of
//! deploy/nats/accounts.conf it includes) is secure as written, and a job runs through it. The
//! server starts from that file with only its store directory, certificate directory and ports
//! made local (certificates made here with openssl). A plaintext client is refused even with the
//! admin's password, the monitoring port answers on loopback only, a wrong password is refused,
//! and then `cuzk provision` as `admin` (whose password the server holds as a bcrypt hash), a
//! ledger service as `ledger`, a synth node as `synth`, a GPU node on the CPU backend as `gpu`
//! and `cuzk submit --wait` as `submitter`, all over TLS, run a job whose proof verifies.

mod support;

use support::shipped::{
    certificates, monitoring_on_loopback_only, refuses_plaintext, secret, shipped_config,
    start_server, Deployment,
};

/// The password each role logs in with: the admin's is the one behind the hash below.
fn password(role: &str) -> String {
    match role {
        "admin" => "admin-pw".into(),
        role => secret(role),
    }
}

/// What the server is given: a bcrypt hash for the admin, which in an environment variable must
/// carry its own quotes, or the server reads its `$2b$…` as another variable reference.
fn server_password(role: &str) -> String {
    match role {
        "admin" => "\"$2b$11$4VgEM6ZrQva99IH5PV00yefSdkls6V44vVwmYVn2z1ALiTohBIA6y\"".into(),
        role => secret(role),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_through_the_shipped_server_over_tls_only() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path(), &["cuzk-nats"]);
    let store = dir.path().join("store");
    let config = shipped_config(dir.path(), "auth.conf", &store, &tls[0]);
    let server = start_server(dir.path(), "nats", &config, &[], server_password);
    refuses_plaintext(server.port).await;
    monitoring_on_loopback_only(&server).await;

    let deployment = Deployment::new(
        std::slice::from_ref(&server),
        dir.path().join("ca.pem"),
        password,
    );
    assert!(
        deployment.refuses(server.port, "synth", "nope").await,
        "a wrong password logged in"
    );
    deployment.run_job(dir.path(), "secure-server");
}
