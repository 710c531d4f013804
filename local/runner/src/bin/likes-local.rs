//! `likes-local`: runs Likes on this machine with no AWS account and no Docker.
//!
//! - `likes-local run [--addr 127.0.0.1:3000] [--ws-addr 127.0.0.1:3001]
//!   [--web-addr 127.0.0.1:8080] [--prefix likes] [--pitr-lag 300] [--parameter NAME=VALUE]…`:
//!   the whole service until Ctrl-C: resources, the HTTP front, the live WebSocket front, the
//!   reference web client's origin and the stream pollers, with template parameters set over
//!   their defaults as a deploy sets them.
//! - `likes-local exec -- CMD ARGS…`: runs CMD with `AWS_ENDPOINT_URL` set to a fresh emulator,
//!   then stops it (how `make test` gives the test suite its emulator).
//! - `likes-local token SUB [--ttl SECONDS] [--scope SCOPES]`: prints a bearer token the local
//!   front accepts, with a `scope` claim when asked (`--scope likes/moderate` for a moderator,
//!   `likes/admin` for a platform admin setting namespace rules, `likes/items` for a platform
//!   service registering owners; several space-separated).
//! - `likes-local reconcile [--at RFC3339] [--wait]`: one whole reconciliation now (cut at the
//!   latest epoch boundary before the given time, default the latest one PITR can export)
//!   against the running stack or `AWS_ENDPOINT_URL`, with progress, then its drift report;
//!   exit 3 when no cut can be exported yet (with `--wait`, it waits for one), 1 if the run
//!   cannot finish.

use std::net::SocketAddr;
use std::process::ExitCode;

use likes_local::aws::{AwsTarget, LOCAL_REGION};
use likes_local::jwt::JwtAuthorizer;
use likes_local::stack::{self, Schedules, Stack, StackOptions};

const USAGE: &str =
    "usage: likes-local run [--addr HOST:PORT] [--ws-addr HOST:PORT] [--web-addr HOST:PORT] [--prefix NAME] [--pitr-lag SECONDS] [--parameter NAME=VALUE]...
       likes-local exec -- CMD [ARGS...]
       likes-local token SUB [--ttl SECONDS] [--scope SCOPES]
       likes-local reconcile [--at RFC3339] [--wait]";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options: &[&str] = match args.first().map(String::as_str) {
        Some("run") => &[
            "--addr",
            "--ws-addr",
            "--web-addr",
            "--prefix",
            "--pitr-lag",
            "--parameter",
        ],
        Some("token") => &["--ttl", "--scope"],
        Some("reconcile") => &["--at", "--wait"],
        _ => &[],
    };
    // A command's own arguments (after `exec`'s `--`) are not this program's options.
    let own = args.iter().skip(1).take_while(|a| *a != "--");
    if let Some(unknown) = own
        .clone()
        .find(|a| a.starts_with('-') && !options.contains(&a.as_str()))
    {
        if unknown == "--help" || unknown == "-h" {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        eprintln!("likes-local: unknown option {unknown}\n{USAGE}");
        return ExitCode::from(2);
    }
    let result = match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]).await,
        Some("exec") => exec(&args[1..]).await,
        Some("token") => token(&args[1..]),
        Some("reconcile") => reconcile(&args[1..]).await,
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("likes-local: {message}");
            ExitCode::from(2)
        }
    }
}

/// The value after `--name`, if given.
fn option<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

async fn run(args: &[String]) -> Result<ExitCode, String> {
    lambda_runtime::tracing::init_default_subscriber();
    let http_addr: SocketAddr = option(args, "--addr")
        .unwrap_or("127.0.0.1:3000")
        .parse()
        .map_err(|e| format!("--addr: {e}"))?;
    let ws_addr: SocketAddr = option(args, "--ws-addr")
        .unwrap_or("127.0.0.1:3001")
        .parse()
        .map_err(|e| format!("--ws-addr: {e}"))?;
    let web_addr: SocketAddr = option(args, "--web-addr")
        .unwrap_or("127.0.0.1:8080")
        .parse()
        .map_err(|e| format!("--web-addr: {e}"))?;
    let prefix = option(args, "--prefix").unwrap_or("likes").to_owned();
    let parameters = args
        .windows(2)
        .filter(|pair| pair[0] == "--parameter")
        .map(|pair| {
            pair[1]
                .split_once('=')
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .ok_or_else(|| format!("--parameter {:?}: expected NAME=VALUE", pair[1]))
        })
        .collect::<Result<_, _>>()?;
    let pitr_lag = match option(args, "--pitr-lag") {
        Some(text) => std::time::Duration::from_secs(
            text.parse()
                .map_err(|_| format!("--pitr-lag {text:?}: expected whole seconds"))?,
        ),
        None => likes_local::emulator::AWS_PITR_LAG,
    };
    let aws = AwsTarget::connect_with(pitr_lag)
        .await
        .map_err(|e| e.to_string())?;
    let options = StackOptions {
        prefix,
        http_addr,
        ws_addr,
        web_addr,
        environment_overrides: Default::default(),
        mapping_overrides: Default::default(),
        stream_shards: stack::stream_shards_from_env().map_err(|e| e.to_string())?,
        schedules: Schedules::All,
        parameters,
    };
    let stack = Stack::start(aws, options)
        .await
        .map_err(|e| e.to_string())?;
    let emulator = match stack.aws.emulator_pid() {
        Some(pid) => format!("offline emulator, pid {pid}"),
        None => "from AWS_ENDPOINT_URL".to_owned(),
    };
    println!("Likes is running locally.");
    println!("  HTTP API      {}", stack.http_url());
    println!(
        "  Live counts   {}/?token=<token> (WebSocket)",
        stack.ws_url()
    );
    println!("  Web client    {} (open it in a browser)", stack.web_url());
    println!(
        "  Token keys    {}/.well-known/jwks.json (POST {}/local/keys/rotate rotates them)",
        stack.web_url(),
        stack.web_url()
    );
    println!("  AWS endpoint  {} ({emulator})", stack.aws.endpoint_url);
    for (logical_id, name) in &stack.resources.names {
        println!("  {logical_id:<13} {name}");
    }
    for pipeline in stack.pipelines() {
        let mapping = pipeline.config();
        println!(
            "  Stream poller {}.{} -> {}: {} virtual shards, batch size {}, window {:?}, tumbling window {}, {} retries, on failure {}",
            mapping.function,
            mapping.event,
            mapping.handler,
            pipeline.virtual_shards(),
            mapping.batch_size,
            mapping.batching_window,
            mapping
                .tumbling_window
                .map_or("none".to_owned(), |w| format!("{w:?}")),
            mapping
                .maximum_retry_attempts
                .map_or("unlimited".to_owned(), |n| n.to_string()),
            mapping
                .on_failure
                .as_ref()
                .map_or("nothing (records are dropped)", |q| q.url.as_str()),
        );
    }
    let note = likes_local::operator::StackNote::write(&stack)?;
    println!("  Stack note    {} (for `make reconcile`)", note.display());
    println!("Get a token:   cargo run -q -p likes-local --bin likes-local -- token alice");
    println!("Ctrl-C stops everything this started.");
    tokio::signal::ctrl_c()
        .await
        .map_err(|e| format!("waiting for Ctrl-C: {e}"))?;
    println!("Stopping.");
    let _ = std::fs::remove_file(likes_local::operator::note_path());
    drop(stack);
    Ok(ExitCode::SUCCESS)
}

async fn exec(args: &[String]) -> Result<ExitCode, String> {
    let command = match args.first().map(String::as_str) {
        Some("--") => &args[1..],
        _ => args,
    };
    let (program, rest) = command.split_first().ok_or(USAGE)?;
    let aws = AwsTarget::connect().await.map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new(program);
    child.args(rest).env("AWS_ENDPOINT_URL", &aws.endpoint_url);
    if aws.emulator_pid().is_some() {
        child
            .env("AWS_REGION", LOCAL_REGION)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test");
    }
    let status = child
        .status()
        .await
        .map_err(|e| format!("running {program}: {e}"))?;
    drop(aws);
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

async fn reconcile(args: &[String]) -> Result<ExitCode, String> {
    let at_ms = option(args, "--at")
        .map(|text| likes_core::clock::parse_rfc3339(text).map_err(|e| format!("--at {e}")))
        .transpose()?;
    let wait = args.iter().any(|a| a == "--wait");
    match likes_local::operator::reconcile(at_ms, wait).await {
        Ok(report) => {
            println!("{}", report.summary());
            Ok(ExitCode::SUCCESS)
        }
        Err(likes_local::operator::Refused::NotYet(message)) => {
            eprintln!("likes-local reconcile: {message}");
            Ok(ExitCode::from(likes_local::operator::NOT_YET_STATUS))
        }
        Err(likes_local::operator::Refused::Failed(message)) => {
            eprintln!("likes-local reconcile: {message}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn token(args: &[String]) -> Result<ExitCode, String> {
    let sub = args.first().filter(|s| !s.starts_with("--")).ok_or(USAGE)?;
    let ttl: i64 = option(args, "--ttl")
        .unwrap_or("3600")
        .parse()
        .map_err(|e| format!("--ttl: {e}"))?;
    let now = likes_core::clock::now_ms() / 1000;
    let scope = option(args, "--scope");
    println!(
        "{}",
        JwtAuthorizer::from_env().mint_scoped(sub, scope, now, ttl)
    );
    Ok(ExitCode::SUCCESS)
}
