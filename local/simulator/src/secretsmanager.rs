//! Secrets Manager: secrets whose values are versions with staging labels, as AWS keeps
//! them. A new value (`PutSecretValue`) becomes `AWSCURRENT` and the value it replaces
//! `AWSPREVIOUS`, so a reader of both stages holds the keys of a rotation in progress.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::json;

use crate::reply::{self, Reply};

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const CURRENT: &str = "AWSCURRENT";
const PREVIOUS: &str = "AWSPREVIOUS";

#[derive(Debug, Default)]
pub struct SecretsManager {
    /// By name.
    secrets: Mutex<BTreeMap<String, Secret>>,
}

#[derive(Debug)]
struct Secret {
    arn: String,
    /// The value of each stage that has one.
    stages: BTreeMap<&'static str, Version>,
    versions: u64,
}

#[derive(Debug, Clone)]
struct Version {
    id: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Request {
    name: Option<String>,
    secret_id: Option<String>,
    secret_string: Option<String>,
    version_stage: Option<String>,
}

impl SecretsManager {
    pub fn answer(&self, operation: &str, body: &[u8]) -> Reply {
        let request: Request = match reply::read(body) {
            Ok(request) => request,
            Err(reply) => return reply,
        };
        let mut secrets = self.secrets.lock().unwrap_or_else(|e| e.into_inner());
        if operation == "CreateSecret" {
            let (Some(name), Some(value)) = (request.name, request.secret_string) else {
                return Reply::bad_request("CreateSecret needs Name and SecretString");
            };
            if secrets.contains_key(&name) {
                return Reply::error(
                    400,
                    "ResourceExistsException",
                    &format!("the secret {name} already exists"),
                );
            }
            let mut secret = Secret {
                arn: format!("arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-Ab12Cd"),
                stages: BTreeMap::new(),
                versions: 0,
            };
            let version = secret.put(value);
            let answer = json!({"ARN": secret.arn, "Name": name, "VersionId": version});
            secrets.insert(name, secret);
            return Reply::json(&answer);
        }
        let id = request.secret_id.unwrap_or_default();
        let Some((name, secret)) = secrets
            .iter_mut()
            .find(|(name, secret)| **name == id || secret.arn == id)
        else {
            return not_found(&id);
        };
        match operation {
            "GetSecretValue" => {
                let stage = request.version_stage.as_deref().unwrap_or(CURRENT);
                match secret.stages.get(stage) {
                    Some(version) => Reply::json(&json!({
                        "ARN": secret.arn,
                        "Name": name,
                        "VersionId": version.id,
                        "SecretString": version.value,
                        "VersionStages": [stage],
                    })),
                    None => not_found(&format!("{id} at stage {stage}")),
                }
            }
            "PutSecretValue" => match request.secret_string {
                Some(value) => {
                    let version = secret.put(value);
                    Reply::json(&json!({
                        "ARN": secret.arn,
                        "Name": name,
                        "VersionId": version,
                        "VersionStages": [CURRENT],
                    }))
                }
                None => Reply::bad_request("PutSecretValue needs SecretString"),
            },
            _ => Reply::unknown_operation(&format!("secretsmanager.{operation}")),
        }
    }
}

impl Secret {
    /// `value` becomes current; the current one, previous.
    fn put(&mut self, value: String) -> String {
        self.versions += 1;
        let id = format!("v{:08}", self.versions);
        if let Some(current) = self.stages.remove(CURRENT) {
            self.stages.insert(PREVIOUS, current);
        }
        self.stages.insert(
            CURRENT,
            Version {
                id: id.clone(),
                value,
            },
        );
        id
    }
}

fn not_found(what: &str) -> Reply {
    Reply::error(
        400,
        "ResourceNotFoundException",
        &format!("Secrets Manager can't find the specified secret: {what}"),
    )
}
