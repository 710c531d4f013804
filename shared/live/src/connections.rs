//! Posting to WebSocket connections through API Gateway's management API
//! (`execute-api:ManageConnections`, `POST @connections/{id}`).

use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_apigatewaymanagement::operation::post_to_connection::PostToConnectionError;
use aws_sdk_apigatewaymanagement::primitives::Blob;
use likes_aws::AwsError;
use likes_core::backoff::Backoff;

/// A throttled post (429) is tried this many times in all, then given up: a push is best
/// effort, and the next one a second later carries newer counts anyway.
pub const POST_ATTEMPTS: u32 = 3;
const THROTTLED_BACKOFF: Backoff = Backoff {
    first: Duration::from_millis(100),
    cap: Duration::from_millis(400),
};

/// What posting one message came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posted {
    Sent,
    /// The connection is gone (410): its rows must go too.
    Gone,
    /// Still throttled after `POST_ATTEMPTS`.
    Throttled,
}

/// The management API of one WebSocket API stage. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Connections {
    client: aws_sdk_apigatewaymanagement::Client,
}

impl Connections {
    /// `endpoint`: `https://{api-id}.execute-api.{region}.amazonaws.com/{stage}`.
    pub fn new(sdk: &SdkConfig, endpoint: &str) -> Self {
        let config = aws_sdk_apigatewaymanagement::config::Builder::from(sdk)
            .endpoint_url(endpoint)
            .build();
        Self {
            client: aws_sdk_apigatewaymanagement::Client::from_conf(config),
        }
    }

    /// Posts one text message; a 429 is retried with a short bounded backoff.
    pub async fn post(&self, connection_id: &str, message: &str) -> Result<Posted, AwsError> {
        for attempt in 1..=POST_ATTEMPTS {
            let result = self
                .client
                .post_to_connection()
                .connection_id(connection_id)
                .data(Blob::new(message.as_bytes()))
                .send()
                .await;
            let err = match result {
                Ok(_) => return Ok(Posted::Sent),
                Err(err) => err,
            };
            match err.as_service_error() {
                Some(PostToConnectionError::GoneException(_)) => return Ok(Posted::Gone),
                Some(PostToConnectionError::LimitExceededException(_)) => {
                    if attempt < POST_ATTEMPTS {
                        tokio::time::sleep(THROTTLED_BACKOFF.delay(attempt)).await;
                    }
                }
                _ => return Err(AwsError::new("PostToConnection", err)),
            }
        }
        Ok(Posted::Throttled)
    }
}
