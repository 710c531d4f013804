//! Where the local stack's AWS calls go (the emulator it started, `AWS_ENDPOINT_URL`, or
//! the simulator in this process) and the SDK configuration and clients it reaches them with.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::Credentials;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};

use crate::emulator::Emulator;
use crate::stack::StackError;

pub const LOCAL_REGION: &str = "us-east-1";

/// Where AWS calls go: an emulator this process started, `AWS_ENDPOINT_URL`, or the
/// in-memory simulator.
pub struct AwsTarget {
    backend: Backend,
    pub endpoint_url: String,
    pub sdk: SdkConfig,
}

enum Backend {
    Emulator(Emulator),
    Endpoint,
    Simulator(likes_simulator::Simulator),
}

/// What [`AwsTarget::endpoint_url`] says of the simulator: it has no address, every call
/// is answered inside this process.
pub const SIMULATOR_ENDPOINT: &str = "in-process simulator";

impl AwsTarget {
    /// Uses `AWS_ENDPOINT_URL` when set (LocalStack, real AWS: nothing is started);
    /// otherwise starts the offline emulator, with the tests' PITR lag.
    pub async fn connect() -> Result<Self, StackError> {
        Self::connect_with(crate::emulator::TEST_PITR_LAG).await
    }

    /// As [`Self::connect`], with the emulator's latest restorable time `pitr_lag` behind now.
    pub async fn connect_with(pitr_lag: std::time::Duration) -> Result<Self, StackError> {
        if let Ok(endpoint_url) = std::env::var("AWS_ENDPOINT_URL") {
            let sdk = aws_config::defaults(BehaviorVersion::latest())
                .region(
                    aws_config::meta::region::RegionProviderChain::default_provider()
                        .or_else(Region::new(LOCAL_REGION)),
                )
                .load()
                .await;
            return Ok(Self {
                backend: Backend::Endpoint,
                endpoint_url,
                sdk,
            });
        }
        let emulator = Emulator::start(pitr_lag)?;
        let endpoint_url = emulator.url().to_owned();
        Ok(Self {
            sdk: emulator_sdk_config(&endpoint_url).await,
            backend: Backend::Emulator(emulator),
            endpoint_url,
        })
    }

    /// AWS in this process ([`likes_simulator::Simulator`]): DynamoDB and its streams,
    /// Kinesis, SQS and S3, fresh and empty. It has no Athena, and no exports to
    /// reconcile from.
    pub async fn simulated() -> Result<Self, StackError> {
        // The WebSocket front's management API is reached over loopback, as in `make run`.
        let network = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
            .build_https();
        let simulator = likes_simulator::Simulator::new()?.passing_loopback_to(network);
        let sdk = local_sdk_config()
            .http_client(simulator.http_client())
            .load()
            .await;
        Ok(Self {
            backend: Backend::Simulator(simulator),
            endpoint_url: SIMULATOR_ENDPOINT.to_owned(),
            sdk,
        })
    }

    pub fn emulator_pid(&self) -> Option<u32> {
        match &self.backend {
            Backend::Emulator(emulator) => Some(emulator.pid()),
            Backend::Endpoint | Backend::Simulator(_) => None,
        }
    }

    /// What the simulator billed, metered and throttled so far (`None` elsewhere: AWS and
    /// the emulator keep their own bills).
    pub fn usage(&self) -> Option<likes_simulator::Usage> {
        match &self.backend {
            Backend::Simulator(simulator) => Some(simulator.usage()),
            Backend::Emulator(_) | Backend::Endpoint => None,
        }
    }

    /// Whether Athena answers here (the simulator has none): the template's work groups
    /// are created only where it does.
    pub fn serves_athena(&self) -> bool {
        !matches!(self.backend, Backend::Simulator(_))
    }
}

/// The clients the local stack builds its functions with: the SDK's, but S3 path-style (as
/// the emulator serves it) and DynamoDB Streams answering with the pollers' virtual shards,
/// `stream_split` per real shard.
pub fn local_clients(sdk: &SdkConfig, stream_split: usize) -> likes_functions::Clients {
    likes_functions::Clients {
        s3: s3_client(sdk),
        streams: crate::event_source_mapping::streams_client(sdk, stream_split),
        ..likes_functions::Clients::new(sdk)
    }
}

/// An S3 client for the local stack: path-style addressing, which the emulator needs (and
/// LocalStack and AWS accept).
pub fn s3_client(sdk: &SdkConfig) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(true)
            .build(),
    )
}

/// SDK configuration for the emulator: its endpoint, a fixed region, dummy credentials.
pub async fn emulator_sdk_config(endpoint_url: &str) -> SdkConfig {
    local_sdk_config().endpoint_url(endpoint_url).load().await
}

/// A fixed region and dummy credentials: what every local target is reached with.
fn local_sdk_config() -> aws_config::ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(LOCAL_REGION))
        .credentials_provider(Credentials::new("test", "test", None, None, "likes-local"))
}
