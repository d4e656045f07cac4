//! nkey logins (`--nats-nkey-seed-file`): a client holding the seed of a user that the server
//! names by its public key (`{ nkey: U… }`, docs/deploy.md) logs in and uses that user's
//! permissions; the server refuses a seed it does not know and a client without one.

use std::path::Path;
use std::time::Duration;

use cuzk_common::config::{NatsArgs, Span};
use cuzk_common::local_nats::{free_port, NatsServer};
use futures::StreamExt;

fn seed_file(dir: &Path, name: &str, pair: &nkeys::KeyPair) -> std::path::PathBuf {
    let file = dir.join(name);
    std::fs::write(&file, format!("{}\n", pair.seed().unwrap())).unwrap();
    file
}

#[tokio::test]
async fn a_client_logs_in_with_an_nkey_seed_file() {
    let dir = tempfile::tempdir().unwrap();
    let (user, stranger) = (nkeys::KeyPair::new_user(), nkeys::KeyPair::new_user());
    let port = free_port().unwrap();
    let config = format!(
        "listen: 127.0.0.1:{port}\n\
         authorization {{ users: [ {{ nkey: {}, permissions: {{ publish: \"nkey.>\", subscribe: \"nkey.>\" }} }} ] }}\n",
        user.public_key()
    );
    let conf = dir.path().join("nkey.conf");
    std::fs::write(&conf, config).unwrap();
    let _server = NatsServer::start_config(&conf, port, &dir.path().join("nats.log")).unwrap();
    let url = format!("nats://127.0.0.1:{port}");

    let nats = NatsArgs {
        urls: Some(vec![url.clone()]),
        nkey_seed_file: Some(seed_file(dir.path(), "user.nk", &user)),
        timeout: Some(Span::secs(3)),
        ..Default::default()
    }
    .resolve("nkey-test")
    .unwrap();
    let client = cuzk_common::nats::connect(&nats).await.unwrap();
    let mut sub = client.subscribe("nkey.check").await.unwrap();
    client.flush().await.unwrap();
    client.publish("nkey.check", "x".into()).await.unwrap();
    let arrived = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
    assert!(
        matches!(arrived, Ok(Some(_))),
        "the nkey user's own subject"
    );

    // The server checks the key: another seed, and no login at all, are refused.
    let other = std::fs::read_to_string(seed_file(dir.path(), "stranger.nk", &stranger)).unwrap();
    let refused = [
        async_nats::ConnectOptions::with_nkey(other.trim().to_owned()),
        async_nats::ConnectOptions::new(),
    ];
    for options in refused {
        let connect = tokio::time::timeout(Duration::from_secs(5), options.connect(url.as_str()));
        assert!(connect.await.expect("connect answers").is_err());
    }
}
