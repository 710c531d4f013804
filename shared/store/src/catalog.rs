//! The Catalog table: what the service knows of items beyond their reactions. Each
//! namespace's rules are one row (`ns#<namespace>`), set by a platform's admin; each owned
//! item's owner and what the owner set are another (`item#<item id>`). Count reads and
//! dislikes read them through [`CatalogCache`]: a viral item's reads cost one read of its
//! rows a second per container, not one each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use likes_core::namespace::{Namespace, NamespaceRules, RulesChange, ShownCounts};
use likes_core::pipeline::Counts;
use likes_core::{ItemId, UserId};

use crate::rows::{self, attr, Item, ItemOwnerRow, NamespaceRow, ITEM_PREFIX, NAMESPACE_PREFIX};
use crate::StoreError;

/// How long a container trusts the catalog rows it read: a rule or a setting changed reaches
/// every read within this long (plus a shared cache's age on the public reads).
pub const CATALOG_CACHE_MS: i64 = 1_000;
/// Rows a container remembers before it forgets the stale ones.
const ROWS_KEPT: usize = 10_000;

/// An item's owner and what they set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemOwner {
    pub owner_id: String,
    pub hide_like_count: bool,
}

/// What decides how an item's counts are shown: its namespace's rules, and whether its
/// owner hid its like count.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ItemRules {
    pub rules: NamespaceRules,
    pub owner_hides: bool,
}

impl ItemRules {
    /// `counts` as the public sees them.
    pub fn shown(&self, counts: Counts) -> ShownCounts {
        self.rules.shown(counts, self.owner_hides)
    }

    /// Whether the public sees the like count.
    pub fn shows_likes(&self) -> bool {
        self.rules.shows_likes(self.owner_hides)
    }
}

fn catalog_key(key: String) -> Item {
    Item::from([(attr::CATALOG_KEY.to_owned(), AttributeValue::S(key))])
}

fn namespace_key(namespace: &Namespace) -> String {
    format!("{NAMESPACE_PREFIX}{}", namespace.as_str())
}

fn item_key(item: &ItemId) -> String {
    format!("{ITEM_PREFIX}{}", item.as_str())
}

#[derive(Debug, Clone)]
pub struct CatalogStore {
    client: Client,
    table: String,
}

impl CatalogStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// The row of `key`, strongly consistent.
    async fn row(&self, key: String, operation: &'static str) -> Result<Option<Item>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(catalog_key(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| StoreError::aws(operation, err))?;
        Ok(output.item)
    }

    /// The rules in force for `namespace`, strongly consistent; the defaults when never set.
    pub async fn rules(&self, namespace: &Namespace) -> Result<NamespaceRules, StoreError> {
        let row = self
            .row(namespace_key(namespace), "GetItem (namespace rules)")
            .await?;
        rules_of(row)
    }

    /// Makes `change` to `namespace`'s rules and answers them as stored. Each field given is
    /// set on its own in one UpdateItem, so two changes of different fields at once both
    /// hold; a change of no field reads the rules.
    pub async fn change_rules(
        &self,
        namespace: &Namespace,
        change: RulesChange,
        now_ms: i64,
    ) -> Result<NamespaceRules, StoreError> {
        if change == RulesChange::default() {
            return self.rules(namespace).await;
        }
        let change = change.normalized();
        let windows = change.leaderboard_windows.map(|windows| {
            windows
                .iter()
                .map(|window| AttributeValue::S(snake(window)))
                .collect::<Vec<_>>()
        });
        let mut sets = vec![format!("#{0} = :{0}", attr::RULES_SET_AT)];
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(catalog_key(namespace_key(namespace))))
            .expression_attribute_names(format!("#{}", attr::RULES_SET_AT), attr::RULES_SET_AT)
            .expression_attribute_values(
                format!(":{}", attr::RULES_SET_AT),
                AttributeValue::N(now_ms.to_string()),
            )
            .return_values(ReturnValue::AllNew);
        let fields = [
            (
                attr::DISLIKES,
                change.dislikes.map(|rule| AttributeValue::S(snake(&rule))),
            ),
            (
                attr::LIKE_COUNT_RULE,
                change
                    .like_count
                    .map(|rule| AttributeValue::S(snake(&rule))),
            ),
            (attr::LEADERBOARD_WINDOWS, windows.map(AttributeValue::L)),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                sets.push(format!("#{name} = :{name}"));
                update = update
                    .expression_attribute_names(format!("#{name}"), name)
                    .expression_attribute_values(format!(":{name}"), value);
            }
        }
        let output = update
            .update_expression(format!("SET {}", sets.join(", ")))
            .send()
            .await
            .map_err(|err| StoreError::aws("UpdateItem (namespace rules)", err))?;
        let item = output.attributes.ok_or_else(|| {
            StoreError::Corrupt("an UpdateItem asking ALL_NEW answered no attributes".into())
        })?;
        Ok(rows::from_item::<NamespaceRow>(item)?.rules())
    }
}

/// A rule's name as its JSON (and its stored attribute) spells it.
fn snake(rule: &impl serde::Serialize) -> String {
    serde_json::to_value(rule)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .expect("a rule serializes as its name")
}

impl CatalogStore {
    /// `item`'s owner, strongly consistent; `None` when nobody registered one.
    pub async fn owner(&self, item: &ItemId) -> Result<Option<ItemOwner>, StoreError> {
        let row = self.row(item_key(item), "GetItem (item owner)").await?;
        row.map(|row| rows::from_item::<ItemOwnerRow>(row).map(owner_of))
            .transpose()
    }

    /// Registers `owner` as `item`'s owner, or transfers it to them; what the owner set
    /// stays with the item.
    pub async fn set_owner(
        &self,
        item: &ItemId,
        owner: &UserId,
        now_ms: i64,
    ) -> Result<ItemOwner, StoreError> {
        let output = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(catalog_key(item_key(item))))
            .update_expression("SET #owner = :owner, #at = :at")
            .expression_attribute_names("#owner", attr::OWNER_ID)
            .expression_attribute_names("#at", attr::OWNED_AT)
            .expression_attribute_values(":owner", AttributeValue::S(owner.as_str().to_owned()))
            .expression_attribute_values(":at", AttributeValue::N(now_ms.to_string()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|err| StoreError::aws("UpdateItem (item owner)", err))?;
        owner_row(output.attributes)
    }

    /// Sets whether `item`'s like count is hidden, if `caller` owns it: `None` when they do
    /// not (or nobody does), and nothing is written. The condition holds it to the owner at
    /// the moment of the write, whatever a transfer does meanwhile.
    pub async fn set_hide_like_count(
        &self,
        item: &ItemId,
        caller: &UserId,
        hide: bool,
    ) -> Result<Option<ItemOwner>, StoreError> {
        let sent = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(catalog_key(item_key(item))))
            .update_expression("SET #hide = :hide")
            .condition_expression("#owner = :caller")
            .expression_attribute_names("#hide", attr::HIDE_LIKE_COUNT)
            .expression_attribute_names("#owner", attr::OWNER_ID)
            .expression_attribute_values(":hide", AttributeValue::Bool(hide))
            .expression_attribute_values(":caller", AttributeValue::S(caller.as_str().to_owned()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match sent {
            Ok(output) => owner_row(output.attributes).map(Some),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(None)
            }
            Err(err) => Err(StoreError::aws("UpdateItem (item settings)", err)),
        }
    }
}

impl CatalogStore {
    /// The rows of `keys` that exist, by key, eventually consistent (the cache's reads).
    async fn rows(&self, keys: &[String]) -> Result<HashMap<String, Item>, StoreError> {
        let rows = crate::batch::get_all(
            &self.client,
            &self.table,
            keys.iter().cloned().map(catalog_key).collect(),
            |request| request,
        )
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let key = row.get(attr::CATALOG_KEY)?.as_s().ok()?.clone();
                Some((key, row))
            })
            .collect())
    }
}

fn owner_of(row: ItemOwnerRow) -> ItemOwner {
    ItemOwner {
        owner_id: row.owner_id,
        hide_like_count: row.hide_like_count,
    }
}

fn owner_row(attributes: Option<Item>) -> Result<ItemOwner, StoreError> {
    let item = attributes.ok_or_else(|| {
        StoreError::Corrupt("an UpdateItem asking ALL_NEW answered no attributes".into())
    })?;
    Ok(owner_of(rows::from_item::<ItemOwnerRow>(item)?))
}

/// Catalog rows as this container last read them (a row that does not exist too), each
/// trusted for [`CATALOG_CACHE_MS`].
#[derive(Debug, Clone)]
pub struct CatalogCache {
    store: CatalogStore,
    /// By row key. Shared by every clone in this container; never held across a call.
    seen: Arc<Mutex<HashMap<String, SeenRow>>>,
}

/// A row as read (`None`: there is none), and when.
type SeenRow = (Option<Item>, i64);

impl CatalogCache {
    pub fn new(store: CatalogStore) -> Self {
        Self {
            store,
            seen: Arc::default(),
        }
    }

    /// The store it reads through, for the reads and writes that must not be cached.
    pub fn store(&self) -> &CatalogStore {
        &self.store
    }

    /// The rules of `namespace`, as read at most [`CATALOG_CACHE_MS`] before `now_ms`.
    pub async fn rules(
        &self,
        namespace: &Namespace,
        now_ms: i64,
    ) -> Result<NamespaceRules, StoreError> {
        let mut rules = self
            .namespace_rules(std::slice::from_ref(namespace), now_ms)
            .await?;
        Ok(rules.remove(namespace).unwrap_or_default())
    }

    /// The rules of each of `namespaces`, as read at most [`CATALOG_CACHE_MS`] before
    /// `now_ms`: what is not fresh is read in one batch.
    pub async fn namespace_rules(
        &self,
        namespaces: &[Namespace],
        now_ms: i64,
    ) -> Result<HashMap<Namespace, NamespaceRules>, StoreError> {
        let keys = namespaces.iter().map(namespace_key).collect();
        let mut rows = self.rows(keys, now_ms).await?;
        namespaces
            .iter()
            .map(|namespace| {
                let row = rows.remove(&namespace_key(namespace)).flatten();
                Ok((namespace.clone(), rules_of(row)?))
            })
            .collect()
    }

    /// What decides how each of `items`' counts is shown, as read at most
    /// [`CATALOG_CACHE_MS`] before `now_ms`: what is not fresh is read in one batch.
    pub async fn item_rules(
        &self,
        items: &[ItemId],
        now_ms: i64,
    ) -> Result<HashMap<ItemId, ItemRules>, StoreError> {
        let namespaces: Vec<Namespace> = items.iter().map(Namespace::of).collect();
        let keys = namespaces
            .iter()
            .map(namespace_key)
            .chain(items.iter().map(item_key))
            .collect();
        let rows = self.rows(keys, now_ms).await?;
        items
            .iter()
            .zip(namespaces)
            .map(|(item, namespace)| {
                let rules = rules_of(rows.get(&namespace_key(&namespace)).cloned().flatten())?;
                let owner_hides = match rows.get(&item_key(item)).cloned().flatten() {
                    Some(row) => rows::from_item::<ItemOwnerRow>(row)?.hide_like_count,
                    None => false,
                };
                Ok((item.clone(), ItemRules { rules, owner_hides }))
            })
            .collect()
    }

    async fn rows(
        &self,
        mut keys: Vec<String>,
        now_ms: i64,
    ) -> Result<HashMap<String, Option<Item>>, StoreError> {
        let fresh = |at: i64| now_ms - at < CATALOG_CACHE_MS;
        // Items of one namespace name its row once each.
        keys.sort_unstable();
        keys.dedup();
        let mut found = HashMap::with_capacity(keys.len());
        {
            let seen = self.seen.lock().expect("catalog rows");
            keys.retain(|key| match seen.get(key) {
                Some((row, at)) if fresh(*at) => {
                    found.insert(key.clone(), row.clone());
                    false
                }
                _ => true,
            });
        }
        if keys.is_empty() {
            return Ok(found);
        }
        let mut read = self.store.rows(&keys).await?;
        let mut seen = self.seen.lock().expect("catalog rows");
        if seen.len() >= ROWS_KEPT {
            seen.retain(|_, (_, at)| fresh(*at));
        }
        for key in keys {
            let row = read.remove(&key);
            seen.insert(key.clone(), (row.clone(), now_ms));
            found.insert(key, row);
        }
        Ok(found)
    }
}

fn rules_of(row: Option<Item>) -> Result<NamespaceRules, StoreError> {
    match row {
        Some(row) => Ok(rows::from_item::<NamespaceRow>(row)?.rules()),
        None => Ok(NamespaceRules::default()),
    }
}
