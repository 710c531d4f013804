//! The loop of a scheduled function that ticks for most of its minute: EventBridge Scheduler
//! runs it every minute, and one invocation ticks every `tick` until `run_for` has passed or
//! the invocation's deadline nears.

use std::future::Future;
use std::time::Duration;

use lambda_runtime::LambdaEvent;
use likes_core::clock::now_ms;
use likes_store::metrics::Report;
use serde_json::{json, Value};

/// Ticking stops this long before the invocation's deadline.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

/// What one invocation's ticks did.
#[derive(Debug)]
struct Ticks<R> {
    ticks: u32,
    failed: u32,
    /// The last tick that succeeded.
    last: Option<R>,
}

/// Runs `tick` every `every` for `run_for`, or until `deadline_ms` (the invocation's, epoch
/// ms) nears. A failed tick is logged and counted as `TickFailures` in `namespace`; the next
/// one runs as planned.
async fn tick_for<R, E, F>(
    namespace: &'static str,
    run_for: Duration,
    every: Duration,
    deadline_ms: i64,
    mut tick: impl FnMut() -> F,
) -> Ticks<R>
where
    E: std::fmt::Display,
    F: Future<Output = Result<R, E>>,
{
    let started = tokio::time::Instant::now();
    let margin = DEADLINE_MARGIN.as_millis() as i64;
    let mut ticks = Ticks {
        ticks: 0,
        failed: 0,
        last: None,
    };
    loop {
        let tick_started = tokio::time::Instant::now();
        ticks.ticks += 1;
        match tick().await {
            Ok(report) => ticks.last = Some(report),
            Err(err) => {
                ticks.failed += 1;
                tracing::error!(error = %err, namespace, "tick failed; the next one runs as planned");
                Report::new(namespace)
                    .value("TickFailures", "Count", 1.0)
                    .emit();
            }
        }
        let next = tick_started + every;
        if next >= started + run_for || now_ms() + every.as_millis() as i64 + margin >= deadline_ms
        {
            return ticks;
        }
        tokio::time::sleep_until(next).await;
    }
}

/// One scheduled invocation of a function named `name`: [`tick_for`] until the event's
/// deadline nears, then `{"ticks", "failed_ticks", "as_of"}` (`as_of` of the last tick that
/// succeeded). Fails only when no tick succeeded, so a broken function shows in its errors.
pub async fn run_invocation<R, E, F>(
    name: &'static str,
    namespace: &'static str,
    (run_for, every): (Duration, Duration),
    event: LambdaEvent<Value>,
    as_of: impl Fn(&R) -> Option<i64>,
    tick: impl FnMut() -> F,
) -> Result<Value, lambda_runtime::Error>
where
    E: std::fmt::Display,
    F: Future<Output = Result<R, E>>,
{
    let deadline_ms = i64::try_from(event.context.deadline).unwrap_or(i64::MAX);
    let ticks = tick_for(namespace, run_for, every, deadline_ms, tick).await;
    if ticks.failed == ticks.ticks {
        return Err(format!("all {} {name} ticks failed", ticks.ticks).into());
    }
    Ok(json!({
        "ticks": ticks.ticks,
        "failed_ticks": ticks.failed,
        "as_of": ticks.last.as_ref().and_then(as_of),
    }))
}
