//! SQS: queues that keep every message sent until it is received and deleted.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::json;

use crate::reply::{self, Reply};

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

#[derive(Debug, Default)]
pub struct Sqs {
    queues: Mutex<BTreeMap<String, Queue>>,
}

#[derive(Debug, Default)]
struct Queue {
    messages: VecDeque<Message>,
    sent: u64,
}

#[derive(Debug, Clone)]
struct Message {
    id: String,
    body: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Named {
    queue_name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Addressed {
    queue_url: String,
    message_body: Option<String>,
    max_number_of_messages: Option<usize>,
    receipt_handle: Option<String>,
}

impl Sqs {
    pub fn answer(&self, operation: &str, body: &[u8]) -> Reply {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        if operation == "CreateQueue" {
            return match reply::read::<Named>(body) {
                Ok(named) => {
                    queues.entry(named.queue_name.clone()).or_default();
                    Reply::json(&json!({ "QueueUrl": url(&named.queue_name) }))
                }
                Err(reply) => reply,
            };
        }
        let request: Addressed = match reply::read(body) {
            Ok(request) => request,
            Err(reply) => return reply,
        };
        let name = request
            .queue_url
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let Some(queue) = queues.get_mut(&name) else {
            return Reply::error(
                400,
                "QueueDoesNotExist",
                "The specified queue does not exist.",
            );
        };
        match operation {
            "GetQueueAttributes" => Reply::json(&json!({
                "Attributes": {
                    "QueueArn": format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"),
                    "ApproximateNumberOfMessages": queue.messages.len().to_string(),
                }
            })),
            "SendMessage" => {
                let body = request.message_body.unwrap_or_default();
                queue.sent += 1;
                let id = format!("{name}-{}", queue.sent);
                let digest = format!("{:x}", md5::compute(body.as_bytes()));
                queue.messages.push_back(Message {
                    id: id.clone(),
                    body,
                });
                Reply::json(&json!({ "MessageId": id, "MD5OfMessageBody": digest }))
            }
            "ReceiveMessage" => {
                let wanted = request.max_number_of_messages.unwrap_or(1);
                let messages: Vec<_> = queue
                    .messages
                    .iter()
                    .take(wanted)
                    .map(|m| {
                        json!({
                            "MessageId": m.id,
                            "ReceiptHandle": m.id,
                            "Body": m.body,
                            "MD5OfBody": format!("{:x}", md5::compute(m.body.as_bytes())),
                        })
                    })
                    .collect();
                Reply::json(&json!({ "Messages": messages }))
            }
            "DeleteMessage" => {
                let handle = request.receipt_handle.unwrap_or_default();
                queue.messages.retain(|m| m.id != handle);
                Reply::json(&json!({}))
            }
            "PurgeQueue" => {
                queue.messages.clear();
                Reply::json(&json!({}))
            }
            other => Reply::unknown_operation(&format!("AmazonSQS.{other}")),
        }
    }
}

fn url(name: &str) -> String {
    format!("https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}")
}
