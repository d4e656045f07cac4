//! `cuzk launch` owns a cluster of processes: stopped the way a supervisor stops it (SIGTERM to
//! the launcher alone), it stops them too instead of leaving them running.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so read after its closing paren.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// Whether `pid` is still a process that runs (not gone, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim().to_owned()))
        .is_some_and(|rest| !rest.starts_with('Z'))
}

#[test]
fn a_launched_cluster_stops_with_its_launcher_on_sigterm() {
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["launch", "--servers", "1", "--synth", "1", "--gpu", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cuzk launch");
    let pid = launcher.id();
    // It prints the cluster's URLs once every process is started.
    let stdout = launcher.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with("NATS:") => break,
            Ok(_) => {}
            Err(e) => {
                let _ = launcher.kill();
                panic!("cuzk launch did not report its cluster: {e}");
            }
        }
    }
    let started = children(pid);
    assert!(
        started.len() >= 3,
        "a server, a synth node and a GPU node: {started:?}"
    );

    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).expect("SIGTERM");
    let deadline = Instant::now() + Duration::from_secs(60);
    while launcher.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the launcher outlived SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left: Vec<u32> = started.clone();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left.retain(|&p| running(p));
    }
    for &p in &left {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
    assert!(
        left.is_empty(),
        "processes of the cluster left running after its launcher stopped: {left:?} of {started:?}"
    );
}
