//! One cold start: the bootstrap spawned as Lambda would start it, served one event by the
//! stand-in Runtime API, timed, measured (CPU, peak RSS) and killed by its pid.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use likes_core::clock::now_ms;
use likes_tests::TestStack;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::measured::{request_id, Measured};
use crate::runtime_api::{CallKind, Invocation, RuntimeApi};

/// Longer than any cold start; a bootstrap that takes this long is reported as failed.
const GIVE_UP: Duration = Duration::from_secs(30);

/// A measured function and how Lambda would start it.
pub struct Target {
    pub function: Measured,
    pub bootstrap: PathBuf,
    pub environment: BTreeMap<String, String>,
}

/// One cold start, in durations from just before the spawn.
pub struct Sample {
    pub init: Duration,
    pub served: Duration,
    /// CPU time of all the bootstrap's threads when its response arrived.
    pub cpu: Duration,
    /// VmHWM when its response arrived, in KiB.
    pub peak_rss_kib: u64,
}

/// Spawns the bootstrap, serves it one event, and kills it by its pid once it answered.
pub async fn cold_start(stack: &TestStack, target: &Target, spawn: u64) -> Sample {
    let Target {
        function,
        bootstrap,
        environment,
        ..
    } = target;
    let template = &stack.stack.template;
    let now_ms = now_ms();
    let timeout_s = template
        .function_property(function.logical_id, "Timeout")
        .and_then(serde_yaml::Value::as_u64)
        .unwrap_or(3);
    let payload = function.event.payload(stack, spawn, now_ms);
    let mut api = RuntimeApi::serve(Invocation {
        request_id: request_id(spawn, now_ms),
        function_arn: format!(
            "arn:aws:lambda:{}:000000000000:function:{}",
            environment["AWS_REGION"], environment["AWS_LAMBDA_FUNCTION_NAME"]
        ),
        deadline_ms: now_ms as u128 + u128::from(timeout_s) * 1000,
        trace_id: format!(
            "Root=1-{:08x}-{:024x};Parent={spawn:016x};Sampled=0",
            now_ms / 1000,
            spawn
        ),
        payload: Bytes::from(payload.to_string()),
    })
    .await;
    let mut command = Command::new(bootstrap);
    // Lambda starts the bootstrap with its reserved variables and the function's, nothing
    // inherited from whoever runs the bench (no RUST_LOG, no profile files).
    command
        .env_clear()
        .envs(environment)
        .env("AWS_LAMBDA_RUNTIME_API", api.address())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let spawned = Instant::now();
    let mut child = command.spawn().unwrap_or_else(|e| {
        panic!("spawning {}: {e}", bootstrap.display());
    });
    let pid = child.id().expect("a running child has a pid");
    let logs = Logs::capture(&mut child);
    let name = function.logical_id;

    let mut init = None;
    let response = loop {
        let call = tokio::select! {
            call = api.call() => call,
            status = child.wait() => {
                let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                logs.fail(&mut child, format!("{name} exited ({status}) before it answered")).await
            }
            _ = tokio::time::sleep_until((spawned + GIVE_UP).into()) => {
                logs.fail(&mut child, format!("{name} did not answer within {GIVE_UP:?}")).await
            }
        };
        match call.kind {
            CallKind::Next => {
                init.get_or_insert(call.at - spawned);
            }
            CallKind::Response => break call,
            CallKind::Error | CallKind::InitError => {
                let body = String::from_utf8_lossy(&call.body).into_owned();
                logs.fail(&mut child, format!("{name} posted {:?}: {body}", call.kind))
                    .await
            }
        }
    };
    let sample = Sample {
        init: init.expect("the runtime asks for work before it answers"),
        served: response.at - spawned,
        cpu: cpu_time(pid),
        peak_rss_kib: peak_rss_kib(pid),
    };
    // By its pid (tokio's Child holds it): SIGKILL, then reap.
    child.start_kill().expect("the bootstrap can be killed");
    let _ = child.wait().await;
    function.event.check(name, &response.body);
    sample
}

/// The bootstrap's stdout and stderr (its JSON logs), read to the end in the background.
struct Logs {
    readers: Vec<JoinHandle<Vec<u8>>>,
}

impl Logs {
    fn capture(child: &mut Child) -> Self {
        fn read(
            mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
        ) -> JoinHandle<Vec<u8>> {
            tokio::spawn(async move {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes).await;
                bytes
            })
        }
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        Self {
            readers: vec![read(stdout), read(stderr)],
        }
    }

    /// Kills the bootstrap and panics with `message` and what it logged.
    async fn fail(self, child: &mut Child, message: String) -> ! {
        let _ = child.start_kill();
        let _ = child.wait().await;
        let mut logged = String::new();
        for reader in self.readers {
            logged.push_str(&String::from_utf8_lossy(&reader.await.unwrap_or_default()));
        }
        panic!("{message}\n--- the bootstrap's output:\n{logged}");
    }
}

/// CPU time of every thread of `pid` so far (`/proc/<pid>/task/*/schedstat`, nanoseconds).
fn cpu_time(pid: u32) -> Duration {
    let nanos = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// The process's peak resident set so far (`VmHWM` in `/proc/<pid>/status`, in KiB).
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
