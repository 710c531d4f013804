//! The aggregator's metrics, read the way CloudWatch reads them: its Embedded Metric Format
//! lines on stdout. The aggregator runs on a thread of this process (the local mapping), so
//! while the workload runs, stdout goes through a pipe: EMF lines are kept (and kept out of
//! the printed figures), every other line is passed on.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::thread::JoinHandle;

use serde_json::Value;

/// The values of the metrics the bench reports, over every line captured.
#[derive(Debug, Default)]
pub struct Metrics {
    pub lines: usize,
    pub staleness_ms: Vec<f64>,
    pub records_received: f64,
    pub count_row_writes: f64,
}

pub struct Capture {
    saved_stdout: RawFd,
    reader: JoinHandle<Metrics>,
}

impl Capture {
    pub fn start() -> Self {
        std::io::stdout().flush().expect("stdout flushes");
        let mut pipe: [RawFd; 2] = [0; 2];
        // SAFETY: plain fd calls on descriptors this function owns; each result is checked.
        // File::from_raw_fd takes ownership of a descriptor nothing else closes.
        let (saved_stdout, read_end, passthrough) = unsafe {
            assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0, "pipe");
            let saved = libc::dup(1);
            assert!(saved >= 0, "dup of stdout");
            assert!(libc::dup2(pipe[1], 1) >= 0, "dup2 onto stdout");
            assert_eq!(libc::close(pipe[1]), 0);
            let passthrough = libc::dup(saved);
            assert!(passthrough >= 0, "dup of the saved stdout");
            (
                saved,
                File::from_raw_fd(pipe[0]),
                File::from_raw_fd(passthrough),
            )
        };
        let reader = std::thread::spawn(move || read(read_end, passthrough));
        Self {
            saved_stdout,
            reader,
        }
    }

    /// Puts stdout back and returns what the captured lines reported. Call it when nothing
    /// more is being emitted (the mapping settled and paused).
    pub fn stop(self) -> Metrics {
        std::io::stdout().flush().expect("stdout flushes");
        // SAFETY: restores the descriptor saved in `start`; replacing fd 1 closes the pipe's
        // only write end, so the reader sees the end of its input.
        unsafe {
            assert!(libc::dup2(self.saved_stdout, 1) >= 0, "dup2 back");
            assert_eq!(libc::close(self.saved_stdout), 0);
        }
        self.reader.join().expect("the EMF reader")
    }
}

fn read(pipe: File, mut passthrough: File) -> Metrics {
    let mut metrics = Metrics::default();
    for line in BufReader::new(pipe).lines() {
        let Ok(line) = line else { break };
        let emf = serde_json::from_str::<Value>(&line)
            .ok()
            .filter(|v| v.get("_aws").is_some());
        let Some(emf) = emf else {
            let _ = writeln!(passthrough, "{line}");
            continue;
        };
        metrics.lines += 1;
        let values = |name: &str| -> Vec<f64> {
            match &emf[name] {
                Value::Number(n) => n.as_f64().into_iter().collect(),
                Value::Array(all) => all.iter().filter_map(Value::as_f64).collect(),
                _ => Vec::new(),
            }
        };
        metrics.staleness_ms.extend(values("StalenessMs"));
        metrics.records_received += values("RecordsReceived").iter().sum::<f64>();
        metrics.count_row_writes += values("CountRowWrites").iter().sum::<f64>();
    }
    metrics
}
