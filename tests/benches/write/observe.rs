//! The bench's view of one reaction write: the code under test on a client whose requests are
//! counted, the row read around each write, and the write units it cost.

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_core::{IdempotencyKey, ItemId, ReactionState, UserId, WriteOutcome, WriteRequest};
use likes_store::ReactionsStore;
use likes_tests::TestStack;

use crate::capacity::{self, Item, KeysOnlyIndex};
use crate::sent::{Sent, SentRequests};

/// The `by_liked_at` LSI of template.yaml: KEYS_ONLY on `liked_at`.
const LIKED_AT_INDEX: KeysOnlyIndex = KeysOnlyIndex {
    table_keys: ["user_id", "item_id"],
    sort_key: "liked_at",
};

pub struct Bench {
    /// Reads the images; its requests are not counted.
    raw: Client,
    /// The code under test, on a client whose requests are counted.
    store: ReactionsStore,
    sent: SentRequests,
    table: String,
}

/// One reaction write, seen from outside: the row before, the row after, what went out.
pub struct Observed {
    pub before: Item,
    /// The row right after the reaction's own UpdateItem: `after` unless a trim followed.
    pub flipped: Item,
    pub after: Item,
    pub sent: Vec<Sent>,
    /// The condition held: the row was written.
    pub written: bool,
}

/// Write units of one observed reaction.
#[derive(Debug, Default, Clone, Copy)]
pub struct Units {
    pub table: u64,
    pub index: u64,
    pub trim: u64,
}

impl Units {
    pub fn total(self) -> u64 {
        self.table + self.index + self.trim
    }
}

impl Observed {
    pub fn units(&self) -> Units {
        if !self.written {
            // A failed condition is still billed (existing item size, at least 1 WCU); it
            // writes nothing, so no index entry moves.
            return Units {
                table: capacity::failed_condition_units(&self.before),
                ..Units::default()
            };
        }
        Units {
            table: capacity::update_units(&self.before, &self.flipped),
            index: LIKED_AT_INDEX.write_units(&self.before, &self.flipped),
            trim: if self.trims() > 0 {
                capacity::update_units(&self.flipped, &self.after)
                    + LIKED_AT_INDEX.write_units(&self.flipped, &self.after)
            } else {
                0
            },
        }
    }

    pub fn trims(&self) -> usize {
        self.sent
            .iter()
            .filter(|s| matches!(s, Sent::Trim { .. }))
            .count()
    }
}

impl Bench {
    pub fn new(stack: &TestStack) -> Self {
        let (client, sent) = SentRequests::client(&stack.stack.aws.sdk);
        let table = stack.name("ReactionsTable");
        Self {
            raw: stack.dynamodb(),
            store: ReactionsStore::new(client, table.clone()),
            sent,
            table,
        }
    }

    async fn row(&self, user: &UserId, item: &ItemId) -> Item {
        self.raw
            .get_item()
            .table_name(&self.table)
            .key("user_id", AttributeValue::S(user.as_str().into()))
            .key("item_id", AttributeValue::S(item.as_str().into()))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem")
            .item
            .unwrap_or_default()
    }

    pub async fn observe(
        &self,
        user: &UserId,
        item: &ItemId,
        target: ReactionState,
        key: &str,
    ) -> Observed {
        let request = WriteRequest {
            target,
            key: Some(IdempotencyKey::parse(key).expect("a valid key").hash()),
            if_match: None,
        };
        let before = self.row(user, item).await;
        self.sent.take();
        let outcome = self
            .store
            .set(user, item, &request, likes_core::clock::now_ms())
            .await
            .expect("the write is answered");
        let sent = self.sent.take();
        let after = self.row(user, item).await;
        let written = matches!(outcome, WriteOutcome::Applied(_));
        if !written {
            assert_eq!(before, after, "a refused write changed the row");
        }
        // The trim runs right after the flip, inside `set`: the row between the two is the
        // final row plus the attributes the trim removed, which the flip left as they were.
        let mut flipped = after.clone();
        for request in &sent {
            if let Sent::Trim { removed } = request {
                for name in removed {
                    let value = before
                        .get(name)
                        .unwrap_or_else(|| panic!("trimmed {name} was on the row before the flip"));
                    assert!(!after.contains_key(name), "{name} survived its trim");
                    flipped.insert(name.clone(), value.clone());
                }
            }
        }
        Observed {
            before,
            flipped,
            after,
            sent,
            written,
        }
    }
}
