//! Creates the template's resources in the emulator (or LocalStack), named
//! `<prefix>-<LogicalId>`, so several stacks (one per test) share one emulator: DynamoDB
//! tables, Kinesis streams, SQS queues, S3 buckets, Athena work groups and Glue databases,
//! each from its own properties in the template.

mod athena;
mod kinesis;
mod sqs;
mod table;

use std::collections::BTreeMap;

use serde_yaml::Value;

use crate::aws::AwsTarget;
use crate::template::{get_att, intrinsic, ref_target, Template};

/// The account moto serves requests without a recognised access key from.
pub const LOCAL_ACCOUNT: &str = "123456789012";

#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("{resource}: {message}")]
    Template { resource: String, message: String },
    #[error("creating {resource}: {source}")]
    Aws {
        resource: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl ResourceError {
    fn aws(resource: &str, err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Aws {
            resource: resource.to_owned(),
            source: format!("{}", aws_sdk_dynamodb::error::DisplayErrorContext(err)).into(),
        }
    }
}

/// What was created: `!Ref` values (table and stream names, queue URLs) and attributes by
/// logical id.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    pub names: BTreeMap<String, String>,
    /// `<LogicalId>.<Attribute>` → value, for `!GetAtt` (`Arn`, `StreamArn`, `QueueName`…).
    pub attributes: BTreeMap<String, String>,
    /// AWS endpoints the local stack serves itself: a function's environment value that
    /// starts with a key (`https://<api id>.execute-api.<region>.amazonaws.com`) starts with
    /// its value instead (the local WebSocket front).
    pub local_endpoints: BTreeMap<String, String>,
}

impl Resources {
    pub fn name(&self, logical_id: &str) -> Option<&str> {
        self.names.get(logical_id).map(String::as_str)
    }

    pub fn attribute(&self, logical_id: &str, attribute: &str) -> Option<&str> {
        self.attributes
            .get(&format!("{logical_id}.{attribute}"))
            .map(String::as_str)
    }

    /// A function's environment as CloudFormation would resolve it against these resources,
    /// then `overrides` (set by the caller for every function that declares the variable).
    pub fn function_environment(
        &self,
        template: &Template,
        function: &str,
        overrides: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, String> {
        template
            .environment(function)
            .into_iter()
            .map(|(name, value)| {
                let resolved =
                    match overrides.get(&name) {
                        Some(value) => value.clone(),
                        None => self.local_endpoint(self.resolve(template, &value).ok_or_else(
                            || format!("cannot resolve environment variable {name} locally"),
                        )?),
                    };
                Ok((name, resolved))
            })
            .collect()
    }

    /// `value` pointed at the local stand-in when it is an endpoint the stack serves.
    fn local_endpoint(&self, value: String) -> String {
        self.local_endpoints
            .iter()
            .find_map(|(aws, local)| {
                value
                    .strip_prefix(aws.as_str())
                    .map(|rest| format!("{local}{rest}"))
            })
            .unwrap_or(value)
    }

    /// Resolves a template value (an environment variable, a resource property) as
    /// CloudFormation would here: `!Ref`, `!GetAtt`, `!Sub`, `!If` and plain scalars.
    pub fn resolve(&self, template: &Template, value: &Value) -> Option<String> {
        if let Some((function, arguments)) = intrinsic(value) {
            if function == "If" {
                return self.resolve(template, template.branch(arguments)?);
            }
        }
        if let Some(target) = ref_target(value) {
            return self.reference(template, target);
        }
        if let Some((resource, attribute)) = get_att(value) {
            return self.attribute(&resource, &attribute).map(str::to_owned);
        }
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Tagged(tagged) if tagged.tag == "!Sub" => {
                self.substitute(template, tagged.value.as_str()?)
            }
            _ => None,
        }
    }

    /// What `!Ref <target>` (or `${target}` in a `!Sub`) stands for locally.
    fn reference(&self, template: &Template, target: &str) -> Option<String> {
        match target {
            "AWS::Region" => Some(crate::aws::LOCAL_REGION.to_owned()),
            "AWS::Partition" => Some("aws".to_owned()),
            "AWS::AccountId" => Some(LOCAL_ACCOUNT.to_owned()),
            _ => self
                .name(target)
                .map(str::to_owned)
                .or_else(|| template.parameter(target)),
        }
    }

    /// A `!Sub` string with its `${Name}` and `${Resource.Attribute}` replaced.
    fn substitute(&self, template: &Template, text: &str) -> Option<String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let end = start + rest[start..].find('}')?;
            let name = &rest[start + 2..end];
            out.push_str(&rest[..start]);
            out.push_str(&match name.split_once('.') {
                Some((resource, attribute)) => self.attribute(resource, attribute)?.to_owned(),
                None => self.reference(template, name)?,
            });
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        Some(out)
    }
}

/// Creates every resource the local stack emulates, from the template: DynamoDB tables,
/// Kinesis streams, SQS queues, S3 buckets, secrets (each with its value in `secrets`, by
/// logical id: what AWS would generate), Athena work groups and Glue databases (where `aws`
/// serves Athena).
/// Everything else (functions and the HTTP API, which the stack runs itself; roles, log
/// groups, alarms) has no local counterpart: it is left out, not faked.
pub async fn create(
    template: &Template,
    aws: &AwsTarget,
    prefix: &str,
    secrets: BTreeMap<String, String>,
) -> Result<Resources, ResourceError> {
    let sdk = &aws.sdk;
    let mut resources = Resources::default();
    let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
    for (logical_id, resource) in template.resources_of("AWS::DynamoDB::Table") {
        let name = format!("{prefix}-{logical_id}");
        let table = table::create_table(
            &dynamodb,
            &logical_id,
            &name,
            &template.chosen(&resource["Properties"]),
        )
        .await?;
        resources
            .attributes
            .insert(format!("{logical_id}.Arn"), table.arn);
        if let Some(stream_arn) = table.stream_arn {
            resources
                .attributes
                .insert(format!("{logical_id}.StreamArn"), stream_arn);
        }
        resources.names.insert(logical_id, name);
    }
    let kinesis = aws_sdk_kinesis::Client::new(sdk);
    for (logical_id, resource) in template.resources_of("AWS::Kinesis::Stream") {
        let name = format!("{prefix}-{logical_id}");
        let arn =
            kinesis::create_kinesis_stream(&kinesis, &logical_id, &name, &resource["Properties"])
                .await?;
        resources
            .attributes
            .insert(format!("{logical_id}.Arn"), arn);
        resources.names.insert(logical_id, name);
    }
    let sqs = aws_sdk_sqs::Client::new(sdk);
    // Queues another queue names (a redrive target) come first, so its ARN resolves.
    let mut queues: Vec<(String, &Value)> = template
        .resources_of("AWS::SQS::Queue")
        .into_iter()
        .collect();
    queues.sort_by_key(|(_, queue)| !queue["Properties"]["RedrivePolicy"].is_null());
    for (logical_id, resource) in queues {
        let queue = sqs::create_queue(
            &sqs,
            template,
            &resources,
            &logical_id,
            &format!("{prefix}-{logical_id}"),
            &resource["Properties"],
        )
        .await?;
        for (attribute, value) in [
            ("Arn", queue.arn),
            ("QueueName", queue.name),
            ("QueueUrl", queue.url.clone()),
        ] {
            resources
                .attributes
                .insert(format!("{logical_id}.{attribute}"), value);
        }
        // `!Ref` of a queue is its URL.
        resources.names.insert(logical_id, queue.url);
    }
    let s3 = crate::aws::s3_client(sdk);
    for logical_id in template.resources_of("AWS::S3::Bucket").into_keys() {
        // Bucket names are lowercase and global; the prefix keeps stacks apart.
        let name = format!("{prefix}-{logical_id}").to_lowercase();
        s3.create_bucket()
            .bucket(&name)
            .send()
            .await
            .map_err(|e| ResourceError::aws(&logical_id, e))?;
        resources
            .attributes
            .insert(format!("{logical_id}.Arn"), format!("arn:aws:s3:::{name}"));
        resources.names.insert(logical_id, name);
    }
    let secrets_manager = aws_sdk_secretsmanager::Client::new(sdk);
    for logical_id in template
        .resources_of("AWS::SecretsManager::Secret")
        .into_keys()
    {
        let value = secrets
            .get(&logical_id)
            .ok_or_else(|| ResourceError::Template {
                resource: logical_id.clone(),
                message: "no local value for this secret".to_owned(),
            })?;
        let created = secrets_manager
            .create_secret()
            .name(format!("{prefix}-{logical_id}"))
            .secret_string(value)
            .send()
            .await
            .map_err(|e| ResourceError::aws(&logical_id, e))?;
        // `!Ref` of a secret is its ARN.
        let arn = created.arn.unwrap_or_default();
        resources.names.insert(logical_id, arn);
    }
    if aws.serves_athena() {
        athena::create(template, sdk, prefix, &mut resources).await?;
    }
    Ok(resources)
}
