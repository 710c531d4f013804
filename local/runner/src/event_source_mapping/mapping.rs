//! What a `Type: DynamoDB` or `Type: Kinesis` function event of the template declares,
//! resolved against the local resources.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_yaml::Value as Yaml;

use crate::resources::Resources;
use crate::template::{get_att, Template};

/// SAM's default function timeout.
const DEFAULT_TIMEOUT_SECONDS: u64 = 3;
/// Lambda's defaults and bounds for a DynamoDB stream mapping.
const DEFAULT_BATCH_SIZE: usize = 100;
const MAX_BATCH_SIZE: usize = 10_000;
const MAX_TUMBLING_WINDOW_SECONDS: u64 = 900;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartingPosition {
    TrimHorizon,
    Latest,
}

/// The stream API a mapping polls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamSource {
    /// A table's stream; DynamoDB places a record on a shard by the table's HASH key
    /// attribute, which the local mapping splits virtual shards by.
    DynamoDb { partition_key: String },
    /// A Kinesis stream: each shard is polled as it is, never split (ParallelizationFactor 1).
    Kinesis,
}

/// Where a batch's metadata goes once retries or record age are exhausted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnFailureQueue {
    pub url: String,
    pub arn: String,
}

/// One `Type: DynamoDB` or `Type: Kinesis` event of a function, as the template declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingConfig {
    /// The function's logical id and the event's name.
    pub function: String,
    pub event: String,
    /// The function's `Handler`.
    pub handler: String,
    pub function_arn: String,
    pub stream_arn: String,
    pub source: StreamSource,
    pub starting_position: StartingPosition,
    pub batch_size: usize,
    pub batching_window: Duration,
    /// `Some`: the function gets time window events over aligned windows of this length.
    pub tumbling_window: Option<Duration>,
    /// `None`: retry until the records expire (`-1` or absent).
    pub maximum_retry_attempts: Option<u32>,
    /// `None`: records never expire (`-1` or absent).
    pub maximum_record_age: Option<Duration>,
    pub report_batch_item_failures: bool,
    pub on_failure: Option<OnFailureQueue>,
    pub enabled: bool,
    pub function_timeout: Duration,
    /// The function's environment, resolved against the local resources.
    pub environment: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
#[error("{function} event {event}: {message}")]
pub struct MappingError {
    pub function: String,
    pub event: String,
    pub message: String,
}

impl MappingConfig {
    /// The mappings of every `Type: DynamoDB` and `Type: Kinesis` event in the template;
    /// `property_overrides` are set over each DynamoDB-stream event's `Properties` (a test of
    /// the count pipeline trying an option the template does not declare yet).
    pub fn all(
        template: &Template,
        resources: &Resources,
        prefix: &str,
        environment_overrides: &BTreeMap<String, String>,
        property_overrides: &BTreeMap<String, Yaml>,
    ) -> Result<Vec<Self>, MappingError> {
        let mut mappings = Vec::new();
        for (function, resource) in template.resources_of("AWS::Serverless::Function") {
            let Some(events) = resource["Properties"]["Events"].as_mapping() else {
                continue;
            };
            for (event, spec) in events {
                let kinesis = match spec["Type"].as_str() {
                    Some("DynamoDB") => false,
                    Some("Kinesis") => true,
                    _ => continue,
                };
                let event = event.as_str().unwrap_or_default().to_owned();
                let mut props = spec["Properties"].clone();
                if let Some(map) = props.as_mapping_mut().filter(|_| !kinesis) {
                    for (name, value) in property_overrides {
                        map.insert(Yaml::from(name.as_str()), value.clone());
                    }
                }
                let declared = Declared {
                    template,
                    resources,
                    prefix,
                    function: &function,
                    props: &props,
                };
                let mapping = declared
                    .parse(&event, kinesis, environment_overrides)
                    .map_err(|message| MappingError {
                        function: function.clone(),
                        event: event.clone(),
                        message,
                    })?;
                mappings.push(mapping);
            }
        }
        Ok(mappings)
    }
}

/// One event's properties and what they are resolved against.
struct Declared<'a> {
    template: &'a Template,
    resources: &'a Resources,
    prefix: &'a str,
    function: &'a str,
    props: &'a Yaml,
}

impl Declared<'_> {
    fn parse(
        &self,
        event: &str,
        kinesis: bool,
        environment_overrides: &BTreeMap<String, String>,
    ) -> Result<MappingConfig, String> {
        let props = self.props;
        // What AWS offers but the local mapping does not emulate is refused, not ignored:
        // the tests would otherwise prove semantics the cloud does not have.
        if !props["FilterCriteria"].is_null() {
            return Err("FilterCriteria is not emulated locally".into());
        }
        if props["ParallelizationFactor"].as_u64().unwrap_or(1) != 1 {
            return Err("only ParallelizationFactor 1 is emulated locally".into());
        }
        if props["BisectBatchOnFunctionError"].as_bool() == Some(true) {
            return Err("BisectBatchOnFunctionError is not emulated locally".into());
        }
        let stream_arn = self
            .resources
            .resolve(self.template, &props["Stream"])
            .ok_or("Stream does not resolve to a local table's stream or Kinesis stream")?;
        let source = if kinesis {
            StreamSource::Kinesis
        } else {
            StreamSource::DynamoDb {
                partition_key: self.partition_key()?,
            }
        };
        let starting_position = match props["StartingPosition"].as_str() {
            Some("TRIM_HORIZON") => StartingPosition::TrimHorizon,
            Some("LATEST") => StartingPosition::Latest,
            other => {
                return Err(format!(
                    "StartingPosition {other:?} is not TRIM_HORIZON or LATEST"
                ))
            }
        };
        let batch_size = match props["BatchSize"].as_u64() {
            None => DEFAULT_BATCH_SIZE,
            Some(n) if (1..=MAX_BATCH_SIZE as u64).contains(&n) => n as usize,
            Some(n) => return Err(format!("BatchSize {n} is outside 1..={MAX_BATCH_SIZE}")),
        };
        let tumbling_window = match props["TumblingWindowInSeconds"].as_u64() {
            None | Some(0) => None,
            Some(_) if kinesis => {
                return Err("TumblingWindowInSeconds is not emulated locally for Kinesis".into())
            }
            Some(n) if n <= MAX_TUMBLING_WINDOW_SECONDS => Some(Duration::from_secs(n)),
            Some(n) => {
                return Err(format!(
                    "TumblingWindowInSeconds {n} is above {MAX_TUMBLING_WINDOW_SECONDS}"
                ))
            }
        };
        let seconds = |name: &str| props[name].as_i64().filter(|n| *n >= 0).map(|n| n as u64);
        let environment = self.resources.function_environment(
            self.template,
            self.function,
            environment_overrides,
        )?;
        let (region, account) = arn_region_account(&stream_arn);
        Ok(MappingConfig {
            function: self.function.to_owned(),
            event: event.to_owned(),
            handler: self
                .template
                .handler(self.function)
                .map_err(|e| e.to_string())?,
            function_arn: format!(
                "arn:aws:lambda:{region}:{account}:function:{}-{}",
                self.prefix, self.function
            ),
            stream_arn,
            source,
            starting_position,
            batch_size,
            batching_window: Duration::from_secs(
                props["MaximumBatchingWindowInSeconds"]
                    .as_u64()
                    .unwrap_or(0),
            ),
            tumbling_window,
            maximum_retry_attempts: seconds("MaximumRetryAttempts").map(|n| n as u32),
            maximum_record_age: seconds("MaximumRecordAgeInSeconds").map(Duration::from_secs),
            report_batch_item_failures: props["FunctionResponseTypes"]
                .as_sequence()
                .into_iter()
                .flatten()
                .any(|t| t.as_str() == Some("ReportBatchItemFailures")),
            on_failure: self.on_failure()?,
            enabled: props["Enabled"].as_bool().unwrap_or(true),
            function_timeout: Duration::from_secs(
                self.template
                    .function_property(self.function, "Timeout")
                    .and_then(Yaml::as_u64)
                    .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
            ),
            environment,
        })
    }

    /// The HASH key of the table whose stream is mapped.
    fn partition_key(&self) -> Result<String, String> {
        let (table, _) = get_att(&self.props["Stream"])
            .ok_or("Stream is not a !GetAtt of a table's StreamArn")?;
        self.template
            .resource(&table)
            .and_then(|t| t["Properties"]["KeySchema"].as_sequence())
            .into_iter()
            .flatten()
            .find(|key| key["KeyType"].as_str() == Some("HASH"))
            .and_then(|key| key["AttributeName"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| format!("table {table} declares no HASH key"))
    }

    fn on_failure(&self) -> Result<Option<OnFailureQueue>, String> {
        let destination = &self.props["DestinationConfig"]["OnFailure"];
        if destination.is_null() {
            return Ok(None);
        }
        if destination["Type"].as_str().is_some_and(|t| t != "SQS") {
            return Err("only an SQS on-failure destination is emulated locally".into());
        }
        let (queue, _) = get_att(&destination["Destination"])
            .ok_or("DestinationConfig.OnFailure.Destination is not a !GetAtt of a queue")?;
        let url = self
            .resources
            .name(&queue)
            .ok_or_else(|| format!("on-failure queue {queue} was not created locally"))?;
        let arn = self
            .resources
            .attribute(&queue, "Arn")
            .ok_or_else(|| format!("on-failure queue {queue} has no ARN"))?;
        Ok(Some(OnFailureQueue {
            url: url.to_owned(),
            arn: arn.to_owned(),
        }))
    }
}

fn arn_region_account(arn: &str) -> (String, String) {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let part = |i: usize| parts.get(i).copied().unwrap_or_default().to_owned();
    (part(3), part(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = r#"
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema:
        - {AttributeName: user_id, KeyType: HASH}
        - {AttributeName: item_id, KeyType: RANGE}
  Queue:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Handler: aggregator
      Timeout: 60
      Environment: { Variables: { COUNT_SHARDS: "4" } }
      Events:
        Stream:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: 1000
            MaximumBatchingWindowInSeconds: 1
            FunctionResponseTypes: [ReportBatchItemFailures]
            MaximumRetryAttempts: 10
            MaximumRecordAgeInSeconds: -1
            DestinationConfig: { OnFailure: { Type: SQS, Destination: !GetAtt Queue.Arn } }
"#;

    fn mappings(overrides: &BTreeMap<String, Yaml>) -> Result<Vec<MappingConfig>, MappingError> {
        let template = Template::parse(TEMPLATE).unwrap();
        let mut resources = Resources::default();
        let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/p-Table/stream/x";
        resources
            .attributes
            .insert("Table.StreamArn".into(), arn.into());
        resources
            .attributes
            .insert("Queue.Arn".into(), "arn:q".into());
        resources.names.insert("Queue".into(), "url:q".into());
        MappingConfig::all(&template, &resources, "p", &BTreeMap::new(), overrides)
    }

    #[test]
    fn the_template_mapping_is_read_with_its_properties() {
        let mappings = mappings(&BTreeMap::new()).unwrap();
        assert_eq!(mappings.len(), 1);
        let m = &mappings[0];
        assert_eq!(
            (m.batch_size, m.batching_window),
            (1000, Duration::from_secs(1))
        );
        assert_eq!(
            m.source,
            StreamSource::DynamoDb {
                partition_key: "user_id".into()
            }
        );
        assert_eq!(m.tumbling_window, None);
        assert_eq!(m.maximum_retry_attempts, Some(10));
        assert_eq!(m.maximum_record_age, None);
        assert!(m.report_batch_item_failures);
        assert_eq!(m.on_failure.as_ref().unwrap().url, "url:q");
        assert_eq!(m.function_timeout, Duration::from_secs(60));
        assert_eq!(
            m.function_arn,
            "arn:aws:lambda:us-east-1:123456789012:function:p-Fn"
        );
        assert_eq!(m.environment["COUNT_SHARDS"], "4");
    }

    #[test]
    fn a_tumbling_window_is_read_and_bounded() {
        let window = |seconds: u64| {
            let overrides = [("TumblingWindowInSeconds".to_owned(), Yaml::from(seconds))];
            mappings(&overrides.into()).map(|m| m[0].tumbling_window)
        };
        assert_eq!(window(30).unwrap(), Some(Duration::from_secs(30)));
        assert_eq!(window(0).unwrap(), None);
        assert!(window(901).is_err());
    }

    #[test]
    fn a_kinesis_event_is_a_mapping_of_its_stream_without_virtual_shards() {
        let template = |extra: &str| {
            Template::parse(&format!(
                r#"
Resources:
  Log:
    Type: AWS::Kinesis::Stream
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Handler: leaderboard
      Events:
        Log:
          Type: Kinesis
          Properties:
            Stream: !GetAtt Log.Arn
            StartingPosition: LATEST
            BatchSize: 100
            BisectBatchOnFunctionError: false
{extra}"#
            ))
            .unwrap()
        };
        let mut resources = Resources::default();
        let arn = "arn:aws:kinesis:us-east-1:123456789012:stream/p-Log";
        resources.attributes.insert("Log.Arn".into(), arn.into());
        let read = |template: &Template, overrides: &BTreeMap<String, Yaml>| {
            MappingConfig::all(template, &resources, "p", &BTreeMap::new(), overrides)
        };
        let plain = template("");
        let mappings = read(&plain, &BTreeMap::new()).unwrap();
        assert_eq!(mappings.len(), 1);
        let m = &mappings[0];
        assert_eq!(m.source, StreamSource::Kinesis);
        assert_eq!(m.stream_arn, arn);
        assert_eq!(m.starting_position, StartingPosition::Latest);
        assert_eq!(m.batch_size, 100);
        let windowed = template("            TumblingWindowInSeconds: 30\n");
        assert!(
            read(&windowed, &BTreeMap::new()).is_err(),
            "refused, not emulated"
        );
        // A count-pipeline test's overrides are for the DynamoDB-stream mappings only.
        let window = [("TumblingWindowInSeconds".to_owned(), Yaml::from(30))];
        assert!(read(&plain, &window.into()).is_ok());
    }
}
