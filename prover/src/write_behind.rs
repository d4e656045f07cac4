//! A file writer whose pages start going to disk as soon as they are written. A 47 GB parameters
//! file written through the page cache otherwise leaves gigabytes dirty (Linux starts background
//! write-back only past a share of RAM), and the final `fsync` waited seconds for them
//! (docs/gpu-runs.md, "32 GiB PoRep partitions end to end" and "32 GiB on one H200, 16 cores").
//! Write-back is requested from a thread of its own, because
//! `sync_file_range` blocks while the disk's queue is full and the writer must not. Seeks are
//! allowed: the parameter generator writes its sections where they belong, out of order.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Write-back is requested for every this many bytes written.
const STEP: u64 = 256 << 20;

pub struct WriteBehind {
    file: File,
    /// Where the next write lands.
    pos: u64,
    /// The start of the bytes written since write-back was last requested: they end at `pos`,
    /// because a seek requests them first.
    unrequested: u64,
    ranges: Option<mpsc::Sender<(u64, u64)>>,
    flusher: Option<JoinHandle<()>>,
}

impl WriteBehind {
    pub fn new(file: File) -> io::Result<Self> {
        let (ranges, flusher) = match file.try_clone() {
            Ok(dup) => {
                let (tx, rx) = mpsc::channel();
                let flusher = std::thread::Builder::new()
                    .name("write-behind".into())
                    .spawn(move || {
                        rx.into_iter()
                            .for_each(|(off, len)| start_writeback(&dup, off, len))
                    })?;
                (Some(tx), Some(flusher))
            }
            // Without a second handle the final sync does all the work, as it would anyway.
            Err(_) => (None, None),
        };
        Ok(WriteBehind {
            file,
            pos: 0,
            unrequested: 0,
            ranges,
            flusher,
        })
    }

    /// Asks for write-back of what was written since the last request.
    fn request(&mut self) {
        if self.pos > self.unrequested {
            if let Some(ranges) = &self.ranges {
                let _ = ranges.send((self.unrequested, self.pos - self.unrequested));
            }
        }
        self.unrequested = self.pos;
    }

    /// Syncs what is left and returns the file.
    pub fn finish(mut self) -> io::Result<File> {
        drop(self.ranges.take());
        if let Some(flusher) = self.flusher.take() {
            let _ = flusher.join();
        }
        self.file.sync_all()?;
        Ok(self.file)
    }
}

#[cfg(target_os = "linux")]
fn start_writeback(file: &File, off: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor of ours; it reads no memory of ours.
    // Best effort: a refusal (an unusual filesystem) leaves the work to the final sync.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            off as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_: &File, _: u64, _: u64) {}

impl Write for WriteBehind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.pos += n as u64;
        if self.pos - self.unrequested >= STEP {
            self.request();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for WriteBehind {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.request();
        self.pos = self.file.seek(to)?;
        self.unrequested = self.pos;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_byte_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut w = WriteBehind::new(File::create(&path).unwrap()).unwrap();
        let data: Vec<u8> = (0..(STEP as usize + 12345))
            .map(|i| (i % 251) as u8)
            .collect();
        for part in data.chunks(1 << 20) {
            w.write_all(part).unwrap();
        }
        assert!(w.unrequested >= STEP, "write-back was never requested");
        w.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }

    #[test]
    fn writes_sections_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut w = WriteBehind::new(File::create(&path).unwrap()).unwrap();
        let data: Vec<u8> = (0..3 * STEP as usize).map(|i| (i % 253) as u8).collect();
        let third = STEP as usize;
        // The last third, the first, then the middle: as the parameter generator's sections.
        for part in [2 * third..3 * third, 0..third, third..2 * third] {
            w.seek(SeekFrom::Start(part.start as u64)).unwrap();
            w.write_all(&data[part]).unwrap();
        }
        w.finish().unwrap();
        assert!(std::fs::read(&path).unwrap() == data);
    }
}
