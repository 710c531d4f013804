//! EventBridge Scheduler, locally: the template's schedules, really fired. Every `ScheduleV2`
//! event of a function invokes it in-process (built from the registry by its `Handler`) at
//! the schedule's `rate(...)`, once at start and then every period, with the Lambda context (deadline from the function's
//! `Timeout`) the cloud would give it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;
use lambda_runtime::Context;
use likes_functions::Invoke;
use serde_yaml::Value;
use tokio::task::JoinHandle;

use crate::resources::Resources;
use crate::template::Template;

const DEFAULT_TIMEOUT_SECONDS: u64 = 3;

#[derive(Debug, thiserror::Error)]
#[error("{function} schedule {event}: {message}")]
pub struct ScheduleError {
    function: String,
    event: String,
    message: String,
}

/// One `ScheduleV2` event, resolved against the local resources.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub function: String,
    pub event: String,
    pub every: Duration,
    pub timeout: Duration,
    handler: String,
    environment: BTreeMap<String, String>,
}

impl Schedule {
    /// Every `ScheduleV2` event in the template.
    pub fn all(
        template: &Template,
        resources: &Resources,
        overrides: &BTreeMap<String, String>,
    ) -> Result<Vec<Self>, ScheduleError> {
        let mut schedules = Vec::new();
        for (function, resource) in template.resources_of("AWS::Serverless::Function") {
            let Some(events) = resource["Properties"]["Events"].as_mapping() else {
                continue;
            };
            for (event, spec) in events {
                if spec["Type"].as_str() != Some("ScheduleV2") {
                    continue;
                }
                let event = event.as_str().unwrap_or_default().to_owned();
                let failed = |message: String| ScheduleError {
                    function: function.clone(),
                    event: event.clone(),
                    message,
                };
                let expression = resources
                    .resolve(template, &spec["Properties"]["ScheduleExpression"])
                    .ok_or_else(|| {
                        failed("no ScheduleExpression the local stack can resolve".into())
                    })?;
                schedules.push(Self {
                    every: rate(&expression).map_err(failed)?,
                    timeout: Duration::from_secs(
                        template
                            .function_property(&function, "Timeout")
                            .and_then(Value::as_u64)
                            .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
                    ),
                    handler: template
                        .handler(&function)
                        .map_err(|e| failed(e.to_string()))?,
                    environment: resources
                        .function_environment(template, &function, overrides)
                        .map_err(failed)?,
                    function: function.clone(),
                    event,
                });
            }
        }
        Ok(schedules)
    }

    /// Fires the schedule until the task is aborted. `virtual_split` is the number of
    /// virtual shards the local stream pollers split each real shard into.
    pub fn start(
        &self,
        sdk: &SdkConfig,
        virtual_split: usize,
    ) -> Result<JoinHandle<()>, ScheduleError> {
        let failed = |message: String| ScheduleError {
            function: self.function.clone(),
            event: self.event.clone(),
            message,
        };
        let target: Arc<dyn Invoke> = Arc::from(
            likes_functions::build(
                &self.handler,
                &|name| self.environment.get(name).cloned(),
                &crate::aws::local_clients(sdk, virtual_split),
            )
            .map_err(|e| failed(e.to_string()))?,
        );
        let schedule = self.clone();
        Ok(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(schedule.every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Runs belong to this task: aborting it (the stack stopping) ends them too.
            let mut runs = tokio::task::JoinSet::new();
            loop {
                ticks.tick().await;
                while runs.try_join_next().is_some() {}
                // EventBridge Scheduler does not wait for a run to end before the next one.
                let (target, schedule) = (target.clone(), schedule.clone());
                runs.spawn(async move {
                    // EventBridge Scheduler's default input is an empty object.
                    let result = target.invoke(b"{}", schedule.context()).await;
                    if let Err(err) = result {
                        tracing::error!(function = %schedule.function, error = %err, "scheduled run failed");
                    }
                });
            }
        }))
    }

    fn context(&self) -> Context {
        let mut context = Context::default();
        context.request_id = uuid::Uuid::new_v4().to_string();
        context.deadline = (likes_core::clock::now_ms() as u64) + self.timeout.as_millis() as u64;
        context.invoked_function_arn = format!("local:{}", self.function);
        context
    }
}

/// `rate(<n> minute|minutes|hour|hours|day|days)`, as EventBridge Scheduler takes it.
fn rate(expression: &str) -> Result<Duration, String> {
    let refused =
        || format!("{expression:?} is not a rate(...) expression the local scheduler fires");
    let inner = expression
        .strip_prefix("rate(")
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(refused)?;
    let (n, unit) = inner.trim().split_once(' ').ok_or_else(refused)?;
    let n: u64 = n.parse().ok().filter(|n| *n > 0).ok_or_else(refused)?;
    let seconds = match unit.trim() {
        "minute" | "minutes" => 60,
        "hour" | "hours" => 3600,
        "day" | "days" => 86_400,
        _ => return Err(refused()),
    };
    Ok(Duration::from_secs(n * seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_read_like_eventbridge_scheduler_reads_them() {
        assert_eq!(rate("rate(1 minute)"), Ok(Duration::from_secs(60)));
        assert_eq!(rate("rate(2 hours)"), Ok(Duration::from_secs(7200)));
        assert!(rate("cron(0 * * * ? *)").is_err());
        assert!(rate("rate(0 minutes)").is_err());
        assert!(rate("rate(5 fortnights)").is_err());
    }

    #[test]
    fn the_template_schedules_the_pulse_every_minute() {
        let template = Template::load(&crate::template::default_path()).unwrap();
        let pulse = template
            .resource("PulseFunction")
            .expect("template.yaml declares PulseFunction");
        let spec = &pulse["Properties"]["Events"]["Tick"];
        assert_eq!(spec["Type"].as_str(), Some("ScheduleV2"));
        assert_eq!(
            rate(spec["Properties"]["ScheduleExpression"].as_str().unwrap()),
            Ok(Duration::from_secs(60))
        );
    }
}
