//! AWS in memory, behind the seam every SDK client already has: the HTTP client. A
//! [`Simulator`] answers the requests the SDK serializes as AWS would, so the service's
//! own code (the handlers, the consumers, the local stack's pollers) runs unchanged
//! against it, in one process and without a socket. It serves what the count pipeline
//! and its read models use:
//!
//! - DynamoDB and DynamoDB Streams (tables, indexes, conditions, transactions, streams):
//!   an embedded emulator, `dynoxide`, checked against AWS by its own conformance suite;
//! - Kinesis: streams of shards chosen by the MD5 of the partition key, as AWS chooses;
//! - SQS: queues that keep what is sent (a mapping's on-failure destination);
//! - S3: buckets of objects (reports, exports read back);
//! - Secrets Manager: secrets whose new values move the one before to `AWSPREVIOUS`.
//!
//! DynamoDB and Kinesis bill and throttle as AWS does: each request is priced as AWS prices
//! it, every partition key and shard is metered over a sliding second against AWS's limits,
//! and what reaches one at its limit is throttled; [`Simulator::usage`] reads it back.
//!
//! Anything else (Athena, exports to S3) is answered as an unknown operation, naming it.
//! Requests to a loopback address are not AWS's: they are the local stack's own fronts
//! (the WebSocket API's management endpoint), passed to the network client given.

mod dynamodb;
mod kinesis;
mod meter;
mod reply;
mod s3;
mod secretsmanager;
mod sqs;

use std::sync::Arc;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

use reply::Reply;

pub use dynamodb::{index_resource, table_resource};
pub use kinesis::stream_resource;
pub use meter::{LastSecond, Peak, Unit, Usage};

/// The simulated services, shared by every client built on [`Simulator::http_client`].
#[derive(Debug, Clone)]
pub struct Simulator {
    services: Arc<Services>,
    /// Where requests to loopback addresses go.
    network: Option<SharedHttpClient>,
}

#[derive(Debug)]
struct Services {
    meter: Arc<meter::Meter>,
    dynamodb: dynamodb::DynamoDb,
    kinesis: kinesis::Kinesis,
    sqs: sqs::Sqs,
    s3: s3::S3,
    secrets: secretsmanager::SecretsManager,
}

#[derive(Debug, thiserror::Error)]
#[error("the simulated DynamoDB did not open: {0}")]
pub struct SimulatorError(String);

impl Simulator {
    /// Empty services: no table, stream, queue or bucket yet.
    pub fn new() -> Result<Self, SimulatorError> {
        let meter = Arc::new(meter::Meter::default());
        Ok(Self {
            services: Arc::new(Services {
                dynamodb: dynamodb::DynamoDb::new(meter.clone())
                    .map_err(|e| SimulatorError(e.to_string()))?,
                kinesis: kinesis::Kinesis::new(meter.clone()),
                meter,
                sqs: sqs::Sqs::default(),
                s3: s3::S3::default(),
                secrets: secretsmanager::SecretsManager::default(),
            }),
            network: None,
        })
    }

    /// Requests to a loopback address (`127.0.0.1`, `localhost`) go to `network`.
    pub fn passing_loopback_to(mut self, network: SharedHttpClient) -> Self {
        self.network = Some(network);
        self
    }

    /// Stops the meters' clock: every later request falls in the same second.
    #[cfg(test)]
    fn stop_the_clock(&self) {
        self.services.meter.stop_the_clock();
    }

    /// Moves a stopped clock on.
    #[cfg(test)]
    fn advance_the_clock(&self, by: std::time::Duration) {
        self.services.meter.advance_the_clock(by);
    }

    /// What the simulated services billed, their busiest keys and shards, and what they
    /// throttled, so far.
    pub fn usage(&self) -> Usage {
        self.services.meter.usage()
    }

    /// The HTTP client to give an `SdkConfig`: every request it carries is answered here.
    pub fn http_client(&self) -> SharedHttpClient {
        SharedHttpClient::new(self.clone())
    }

    fn answer(&self, request: &HttpRequest) -> Reply {
        let body = request.body().bytes().unwrap_or_default();
        let target = request
            .headers()
            .get("x-amz-target")
            .map(str::to_owned)
            .unwrap_or_default();
        let Some((service, operation)) = target.split_once('.') else {
            return self.services.s3.answer(request, body);
        };
        match service {
            "DynamoDB_20120810" | "DynamoDBStreams_20120810" => {
                self.services.dynamodb.answer(operation, body)
            }
            "Kinesis_20131202" => self.services.kinesis.answer(operation, body),
            "AmazonSQS" => self.services.sqs.answer(operation, body),
            "secretsmanager" => self.services.secrets.answer(operation, body),
            _ => Reply::unknown_operation(&target),
        }
    }
}

/// One client's connector: the simulator, and the network's connector for loopback.
#[derive(Debug)]
struct Connector {
    simulator: Simulator,
    network: Option<SharedHttpConnector>,
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        if let Some(network) = self.network.as_ref().filter(|_| is_loopback(&request)) {
            return network.call(request);
        }
        let response: HttpResponse = self.simulator.answer(&request).into();
        HttpConnectorFuture::ready(Ok(response))
    }
}

impl HttpClient for Simulator {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(Connector {
            simulator: self.clone(),
            network: self
                .network
                .as_ref()
                .map(|network| network.http_connector(settings, components)),
        })
    }
}

fn is_loopback(request: &HttpRequest) -> bool {
    let uri = request.uri();
    let authority = uri
        .split_once("://")
        .map_or(uri, |(_, rest)| rest.split('/').next().unwrap_or_default());
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host);
    host == "localhost" || host == "[::1]" || host.starts_with("127.")
}

#[cfg(test)]
mod tests;
