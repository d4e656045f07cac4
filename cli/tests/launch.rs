//! `cuzk launch` owns a cluster of processes: stopped the way a supervisor stops it (SIGTERM to
//! the launcher alone), it stops them too instead of leaving them running.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The fields of `/proc/<pid>/stat` after the command's name (state, ppid, ...): the name may
/// hold spaces, so they are read after its closing paren.
fn stat_fields(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.trim().to_owned())
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let entries = std::fs::read_dir("/proc").expect("/proc").flatten();
    entries
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            stat_fields(&child.to_string())
                .and_then(|f| f.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(pid)
        })
        .collect()
}

/// Whether `pid` is still a process that runs (not gone, not a zombie).
fn running(pid: u32) -> bool {
    stat_fields(&pid.to_string()).is_some_and(|f| !f.starts_with('Z'))
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
