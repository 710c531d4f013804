//! How a test's stack is started: the plain stack, changed by each builder method.

use likes_local::aws::AwsTarget;
use likes_local::stack::{Schedules, Stack, StackOptions};
use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::{
    parameters_of, stream_shards, test_overrides, unique_prefix, TestStack,
    LEADERBOARD_REFRESH_FUNCTION, TEST_EPOCH_SECONDS,
};

/// What a test's stack is started with: [`TestStack::builder`]'s plain stack, changed by
/// each method, started by [`StackBuilder::start`].
#[derive(Debug, Clone)]
pub struct StackBuilder {
    environment: BTreeMap<String, String>,
    schedules: Schedules,
    mappings: BTreeMap<String, serde_yaml::Value>,
    stream_shards: usize,
    parameters: BTreeMap<String, String>,
    /// Where AWS is: `None` follows `LIKES_TEST_AWS` ([`Aws::from_env`]).
    aws: Option<Aws>,
}

/// What a test's stack calls AWS on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aws {
    /// The emulator (moto's server, started for the test), or `AWS_ENDPOINT_URL`.
    Emulator,
    /// The in-process simulator ([`AwsTarget::simulated`]): no Athena, no exports.
    Simulator,
}

impl Aws {
    /// `LIKES_TEST_AWS=simulator` runs a test on the simulator (`make check`'s fast tier);
    /// anything else, on the emulator.
    pub fn from_env() -> Self {
        match std::env::var("LIKES_TEST_AWS").as_deref() {
            Ok("simulator") => Self::Simulator,
            _ => Self::Emulator,
        }
    }
}

impl StackBuilder {
    /// The template's schedules that fire (none unless set).
    pub fn schedules(mut self, schedules: Schedules) -> Self {
        self.schedules = schedules;
        self
    }

    /// Every schedule of the template fires, as in `make run`: the pulse publishes `as_of`
    /// and writes probe rows.
    pub fn scheduled(self) -> Self {
        self.schedules(Schedules::All)
    }

    /// `function`'s schedules fire too (a logical id).
    pub fn fire(mut self, function: &str) -> Self {
        self.schedules = match self.schedules {
            Schedules::All => Schedules::All,
            Schedules::None => Schedules::Only(vec![function.to_owned()]),
            Schedules::Only(mut functions) => {
                functions.push(function.to_owned());
                Schedules::Only(functions)
            }
        };
        self
    }

    /// The leaderboard refresher's schedule fires too, so the boards are re-ranked as the
    /// log is applied.
    pub fn refreshing_boards(self) -> Self {
        self.fire(LEADERBOARD_REFRESH_FUNCTION)
    }

    /// Environment variables set over the template's, for every function that declares
    /// them (a live test's shorter catch-up bound, say).
    pub fn environment(mut self, variables: &[(&str, &str)]) -> Self {
        self.environment.extend(parameters_of(variables));
        self
    }

    /// Template parameters set over their defaults, as `sam deploy --parameter-overrides`
    /// sets them (a write limit of the test's own, say).
    pub fn parameters(mut self, parameters: &[(&str, &str)]) -> Self {
        self.parameters.extend(parameters_of(parameters));
        self
    }

    /// `shards` virtual shards per stream shard, and `properties` set over every
    /// DynamoDB-stream mapping's (`MaximumRetryAttempts`, say).
    pub fn mappings(mut self, shards: usize, properties: &[(&str, i64)]) -> Self {
        self.stream_shards = shards;
        self.mappings.extend(
            properties
                .iter()
                .map(|(name, value)| ((*name).to_owned(), serde_yaml::Value::from(*value))),
        );
        self
    }

    /// Exactly as template.yaml declares it: none of the test's variables, every schedule
    /// fired.
    pub fn as_deployed(self) -> Self {
        self.template_environment().scheduled()
    }

    /// Every function's variables as template.yaml sets them: none of the test's (the
    /// aggregator's chunks are `CHUNK_RECORDS` long).
    pub fn template_environment(mut self) -> Self {
        self.environment.clear();
        self
    }

    /// For reconciliation runs the test starts itself ([`TestStack::reconciler`]) with
    /// `RecountEngine` `engine` (`function`; `athena`, where the emulator's Athena runs the
    /// recount query in DuckDB; or `auto`, by the export's size): the pulse is fired, the scheduled reconciliation is not,
    /// and epochs are [`TEST_EPOCH_SECONDS`] long with an export uncertainty of one second,
    /// so a test reaches a cut in seconds. No refresher ranks the boards unless the test
    /// fires it too, so a run leaves the all-time board unchecked (`leaderboard_behind`).
    pub fn for_reconciliation(self, engine: &str) -> Self {
        self.fire("PulseFunction")
            .environment(&[
                ("RECONCILE_EPOCH_SECONDS", &TEST_EPOCH_SECONDS.to_string()),
                ("EXPORT_UNCERTAINTY_SECONDS", "1"),
                // No heartbeats: a test that fails a log consumer until its batches go to
                // the dead-letter queue waits for the failures to end, and a trickle of
                // heartbeats on every shard would keep them going. Likes move the boards'
                // `as_of` here.
                ("HEARTBEAT_AFTER_SECONDS", "86400"),
            ])
            .parameters(&[("RecountEngine", engine)])
    }

    /// On `aws`, whatever `LIKES_TEST_AWS` says (a test that compares the two).
    pub fn on(mut self, aws: Aws) -> Self {
        self.aws = Some(aws);
        self
    }

    pub async fn start(self) -> TestStack {
        let aws = match self.aws.unwrap_or_else(Aws::from_env) {
            Aws::Simulator => AwsTarget::simulated().await.expect("the simulator opens"),
            Aws::Emulator => AwsTarget::connect()
                .await
                .expect("an AWS endpoint: run through `make test`, or have .venv ready"),
        };
        let options = StackOptions {
            prefix: unique_prefix(),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ws_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            web_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            environment_overrides: self.environment,
            schedules: self.schedules,
            mapping_overrides: self.mappings,
            stream_shards: self.stream_shards,
            parameters: self.parameters,
        };
        let stack = Stack::start(aws, options)
            .await
            .expect("local stack starts");
        TestStack {
            authorizer: stack.issuer.clone(),
            stack,
        }
    }
}

impl TestStack {
    /// The plain stack, to change before it starts: its aggregator cuts
    /// [`TEST_CHUNK_RECORDS`](crate::TEST_CHUNK_RECORDS)-record chunks, its streams split into `LIKES_STREAM_SHARDS`
    /// virtual shards (4 unless set), and the template's schedules are not fired (the stream
    /// holds only what the test wrote, and `as_of` stays unknown).
    pub fn builder() -> StackBuilder {
        StackBuilder {
            environment: test_overrides(),
            schedules: Schedules::None,
            mappings: BTreeMap::new(),
            stream_shards: stream_shards(),
            parameters: BTreeMap::new(),
            aws: None,
        }
    }
}
