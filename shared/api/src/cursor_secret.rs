//! The page cursors' key, read at run time from its secret (Secrets Manager): the secret's
//! current value seals new cursors, and its previous value, while a rotation keeps one,
//! still opens the cursors handed out before. The key is kept for warm invocations and read
//! again every [`KEY_MAX_AGE`]; a cursor that opens under neither key (sealed by an instance
//! that has already read a newer value) makes this one read the secret again, at most once a
//! second, before the cursor is refused. No key is ever in a function's configuration.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError;
use likes_aws::keys::FetchedKeys;
use likes_aws::AwsError;
use likes_core::{CursorKey, ValidationError};
use likes_store::StoreError;
use tokio::time::Instant;

use crate::ApiError;

/// How long a read key serves before the secret is read again: how long after a rotation
/// an instance that met no newer cursor may still seal with the value before.
pub const KEY_MAX_AGE: Duration = Duration::from_secs(300);
/// The least time between two reads a cursor that does not open can cause.
const MISS_INTERVAL: Duration = Duration::from_secs(1);
const CURRENT: &str = "AWSCURRENT";
const PREVIOUS: &str = "AWSPREVIOUS";

#[derive(Debug, Clone)]
pub struct CursorSecret {
    client: aws_sdk_secretsmanager::Client,
    secret_id: String,
    key: Arc<FetchedKeys<CursorKey>>,
}

impl CursorSecret {
    pub fn new(client: aws_sdk_secretsmanager::Client, secret_id: String) -> Self {
        Self {
            client,
            secret_id,
            key: Arc::new(FetchedKeys::new(KEY_MAX_AGE, MISS_INTERVAL)),
        }
    }

    /// The key, and the cursor `raw` opened with it (`None` without one). A well-formed
    /// cursor that opens under no key read so far is tried once more under the secret as it
    /// is now.
    pub async fn open<T>(
        &self,
        raw: Option<&str>,
        open: impl Fn(&str, &CursorKey) -> Result<T, ValidationError>,
    ) -> Result<(Arc<CursorKey>, Option<T>), ApiError> {
        let looked_at = Instant::now();
        let key = self.key.get(|| self.read()).await?;
        let Some(raw) = raw else {
            return Ok((key, None));
        };
        match open(raw, &key) {
            Ok(position) => return Ok((key, Some(position))),
            // Never sealed here, under any key: no reason to read the secret again.
            Err(refused) if !likes_core::cursor::well_formed(raw) => return Err(refused.into()),
            Err(_) => {}
        }
        let key = self.key.refreshed(looked_at, || self.read()).await?;
        let position = open(raw, &key)?;
        Ok((key, Some(position)))
    }

    /// The secret's current value, and its previous one when it has one.
    async fn read(&self) -> Result<CursorKey, ApiError> {
        let (current, previous) = tokio::join!(self.value(CURRENT), self.value(PREVIOUS));
        let current = current?.ok_or(ApiError::Config("a current CURSOR_SECRET_ARN value"))?;
        // A value too short to be a key is the deploy's fault: a 500, never the caller's.
        let key = CursorKey::new(current)?;
        Ok(match previous? {
            Some(previous) => key.with_previous(previous)?,
            None => key,
        })
    }

    async fn value(&self, stage: &str) -> Result<Option<String>, ApiError> {
        match self
            .client
            .get_secret_value()
            .secret_id(&self.secret_id)
            .version_stage(stage)
            .send()
            .await
        {
            Ok(value) => Ok(value.secret_string),
            // A secret never rotated has no previous value.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(GetSecretValueError::is_resource_not_found_exception)
                    && stage == PREVIOUS =>
            {
                Ok(None)
            }
            Err(err) => Err(StoreError::from(AwsError::new("GetSecretValue", err)).into()),
        }
    }
}
