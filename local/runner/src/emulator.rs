//! The offline AWS emulator: `local/emulator/emulator.py` (moto's server behind one global lock)
//! from the project's virtualenv, on 127.0.0.1 and a free port. Stopped when dropped, and by
//! its own watchdog if this process dies first.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const READY: &str = "LIKES_EMULATOR_READY ";
/// How far the emulator keeps a table's latest restorable time behind now: about 5 minutes,
/// as on AWS, for `likes-local run` (its `--pitr-lag` sets another).
pub const AWS_PITR_LAG: Duration = Duration::from_secs(300);
/// The lag for test runs: long enough that a run must wait for PITR to reach its cut, short
/// enough that tests with 4-second epochs do not wait minutes.
pub const TEST_PITR_LAG: Duration = Duration::from_secs(3);
const START_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error(
        "the emulator's Python ({0}) is missing: run `make .venv` (or set LIKES_PYTHON) first"
    )]
    NoPython(PathBuf),
    #[error("could not start the emulator: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("the emulator did not report ready within {0:?}")]
    NotReady(Duration),
    #[error("the emulator exited before it was ready (its output is above)")]
    Exited,
}

pub struct Emulator {
    child: Child,
    url: String,
}

impl Emulator {
    pub fn start(pitr_lag: Duration) -> Result<Self, EmulatorError> {
        let root = crate::repo_root();
        let python = match std::env::var_os("LIKES_PYTHON") {
            Some(python) => PathBuf::from(python),
            None => {
                let venv = root.join(".venv/bin/python");
                if !venv.exists() {
                    return Err(EmulatorError::NoPython(venv));
                }
                venv
            }
        };
        let mut child = Command::new(&python)
            .arg(root.join("local/emulator/emulator.py"))
            .args(["--host", "127.0.0.1", "--port", "0", "--parent-pid"])
            .arg(std::process::id().to_string())
            .arg("--pitr-lag-seconds")
            .arg(pitr_lag.as_secs_f64().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (ready, url) = mpsc::channel();
        // Reads the ready line, then keeps draining so the emulator never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut ready = Some(ready);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix(READY) {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(url.trim().to_owned());
                    }
                }
            }
        });
        let mut emulator = Self {
            child,
            url: String::new(),
        };
        emulator.url = url.recv_timeout(START_TIMEOUT).map_err(|err| match err {
            mpsc::RecvTimeoutError::Timeout => EmulatorError::NotReady(START_TIMEOUT),
            mpsc::RecvTimeoutError::Disconnected => EmulatorError::Exited,
        })?;
        Ok(emulator)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
