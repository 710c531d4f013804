//! Counts the DynamoDB requests a client actually sends, by operation, from a smithy
//! interceptor on the client's config: the code under test is not touched.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use serde_json::Value;

/// One request on the wire (a retry is a second one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The reaction's own conditional UpdateItem.
    Flip,
    /// The follow-up UpdateItem that drops old idempotency keys, with the attributes it removes.
    Trim {
        removed: Vec<String>,
    },
    Other(String),
}

#[derive(Debug, Clone, Default)]
pub struct SentRequests(Arc<Mutex<Vec<Sent>>>);

impl SentRequests {
    /// A DynamoDB client on `sdk` whose requests are counted, and their count.
    pub fn client(sdk: &aws_config::SdkConfig) -> (aws_sdk_dynamodb::Client, Self) {
        let sent = Self::default();
        let config = aws_sdk_dynamodb::config::Builder::from(sdk)
            .interceptor(sent.clone())
            .build();
        (aws_sdk_dynamodb::Client::from_conf(config), sent)
    }

    /// The requests sent since the last call.
    pub fn take(&self) -> Vec<Sent> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }
}

/// `UpdateItem ×1 + trim ×1`, or `none`.
pub fn describe(sent: &[Sent]) -> String {
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    for request in sent {
        let name = match request {
            Sent::Flip => "UpdateItem".to_owned(),
            Sent::Trim { .. } => "trim UpdateItem".to_owned(),
            Sent::Other(operation) => operation.clone(),
        };
        *by_name.entry(name).or_default() += 1;
    }
    if by_name.is_empty() {
        return "none".to_owned();
    }
    by_name
        .iter()
        .map(|(name, n)| format!("{name} x{n}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

impl Intercept for SentRequests {
    fn name(&self) -> &'static str {
        "SentRequests"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request();
        // The JSON protocol names the operation in a header: `DynamoDB_20120810.UpdateItem`.
        let operation = request
            .headers()
            .get("x-amz-target")
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or("unknown")
            .to_owned();
        let sent = if operation == "UpdateItem" {
            let body: Value = request
                .body()
                .bytes()
                .and_then(|bytes| serde_json::from_slice(bytes).ok())
                .unwrap_or_default();
            let update = body["UpdateExpression"].as_str().unwrap_or_default();
            // The store's trim is the only update that only removes attributes.
            if update.starts_with("REMOVE ") {
                let removed = body["ExpressionAttributeNames"]
                    .as_object()
                    .map(|names| {
                        names
                            .values()
                            .filter_map(|n| n.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                Sent::Trim { removed }
            } else {
                Sent::Flip
            }
        } else {
            Sent::Other(operation)
        };
        self.0.lock().expect("not poisoned").push(sent);
        Ok(())
    }
}
