//! The printed figures: the conditions of the run, the bootstrap's size, and the cold starts
//! per function as percentiles.

use std::time::Duration;

use likes_tests::{percentile, say};

use crate::bootstrap::{Bootstrap, BOOTSTRAP};
use crate::spawn::{Sample, Target};

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

pub fn print_conditions(spawns: u64) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let endpoint = match std::env::var_os("AWS_ENDPOINT_URL") {
        Some(_) => "AWS_ENDPOINT_URL (under `make bench-cold-start`: the offline emulator)",
        None => "an offline emulator this bench started",
    };
    say!("Likes cold start and bootstrap size: figures, not a timed test");
    say!("{CONDITIONS}");
    say!("  {cpus} CPUs; AWS endpoint: {endpoint}.");
    say!(
        "  {spawns} spawns per function after one uncounted warm-up, round robin across functions."
    );
}

pub fn print_size(bootstrap: &Bootstrap) {
    say!("\n1. Bootstrap size (target/lambda/{BOOTSTRAP}/bootstrap, as cargo lambda builds it; every function runs it)");
    say!("   {:>8}  {:<8} stripped", "MB", "arch");
    say!(
        "   {:>8.2}  {:<8} {}",
        bootstrap.bytes as f64 / 1e6,
        bootstrap.arch,
        if bootstrap.stripped { "yes" } else { "no" }
    );
}

pub fn print_cold_starts(targets: &[Target], samples: &[Vec<Sample>], spawns: u64) {
    let p95 = match (95 * spawns).div_ceil(100) {
        rank if rank >= spawns => "the slowest".to_owned(),
        rank => format!("the {rank}th fastest"),
    };
    say!("\n2. Cold start, ms from spawn: p50 / p95 (nearest rank: of {spawns} spawns, {p95})");
    say!("   init = spawn → first GET next; served = spawn → first response POSTed;");
    say!("   invoke = served - init (the first invocation on a cold process); CPU = all threads,");
    say!("   spawn → served; peak RSS = the largest VmHWM when the response arrived.");
    say!(
        "   {:<16} {:>6} {:>15} {:>15} {:>15} {:>9} {:>10}",
        "function",
        "memory",
        "init",
        "served",
        "invoke",
        "CPU p50",
        "peak RSS"
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
                percentile(&values, 50.0),
                percentile(&values, 95.0)
            )
        };
        let peak = samples.iter().map(|s| s.peak_rss_kib).max().unwrap_or(0);
        say!(
            "   {:<16} {:>4}MB {:>15} {:>15} {:>15} {:>7.1}ms {:>7.1}MiB",
            target.environment["_HANDLER"],
            target.environment["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"],
            pair(ms(|s| s.init)),
            pair(ms(|s| s.served)),
            pair(ms(|s| s.served - s.init)),
            percentile(&ms(|s| s.cpu), 50.0),
            peak as f64 / 1024.0,
        );
    }
}
