//! The RateLimits table: one token bucket row per user (`user_id`, `tat`, `rate`,
//! `expires_at` for TTL), and the leases this container holds on it. The arithmetic and
//! its soundness argument are `likes_core::limit`'s; this module states its two
//! conditional writes in DynamoDB's words and keeps the leases.
//!
//! A moderator's suspension sits on the same row (`suspended`, written by the moderation
//! store): both writes are conditional on its absence, so a suspended user takes no lease,
//! and a lease taken before the suspension lasts [`LEASE_MS`] at most.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use likes_core::limit::{Bucket, BucketUpdate, Lease, Plan, LEASE_MS};
use likes_core::{Admission, UserId, WriteLimit};

use crate::rows::{self, attr, number, BucketRow, Item};
use crate::StoreError;

/// Conditional writes one admission tries before refusing: each refused write returns the
/// row, so a second try meets the row as it is; a third is needed only when other
/// containers take from the same user's bucket in between, which only a script does.
const TAKE_ATTEMPTS: usize = 3;
/// Users whose leases a container keeps before it forgets the spent and expired ones.
const LEASES_KEPT: usize = 10_000;

#[derive(Debug, Clone)]
pub struct RateLimitsStore {
    client: Client,
    table: String,
    limit: WriteLimit,
    /// Shared by every clone of the store in this container (the handler state is cloned
    /// per request). Never held across a DynamoDB call.
    leases: Arc<Mutex<HashMap<String, Lease>>>,
}

impl RateLimitsStore {
    pub fn new(client: Client, table: impl Into<String>, limit: WriteLimit) -> Self {
        Self {
            client,
            table: table.into(),
            limit,
            leases: Arc::default(),
        }
    }

    pub fn limit(&self) -> WriteLimit {
        self.limit
    }

    /// Whether `user` may write now. From this container's lease when it holds a token (no
    /// call), else one conditional UpdateItem that takes a new lease from the user's bucket.
    pub async fn admit(&self, user: &UserId, now_ms: i64) -> Result<Admission, StoreError> {
        let seen = {
            let mut leases = self.leases.lock().expect("lease map");
            match leases.get_mut(user.as_str()) {
                None => None,
                Some(lease) => {
                    if lease.spend(now_ms) {
                        return Ok(Admission::Admitted);
                    }
                    if let Some(refused) = lease.still_refused(now_ms) {
                        return Ok(refused);
                    }
                    lease.bucket
                }
            }
        };
        self.take(user, seen, now_ms).await
    }

    /// Takes a new lease from the bucket, `seen` being its row as last seen (a guess: a
    /// wrong one costs a refused write, which returns the row as it is).
    async fn take(
        &self,
        user: &UserId,
        mut seen: Option<Bucket>,
        now_ms: i64,
    ) -> Result<Admission, StoreError> {
        for _ in 0..TAKE_ATTEMPTS {
            let take = match self.limit.plan(seen, now_ms, self.limit.lease_size()) {
                Plan::Take(take) => take,
                Plan::Refuse { retry_after_ms } => {
                    self.keep(user, Lease::refused(seen, now_ms, retry_after_ms), now_ms);
                    return Ok(Admission::Limited { retry_after_ms });
                }
            };
            match self.write(user, &take.update, now_ms).await? {
                Written::Took(bucket) => {
                    // One of the lease's tokens is this write's.
                    self.keep(user, Lease::taken(take.tokens - 1, bucket, now_ms), now_ms);
                    return Ok(Admission::Admitted);
                }
                Written::Refused(current) => seen = current,
                Written::Suspended => return Ok(Admission::Suspended),
            }
        }
        // Other containers kept moving this user's bucket: a burst from several places at
        // once. Refusing is the safe answer; a lease's time is when the race is over.
        Ok(Admission::Limited {
            retry_after_ms: LEASE_MS,
        })
    }

    fn keep(&self, user: &UserId, lease: Lease, now_ms: i64) {
        let mut leases = self.leases.lock().expect("lease map");
        if leases.len() >= LEASES_KEPT {
            leases.retain(|_, lease| lease.is_live(now_ms));
        }
        leases.insert(user.as_str().to_owned(), lease);
    }

    /// One conditional write of the bucket, on condition the user is not suspended.
    async fn write(
        &self,
        user: &UserId,
        update: &BucketUpdate,
        now_ms: i64,
    ) -> Result<Written, StoreError> {
        let rate = self.limit.rate_per_second();
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(attr::USER_ID, AttributeValue::S(user.as_str().to_owned()))
            .expression_attribute_names("#tat", attr::TAT)
            .expression_attribute_names("#rate", attr::RATE)
            .expression_attribute_names("#exp", attr::EXPIRES_AT)
            .expression_attribute_names("#susp", attr::SUSPENDED)
            .expression_attribute_values(":rate", number(i64::from(rate)))
            .expression_attribute_values(":exp", number(self.limit.full_again_s(now_ms)))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        request = match *update {
            BucketUpdate::Restart { clock, tat } => request
                .update_expression("SET #tat = :tat, #rate = :rate, #exp = :exp")
                .condition_expression(
                    "attribute_not_exists(#susp) AND (attribute_not_exists(#tat) OR #rate <> :rate OR #tat <= :clock)",
                )
                .expression_attribute_values(":tat", number(tat))
                .expression_attribute_values(":clock", number(clock)),
            // Relative, so a take by another container in between is never overwritten.
            BucketUpdate::Extend {
                clock,
                cost,
                at_most,
            } => request
                .update_expression("SET #tat = #tat + :cost, #exp = :exp")
                .condition_expression(
                    "attribute_not_exists(#susp) AND #rate = :rate AND #tat > :clock AND #tat <= :at_most",
                )
                .expression_attribute_values(":cost", number(cost))
                .expression_attribute_values(":clock", number(clock))
                .expression_attribute_values(":at_most", number(at_most)),
        };
        match request.send().await {
            Ok(output) => {
                let (bucket, _) = read(output.attributes.unwrap_or_default())?;
                let bucket = bucket
                    .ok_or_else(|| StoreError::Corrupt("UpdateItem returned no bucket".into()))?;
                Ok(Written::Took(bucket))
            }
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    match read(failed.item().cloned().unwrap_or_default())? {
                        (_, true) => Ok(Written::Suspended),
                        (bucket, false) => Ok(Written::Refused(bucket)),
                    }
                }
                _ => Err(StoreError::aws("UpdateItem (rate limit)", err)),
            },
        }
    }
}

/// What one conditional write of a bucket came to.
enum Written {
    /// Applied: the bucket after it.
    Took(Bucket),
    /// Its condition failed on the bucket as it is (no row, or a row without one: `None`).
    Refused(Option<Bucket>),
    /// The user is suspended.
    Suspended,
}

/// The bucket a row holds (an empty item, no row, holds none), and whether it is suspended.
fn read(item: Item) -> Result<(Option<Bucket>, bool), StoreError> {
    if item.is_empty() {
        return Ok((None, false));
    }
    let row: BucketRow = rows::from_item(item)?;
    let bucket = row
        .tat
        .zip(row.rate)
        .map(|(tat, rate)| Bucket { tat, rate });
    Ok((bucket, row.suspended.is_some()))
}
