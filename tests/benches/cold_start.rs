//! `make bench-cold-start`: cold start of the real bootstraps and their size, as figures (not
//! a timed test).
//!
//! The one `target/lambda/likes/bootstrap` that `cargo lambda build --release` made is spawned
//! as Lambda would start each function: an environment of Lambda's reserved variables (its
//! `_HANDLER` the function's `Handler`) and the function's own from template.yaml (resolved against a local stack on the emulator), with
//! `AWS_LAMBDA_RUNTIME_API` pointing at a stand-in Runtime API in this process that hands it
//! one event. Timed from just before the spawn to the bootstrap's first `GET …/next` (init:
//! runtime, config, SDK clients) and to its response `POST` (the first invocation served,
//! its DynamoDB calls to the emulator included); then the process is killed.
//!
//! `LIKES_BENCH_SPAWNS` (default 15) sets the measured spawns per function.

// Beside this file, not in benches/ itself, where cargo would take each for a bench of its own.
// The emulator's round trips are timed as `make bench-counts` times them (which uses every
// field).
#[allow(dead_code)]
#[path = "counts/emulator.rs"]
mod emulator;
#[path = "cold_start/events.rs"]
mod events;
#[path = "cold_start/runtime_api.rs"]
mod runtime_api;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use likes_core::clock::now_ms;
use likes_tests::TestStack;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use events::HttpRequest;
use runtime_api::{CallKind, Invocation, RuntimeApi};

/// Longer than any cold start; a bootstrap that takes this long is reported as failed.
const GIVE_UP: Duration = Duration::from_secs(30);

/// The functions measured: the write path, the count read, and the stream handler.
const MEASURED: [Measured; 3] = [
    Measured {
        logical_id: "PutReactionFunction",
        event: Event::PutReaction,
    },
    Measured {
        logical_id: "GetLikeCountFunction",
        event: Event::GetLikeCount,
    },
    Measured {
        logical_id: "AggregatorFunction",
        event: Event::StreamInsert,
    },
];

#[derive(Clone, Copy)]
struct Measured {
    logical_id: &'static str,
    event: Event,
}

#[derive(Clone, Copy)]
enum Event {
    /// `PUT /v1/items/{item_id}/reaction` LIKE by a new user each spawn: a first like.
    PutReaction,
    /// `GET /v1/items/{item_id}/like-count`.
    GetLikeCount,
    /// One INSERT record from the Reactions stream, new each spawn: a new claim is committed.
    StreamInsert,
}

impl Event {
    fn payload(self, stack: &TestStack, spawn: u64, now_ms: i64) -> Value {
        let request_id = request_id(spawn, now_ms);
        match self {
            Event::PutReaction => HttpRequest {
                method: "PUT",
                route: "/v1/items/{item_id}/reaction",
                user: &format!("cold-writer-{spawn}"),
                headers: json!({
                    "content-type": "application/json",
                    "idempotency-key": format!("cold-{spawn}"),
                }),
                body: Some(json!({ "state": "LIKE" })),
            }
            .event(&request_id, now_ms),
            Event::GetLikeCount => HttpRequest {
                method: "GET",
                route: "/v1/items/{item_id}/like-count",
                user: "cold-reader",
                headers: json!({}),
                body: None,
            }
            .event(&request_id, now_ms),
            Event::StreamInsert => {
                let stream_arn = stack
                    .stack
                    .resources
                    .attribute("ReactionsTable", "StreamArn")
                    .expect("the Reactions table has a stream");
                events::stream_insert(stream_arn, &format!("cold-liker-{spawn}"), spawn, now_ms)
            }
        }
    }

    /// Panics unless the response is the handler's success.
    fn check(self, function: &str, response: &[u8]) {
        let response: Value = serde_json::from_slice(response).unwrap_or_else(|e| {
            panic!(
                "{function} answered non-JSON ({e}): {}",
                String::from_utf8_lossy(response)
            )
        });
        let served = match self {
            Event::PutReaction | Event::GetLikeCount => response["statusCode"]
                .as_u64()
                .is_some_and(|status| (200..300).contains(&status)),
            Event::StreamInsert => response["batchItemFailures"]
                .as_array()
                .is_some_and(Vec::is_empty),
        };
        assert!(served, "{function} did not succeed: {response}");
    }
}

fn request_id(spawn: u64, now_ms: i64) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", spawn, now_ms)
}

/// A measured function and how Lambda would start it.
struct Target {
    function: Measured,
    bootstrap: PathBuf,
    environment: BTreeMap<String, String>,
}

/// One cold start, in durations from just before the spawn.
struct Sample {
    init: Duration,
    served: Duration,
    /// CPU time of all the bootstrap's threads when its response arrived.
    cpu: Duration,
    /// VmHWM when its response arrived, in KiB.
    peak_rss_kib: u64,
}

#[tokio::main]
async fn main() {
    let spawns = likes_tests::env_count("LIKES_BENCH_SPAWNS", 15) as u64;
    let started = Instant::now();
    let lambda_dir = lambda_dir();
    let stack = TestStack::builder().as_deployed().start().await;
    // The stream mapping runs in this process; paused, it adds no load on the emulator.
    for pipeline in stack.stack.pipelines() {
        pipeline.pause();
    }
    let bootstrap = Bootstrap::inspect(&lambda_dir);

    let targets: Vec<Target> = MEASURED
        .into_iter()
        .map(|function| Target {
            function,
            bootstrap: lambda_dir.join(BOOTSTRAP).join("bootstrap"),
            environment: lambda_environment(&stack, function.logical_id),
        })
        .collect();
    // Before the cold starts: besides the figures for scale, its hundred-odd requests carry
    // the emulator past a one-off stall of 60-70 ms that otherwise lands on one early start.
    let emulator = emulator::time(&stack).await;
    let mut samples: Vec<Vec<Sample>> = targets.iter().map(|_| Vec::new()).collect();
    // Round robin, so drift in the emulator or the machine touches every function alike;
    // round 0 warms the emulator's tables and the page cache and is not counted.
    for round in 0..=spawns {
        for (target, samples) in targets.iter().zip(&mut samples) {
            let sample = cold_start(&stack, target, round).await;
            if round > 0 {
                samples.push(sample);
            }
        }
    }

    print_conditions(spawns);
    print_size(&bootstrap);
    print_cold_starts(&targets, &samples, spawns);
    println!(
        "   For scale, the emulator's round trips (not DynamoDB's), warm client in this process:"
    );
    println!(
        "   UpdateItem {:.1} ms (put-reaction's write), 2-item TransactWriteItems {:.1} ms (the",
        emulator.update_item_ms, emulator.small_transaction_ms
    );
    println!("   aggregator's chunk: count row + claim; it also calls Kinesis PutRecords).");
    println!(
        "\n(bench took {:.1} s, release build not included)",
        started.elapsed().as_secs_f64()
    );
}

/// Spawns the bootstrap, serves it one event, and kills it by its pid once it answered.
async fn cold_start(stack: &TestStack, target: &Target, spawn: u64) -> Sample {
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

/// The environment Lambda gives the function: its reserved variables, the function's own
/// from template.yaml resolved against the local stack, and the emulator for AWS.
fn lambda_environment(stack: &TestStack, logical_id: &str) -> BTreeMap<String, String> {
    let template = &stack.stack.template;
    let mut environment = stack
        .stack
        .resources
        .function_environment(template, logical_id, &Default::default())
        .unwrap_or_else(|e| panic!("{logical_id}: {e}"));
    let memory = template
        .function_property(logical_id, "MemorySize")
        .and_then(serde_yaml::Value::as_u64)
        .unwrap_or(128);
    // Functions are not created in the emulator: a name as a stack called `likes` gives them.
    let name = format!("likes-{logical_id}");
    let region = stack.stack.aws.sdk.region().map_or_else(
        || likes_local::aws::LOCAL_REGION.to_owned(),
        |r| r.to_string(),
    );
    let from_env = |name: &str, default: &str| std::env::var(name).unwrap_or(default.to_owned());
    let log_format = template
        .function_property(logical_id, "LoggingConfig")
        .and_then(|c| c["LogFormat"].as_str())
        .unwrap_or("Text");
    environment.extend(
        [
            ("AWS_LAMBDA_FUNCTION_NAME", name.clone()),
            (
                "_HANDLER",
                template
                    .handler(logical_id)
                    .expect("every function names its Handler"),
            ),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory.to_string()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
            ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
            (
                "AWS_LAMBDA_LOG_STREAM_NAME",
                "2026/01/01/[$LATEST]00000000000000000000000000000000".to_owned(),
            ),
            ("AWS_LAMBDA_LOG_FORMAT", log_format.to_owned()),
            ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".to_owned()),
            ("AWS_REGION", region.clone()),
            ("AWS_DEFAULT_REGION", region),
            ("AWS_ENDPOINT_URL", stack.stack.aws.endpoint_url.clone()),
            ("AWS_ACCESS_KEY_ID", from_env("AWS_ACCESS_KEY_ID", "test")),
            (
                "AWS_SECRET_ACCESS_KEY",
                from_env("AWS_SECRET_ACCESS_KEY", "test"),
            ),
            ("PATH", "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("TZ", ":UTC".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    environment
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

/// The bin every function runs (`functions/`): `target/lambda/likes/bootstrap`.
const BOOTSTRAP: &str = "likes";

/// What `target/lambda/likes/bootstrap` is, read from the file.
struct Bootstrap {
    bytes: u64,
    arch: &'static str,
    stripped: bool,
}

impl Bootstrap {
    fn inspect(lambda_dir: &Path) -> Self {
        let path = lambda_dir.join(BOOTSTRAP).join("bootstrap");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; `make bench-cold-start` builds it first",
                path.display()
            )
        });
        let sections = section_names(&bytes)
            .unwrap_or_else(|| panic!("{} is not a 64-bit ELF file", path.display()));
        let has = |name: &str| sections.iter().any(|s| s == name);
        assert!(
            !has(".debug_info"),
            "{} is a debug build (make build-native); `make bench-cold-start` builds release bootstraps first",
            path.display()
        );
        // e_machine, at offset 18 of the ELF header.
        let arch = match bytes[18..20] {
            [0x3e, 0] => "x86_64",
            [0xb7, 0] => "aarch64",
            _ => "unknown",
        };
        Self {
            bytes: bytes.len() as u64,
            arch,
            stripped: !has(".symtab"),
        }
    }
}

/// The section names of a little-endian ELF64 file, from its section header table.
fn section_names(elf: &[u8]) -> Option<Vec<String>> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    // "\x7fELF", ELFCLASS64, ELFDATA2LSB.
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let table = u64_at(0x28)? as usize;
    let entry = usize::from(u16_at(0x3a)?);
    let count = usize::from(u16_at(0x3c)?);
    let header = |index: usize| table + index * entry;
    let names = header(usize::from(u16_at(0x3e)?));
    let names = elf.get(u64_at(names + 0x18)? as usize..)?;
    (0..count)
        .map(|index| {
            let name = names.get(u32_at(header(index))? as usize..)?;
            let end = name.iter().position(|&b| b == 0)?;
            Some(String::from_utf8_lossy(&name[..end]).into_owned())
        })
        .collect()
}

fn lambda_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("lambda")
}

/// What the figures include and what they leave out.
const CONDITIONS: &str =
    "  Release bootstraps for the host, x86_64 (cargo lambda build --release with the workspace's
  [profile.release]: opt-level \"s\", thin LTO, one codegen unit, panic=unwind; cargo lambda
  strips them). The template deploys arm64; the aarch64 standard library is not
  installed here, so arm64 sizes and starts are not measured.
  Runtime API: a stand-in in this process on 127.0.0.1, one event per process.
  Included: fork/exec of the bootstrap, the runtime's start, Config::from_env, the SDK config
  and clients, GET next, the handler with its AWS calls on a cold connection, the response POST.
  Not included: Lambda's sandbox (Firecracker microVM) start and code download; DNS and TLS to
  AWS endpoints (the emulator is plain HTTP on loopback; in AWS the first call opens a TLS
  session); Lambda's CPU share (one vCPU at 1,769 MB, so about 0.14 vCPU at the template's
  256 MB: the CPU column is the figure that share stretches).";

fn print_conditions(spawns: u64) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let endpoint = match std::env::var_os("AWS_ENDPOINT_URL") {
        Some(_) => "AWS_ENDPOINT_URL (under `make bench-cold-start`: the offline emulator)",
        None => "an offline emulator this bench started",
    };
    println!("Likes cold start and bootstrap size: figures, not a timed test");
    println!("{CONDITIONS}");
    println!("  {cpus} CPUs; AWS endpoint: {endpoint}.");
    println!(
        "  {spawns} spawns per function after one uncounted warm-up, round robin across functions."
    );
}

fn print_size(bootstrap: &Bootstrap) {
    println!("\n1. Bootstrap size (target/lambda/{BOOTSTRAP}/bootstrap, as cargo lambda builds it; every function runs it)");
    println!("   {:>8}  {:<8} stripped", "MB", "arch");
    println!(
        "   {:>8.2}  {:<8} {}",
        bootstrap.bytes as f64 / 1e6,
        bootstrap.arch,
        if bootstrap.stripped { "yes" } else { "no" }
    );
}

fn print_cold_starts(targets: &[Target], samples: &[Vec<Sample>], spawns: u64) {
    let p95 = match (95 * spawns).div_ceil(100) {
        rank if rank >= spawns => "the slowest".to_owned(),
        rank => format!("the {rank}th fastest"),
    };
    println!("\n2. Cold start, ms from spawn: p50 / p95 (nearest rank: of {spawns} spawns, {p95})");
    println!("   init = spawn → first GET next; served = spawn → first response POSTed;");
    println!(
        "   invoke = served - init (the first invocation on a cold process); CPU = all threads,"
    );
    println!("   spawn → served; peak RSS = the largest VmHWM when the response arrived.");
    println!(
        "   {:<16} {:>6} {:>15} {:>15} {:>15} {:>9} {:>10}",
        "function", "memory", "init", "served", "invoke", "CPU p50", "peak RSS"
    );
    for (target, samples) in targets.iter().zip(samples) {
        let ms = |pick: fn(&Sample) -> Duration| -> Vec<f64> {
            samples
                .iter()
                .map(|s| pick(s).as_secs_f64() * 1000.0)
                .collect()
        };
        let pair = |values: Vec<f64>| {
            format!(
                "{:.1} / {:.1}",
                percentile(&values, 50),
                percentile(&values, 95)
            )
        };
        let peak = samples.iter().map(|s| s.peak_rss_kib).max().unwrap_or(0);
        println!(
            "   {:<16} {:>4}MB {:>15} {:>15} {:>15} {:>7.1}ms {:>7.1}MiB",
            target.environment["_HANDLER"],
            target.environment["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"],
            pair(ms(|s| s.init)),
            pair(ms(|s| s.served)),
            pair(ms(|s| s.served - s.init)),
            percentile(&ms(|s| s.cpu), 50),
            peak as f64 / 1024.0,
        );
    }
}

/// Nearest rank.
fn percentile(values: &[f64], percent: usize) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied().unwrap_or(f64::NAN)
}
