//! The Privacy table: each user's own partition (PK `user_id`, SK `entry`) holds their
//! settings row `#settings` (`likes_visibility`, and `blocks`: how many users they block) and
//! one block row `b#<user id>` (`blocked_at`) per user they block. A block row and the count
//! change together in one transaction, on conditions (no such row yet and the count under
//! the cap; the row there), so the count is exact and the cap holds under any concurrency.
//!
//! A likers page asks it ([`Viewer`]) what its reader may see: every read is strongly
//! consistent, so a setting or a block answered 200 applies to the next page read.

use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Delete, Put, ReturnValue,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use likes_aws::AwsError;
use likes_core::likers::Liker;
use likes_core::privacy::{
    block_entry, blocked_of, sight, Sight, BLOCK_PREFIX, MAX_BLOCKS, SETTINGS_ENTRY,
};
use likes_core::{BlockOutcome, BlocksCursor, LikesVisibility, PrivacySettings, UserId};

use crate::error::cancelled;
use crate::rows::{self, attr, number, BlockRow, Item, PrivacyKey, SettingsRow};
use crate::StoreError;

/// Tries of one block or unblock: two requests of one user at once conflict on the user's
/// settings row, and neither writes anything; nor does one throttled at a key.
const TRANSACT_ATTEMPTS: u32 = 3;

#[derive(Debug, Clone)]
pub struct PrivacyStore {
    client: Client,
    table: String,
}

/// One user the caller blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub user_id: String,
    pub blocked_at_ms: i64,
}

/// A page of the users the caller blocks, in user id order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlocksPage {
    pub blocks: Vec<Block>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<BlocksCursor>,
}

impl PrivacyStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// `user`'s settings, strongly consistent; the defaults when they never set any.
    pub async fn settings(&self, user: &UserId) -> Result<PrivacySettings, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), SETTINGS_ENTRY)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem (privacy settings)", err))?;
        output
            .item
            .map(|item| rows::from_item::<SettingsRow>(item).map(settings_of))
            .transpose()
            .map(Option::unwrap_or_default)
    }

    /// Sets `user`'s likes visibility; answers the settings as stored.
    pub async fn set_visibility(
        &self,
        user: &UserId,
        visibility: LikesVisibility,
    ) -> Result<PrivacySettings, StoreError> {
        let output = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), SETTINGS_ENTRY)))
            .update_expression("SET #visibility = :visibility")
            .expression_attribute_names("#visibility", attr::LIKES_VISIBILITY)
            .expression_attribute_values(
                ":visibility",
                AttributeValue::S(visibility.as_str().to_owned()),
            )
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|err| StoreError::aws("UpdateItem (privacy settings)", err))?;
        let row = output.attributes.ok_or_else(|| {
            AwsError::unusable("UpdateItem (privacy settings)", "no ALL_NEW attributes")
        })?;
        Ok(settings_of(rows::from_item(row)?))
    }

    /// `user` blocks `other` (never `user`: [`likes_core::privacy::block_target`]): the block
    /// row, on condition there is none, and the user's count, on condition it is under
    /// [`MAX_BLOCKS`], in one transaction. A block that exists is answered with its time.
    pub async fn block(
        &self,
        user: &UserId,
        other: &UserId,
        now_ms: i64,
    ) -> Result<BlockOutcome, StoreError> {
        let row = BlockRow {
            user_id: user.as_str().to_owned(),
            entry: block_entry(other.as_str()),
            blocked_at: now_ms,
        };
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(&row)?))
            .condition_expression("attribute_not_exists(#entry)")
            .expression_attribute_names("#entry", attr::ENTRY)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()?;
        let count = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), SETTINGS_ENTRY)))
            .update_expression("ADD #blocks :one")
            .condition_expression("attribute_not_exists(#blocks) OR #blocks < :max")
            .expression_attribute_names("#blocks", attr::BLOCKS)
            .expression_attribute_values(":one", number(1))
            .expression_attribute_values(":max", number(MAX_BLOCKS))
            .build()?;
        let actions = vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().update(count).build(),
        ];
        let Some(reasons) = self.transact("TransactWriteItems (block)", actions).await? else {
            return Ok(BlockOutcome::Blocked {
                blocked_at_ms: now_ms,
            });
        };
        // The block row's refusal comes first: blocking again is answered, also at the cap.
        if let Some(existing) = refused(&reasons, 0) {
            let existing = existing.item().cloned().ok_or_else(|| {
                AwsError::unusable("TransactWriteItems (block)", "no ALL_OLD block row")
            })?;
            let existing: BlockRow = rows::from_item(existing)?;
            return Ok(BlockOutcome::AlreadyBlocked {
                blocked_at_ms: existing.blocked_at,
            });
        }
        Ok(BlockOutcome::AtLimit)
    }

    /// `user` no longer blocks `other`: the block row, on condition it is there, and the
    /// count, in one transaction. `false` when there was no such block (nothing written).
    pub async fn unblock(&self, user: &UserId, other: &UserId) -> Result<bool, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), &block_entry(other.as_str()))))
            .condition_expression("attribute_exists(#entry)")
            .expression_attribute_names("#entry", attr::ENTRY)
            .build()?;
        let count = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(user.as_str(), SETTINGS_ENTRY)))
            .update_expression("ADD #blocks :minus_one")
            .expression_attribute_names("#blocks", attr::BLOCKS)
            .expression_attribute_values(":minus_one", number(-1))
            .build()?;
        let actions = vec![
            TransactWriteItem::builder().delete(delete).build(),
            TransactWriteItem::builder().update(count).build(),
        ];
        Ok(self
            .transact("TransactWriteItems (unblock)", actions)
            .await?
            .is_none())
    }

    /// Sends `actions` as one transaction: `None` when it committed, the reasons when a
    /// condition refused it. A transaction cancelled for contention (a conflict with another
    /// transaction on the same rows, or a key at its throughput limit) wrote nothing and is
    /// tried again, [`TRANSACT_ATTEMPTS`] times in all, then counted as throttling; any other
    /// failure is the error.
    async fn transact(
        &self,
        operation: &'static str,
        actions: Vec<TransactWriteItem>,
    ) -> Result<Option<Vec<CancellationReason>>, StoreError> {
        let mut attempt = 1;
        loop {
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(actions.clone()))
                .send()
                .await;
            let Some((reasons, err)) = cancelled(operation, result)? else {
                return Ok(None);
            };
            let contended = reasons
                .iter()
                .any(|r| matches!(r.code(), Some("TransactionConflict" | "ThrottlingError")));
            if !contended {
                if reasons
                    .iter()
                    .any(|r| r.code() == Some("ConditionalCheckFailed"))
                {
                    return Ok(Some(reasons));
                }
                return Err(StoreError::aws(operation, err));
            }
            if attempt == TRANSACT_ATTEMPTS {
                return Err(AwsError::new(operation, err).as_throttled().into());
            }
            tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
            attempt += 1;
        }
    }

    /// The next `limit` users `user` blocks after `after`, in user id order, strongly
    /// consistent: one Query of the user's block rows.
    pub async fn blocks_page(
        &self,
        user: &UserId,
        limit: usize,
        after: Option<&BlocksCursor>,
    ) -> Result<BlocksPage, StoreError> {
        let start = after.map(|cursor| key(user.as_str(), &block_entry(&cursor.user_id)));
        // One more than asked for tells whether a next page exists, so the last page
        // carries no cursor.
        let output = self
            .blocks_query(user)
            .limit(limit as i32 + 1)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| StoreError::aws("Query (blocks)", err))?;
        let mut blocks = output
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|item| {
                let row: BlockRow = rows::from_item(item)?;
                Ok(Block {
                    user_id: blocked(&row.entry)?.to_owned(),
                    blocked_at_ms: row.blocked_at,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let next = (blocks.len() > limit).then(|| {
            blocks.truncate(limit);
            BlocksCursor {
                user_id: blocks[limit - 1].user_id.clone(),
            }
        });
        Ok(BlocksPage { blocks, next })
    }

    /// A Query of `user`'s block rows, strongly consistent, in user id order.
    fn blocks_query(
        &self,
        user: &UserId,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#user = :user AND begins_with(#entry, :prefix)")
            .expression_attribute_names("#user", attr::USER_ID)
            .expression_attribute_names("#entry", attr::ENTRY)
            .expression_attribute_values(":user", AttributeValue::S(user.as_str().to_owned()))
            .expression_attribute_values(":prefix", AttributeValue::S(BLOCK_PREFIX.to_owned()))
            .consistent_read(true)
    }

    /// What `reader` may see of likers, asked a page at a time.
    pub fn viewer(&self, reader: &UserId) -> Viewer<'_> {
        Viewer {
            store: self,
            reader: reader.clone(),
            blocks: None,
        }
    }
}

/// One reader's view of likers over one page read: whom the reader blocks is read once, with
/// the first likers asked about; each liker's settings, per round of the page.
#[derive(Debug)]
pub struct Viewer<'a> {
    store: &'a PrivacyStore,
    reader: UserId,
    blocks: Option<HashSet<String>>,
}

impl Viewer<'_> {
    /// Which of `likers` the reader may see, in their order ([`sight`]). Nothing is read
    /// when they are only the reader. Else one strongly consistent BatchGetItem of the
    /// others' settings rows, beside (the first time) the Query of the reader's own block
    /// rows (at most [`MAX_BLOCKS`]); then, only for shown likers who block somebody, one
    /// BatchGetItem of their block rows for the reader.
    pub async fn shown(&mut self, likers: &[Liker]) -> Result<Vec<bool>, StoreError> {
        let others: Vec<Item> = likers
            .iter()
            .filter(|liker| liker.user_id != self.reader.as_str())
            .map(|liker| key(&liker.user_id, SETTINGS_ENTRY))
            .collect();
        if others.is_empty() {
            return Ok(vec![true; likers.len()]);
        }
        let store = self.store;
        let reader = &self.reader;
        let blocks = &mut self.blocks;
        let read_blocks = async {
            if blocks.is_none() {
                *blocks = Some(store.blocked_by(reader).await?);
            }
            Ok::<_, StoreError>(())
        };
        let (settings, ()) = tokio::try_join!(store.settings_of(others), read_blocks)?;
        let reader_blocks = self.blocks.as_ref().expect("read just above");
        let sights: Vec<Sight> = likers
            .iter()
            .map(|liker| {
                let settings = settings.get(&liker.user_id).copied().unwrap_or_default();
                sight(&self.reader, &liker.user_id, &settings, reader_blocks)
            })
            .collect();
        let asked: Vec<Item> = likers
            .iter()
            .zip(&sights)
            .filter(|(_, sight)| **sight == Sight::UnlessBlocked)
            .map(|(liker, _)| key(&liker.user_id, &block_entry(self.reader.as_str())))
            .collect();
        let blocking: HashSet<String> = if asked.is_empty() {
            HashSet::new()
        } else {
            store
                .consistent_rows(asked)
                .await?
                .into_iter()
                .map(|item| Ok(rows::from_item::<BlockRow>(item)?.user_id))
                .collect::<Result<_, StoreError>>()?
        };
        Ok(likers
            .iter()
            .zip(sights)
            .map(|(liker, sight)| match sight {
                Sight::Shown => true,
                Sight::Hidden => false,
                Sight::UnlessBlocked => !blocking.contains(&liker.user_id),
            })
            .collect())
    }
}

impl PrivacyStore {
    /// The users `user` blocks: every block row, page after page.
    async fn blocked_by(&self, user: &UserId) -> Result<HashSet<String>, StoreError> {
        let query = self
            .blocks_query(user)
            .projection_expression("#user, #entry");
        crate::pages::query_all(query)
            .await?
            .into_iter()
            .map(|item| {
                let row: PrivacyKey = rows::from_item(item)?;
                Ok(blocked(&row.entry)?.to_owned())
            })
            .collect()
    }

    /// The settings rows of `keys`, by user; users without one are absent.
    async fn settings_of(
        &self,
        keys: Vec<Item>,
    ) -> Result<HashMap<String, PrivacySettings>, StoreError> {
        self.consistent_rows(keys)
            .await?
            .into_iter()
            .map(|item| {
                let row: SettingsRow = rows::from_item(item)?;
                Ok((row.user_id.clone(), settings_of(row)))
            })
            .collect()
    }

    /// The rows of `keys`, strongly consistent (BatchGetItem, unprocessed keys asked again).
    async fn consistent_rows(&self, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        crate::batch::get_all(&self.client, &self.table, keys, |request| {
            request.consistent_read(true)
        })
        .await
    }
}

/// The reason DynamoDB gave for action `n` of a cancelled transaction, if its condition
/// refused it.
fn refused(reasons: &[CancellationReason], n: usize) -> Option<&CancellationReason> {
    reasons
        .get(n)
        .filter(|r| r.code() == Some("ConditionalCheckFailed"))
}

/// The user a stored block row names.
fn blocked(entry: &str) -> Result<&str, StoreError> {
    blocked_of(entry).ok_or_else(|| StoreError::Corrupt(format!("{entry:?} is no block row")))
}

fn settings_of(row: SettingsRow) -> PrivacySettings {
    PrivacySettings {
        likes_visibility: row.likes_visibility,
        blocks: row.blocks,
    }
}

fn key(user: &str, entry: &str) -> Item {
    rows::to_item(&PrivacyKey {
        user_id: user.to_owned(),
        entry: entry.to_owned(),
    })
    .expect("a key of two strings always serializes")
}
