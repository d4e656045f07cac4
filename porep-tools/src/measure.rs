//! What the benchmarks measure beside the work: the GPUs (nvidia-smi), a process's resident
//! memory and the CPU time of a process or of its named threads (procfs).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// `nvidia-smi` sampled in the background: peak memory used, and the mean utilization (the
/// fraction of time a kernel ran) over the samples taken while draining.
pub struct GpuSampler {
    child: std::process::Child,
    samples: Arc<Mutex<Vec<(Instant, f64, f64)>>>,
}

impl GpuSampler {
    pub fn start() -> Option<GpuSampler> {
        let mut smi = Command::new("nvidia-smi");
        smi.args([
            "--query-gpu=index,memory.used,utilization.gpu",
            "--format=csv,noheader,nounits",
            "-lms",
            "100",
        ]);
        // Only the GPUs the node may use: an idle one beside them would halve the mean.
        if let Ok(visible) = std::env::var("CUDA_VISIBLE_DEVICES") {
            if !visible.is_empty() && visible.split(',').all(|d| d.trim().parse::<u32>().is_ok()) {
                smi.args(["-i", &visible]);
            }
        }
        let mut child = smi
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let out = child.stdout.take()?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let sink = samples.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let f: Vec<f64> = line
                    .split(',')
                    .filter_map(|v| v.trim().parse().ok())
                    .collect();
                if let [_, mem, util] = f[..] {
                    sink.lock()
                        .expect("samples")
                        .push((Instant::now(), mem, util));
                }
            }
        });
        Some(GpuSampler { child, samples })
    }

    /// (peak MiB used on any GPU, mean utilization % of the samples taken after `from`).
    pub fn stop(mut self, from: Instant) -> (f64, f64) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let s = self.samples.lock().expect("samples");
        let peak = s.iter().map(|x| x.1).fold(0.0, f64::max);
        let draining: Vec<f64> = s.iter().filter(|x| x.0 >= from).map(|x| x.2).collect();
        let util = draining.iter().sum::<f64>() / draining.len().max(1) as f64;
        (peak, util)
    }
}

/// A process's resident memory in GiB: its peak (VmHWM), and what is resident now split into
/// anonymous memory and file pages (a mapped parameters file counts in the peak but is page
/// cache the kernel can take back).
#[derive(Clone, Copy)]
pub struct Rss {
    pub peak: f64,
    pub anon: f64,
    pub file: f64,
}

impl Rss {
    pub fn of(pid: u32) -> Option<Rss> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let gib = |field: &str| -> Option<f64> {
            let line = status.lines().find(|l| l.starts_with(field))?;
            let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb / (1u64 << 20) as f64)
        };
        Some(Rss {
            peak: gib("VmHWM:")?,
            anon: gib("RssAnon:")?,
            file: gib("RssFile:")?,
        })
    }
}

/// Linux's fixed unit of the CPU times in /proc (USER_HZ), the same on every architecture
/// Rust targets there.
const TICKS_PER_SECOND: f64 = 100.0;

/// User plus system CPU time of a `/proc/<pid>/stat`-format file's contents, in seconds.
fn stat_cpu_seconds(stat: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces and parentheses: count from its closing one.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 11 and 12 after the name.
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / TICKS_PER_SECOND)
}

/// CPU seconds a process has used so far (`pid`, or "self"), all its threads together.
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    stat_cpu_seconds(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU seconds used so far by this process's threads whose names start with `prefix` (a
/// node's pool: the synth node's threads are `synth-<i>`).
pub fn thread_cpu_seconds(prefix: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .filter_map(Result::ok)
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.starts_with(prefix))
        })
        .filter_map(|task| {
            stat_cpu_seconds(&std::fs::read_to_string(task.path().join("stat")).ok()?)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_after_the_command_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(stat_cpu_seconds(stat), Some(3.0));
    }

    #[test]
    fn this_process_uses_cpu_time() {
        let before = cpu_seconds("self").unwrap();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 100 {
            x = x.wrapping_mul(31).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(cpu_seconds("self").unwrap() > before);
    }
}
