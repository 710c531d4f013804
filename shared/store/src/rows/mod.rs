//! The row codec: every DynamoDB item the service reads or writes, as a typed row, and the
//! names of their attributes. Items are converted with `serde_dynamo`, so a misspelt or
//! mistyped attribute fails here, in one place, never as a silent default. A field's name
//! is its attribute's name; expressions name attributes through the constants below, and
//! a test holds the two together.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::StoreError;

pub mod attr;
mod catalog;
mod counts;
mod erasures;
mod leaderboard;
mod likers;
mod live;
mod moderation;
mod privacy;
mod reactions;

pub use catalog::*;
pub use counts::*;
pub use erasures::*;
pub use leaderboard::*;
pub use likers::*;
pub use live::*;
pub use moderation::*;
pub use privacy::*;
pub use reactions::*;

/// An item as the SDK hands it over.
pub type Item = HashMap<String, AttributeValue>;

/// Reads a typed row from an item; an item that does not fit is stored data this code cannot
/// read.
pub fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item).map_err(StoreError::Row)
}

/// The item of a typed row.
pub fn to_item<T: Serialize>(row: &T) -> Result<Item, StoreError> {
    serde_dynamo::to_item(row).map_err(StoreError::Row)
}

/// One attribute of a typed value (a list of rows, say).
pub fn to_attribute<T: Serialize>(value: &T) -> Result<AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(value).map_err(StoreError::Row)
}

/// A number attribute, as every expression value of a number is written.
pub(crate) fn number(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// An attribute of a row whose name is not fixed.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Attribute {
    Text(String),
    Number(i64),
    Other(serde::de::IgnoredAny),
}

#[cfg(test)]
mod tests;
