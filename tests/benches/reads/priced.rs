//! The read units of every request a DynamoDB client sends, priced by AWS's rules from what
//! it asked (its table, its consistency, its keys) and what it read: an interceptor on the
//! client's config, so the code under test is not touched. A strongly consistent read costs
//! twice an eventually consistent one; a Query is priced on the sum of what it read, each
//! item of a BatchGetItem on its own, and a key found missing as the smallest read.

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::operation::batch_get_item::{BatchGetItemInput, BatchGetItemOutput};
use aws_sdk_dynamodb::operation::get_item::{GetItemInput, GetItemOutput};
use aws_sdk_dynamodb::operation::query::{QueryInput, QueryOutput};
use aws_smithy_types::config_bag::{Storable, StoreReplace};

use crate::capacity::{eventually_consistent_half_units, item_size};

/// One read request as sent, priced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priced {
    pub table: String,
    pub half_units: u64,
}

#[derive(Debug, Clone, Default)]
pub struct PricedReads(Arc<Mutex<Vec<Priced>>>);

/// What a request asked, kept in its config bag until its answer is read.
#[derive(Debug, Clone)]
struct Asked {
    table: String,
    consistent: bool,
    keys: usize,
}

impl Storable for Asked {
    type Storer = StoreReplace<Self>;
}

impl PricedReads {
    /// A DynamoDB client on `sdk` whose reads are priced, and their prices.
    pub fn client(sdk: &aws_config::SdkConfig) -> (aws_sdk_dynamodb::Client, Self) {
        let priced = Self::default();
        let config = aws_sdk_dynamodb::config::Builder::from(sdk)
            .interceptor(priced.clone())
            .build();
        (aws_sdk_dynamodb::Client::from_conf(config), priced)
    }

    /// The reads sent since the last call.
    pub fn take(&self) -> Vec<Priced> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }
}

impl Intercept for PricedReads {
    fn name(&self) -> &'static str {
        "PricedReads"
    }

    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let input = context.input();
        let asked = if let Some(query) = input.downcast_ref::<QueryInput>() {
            Asked {
                table: query.table_name().unwrap_or_default().to_owned(),
                consistent: query.consistent_read() == Some(true),
                keys: 0,
            }
        } else if let Some(get) = input.downcast_ref::<GetItemInput>() {
            Asked {
                table: get.table_name().unwrap_or_default().to_owned(),
                consistent: get.consistent_read() == Some(true),
                keys: 1,
            }
        } else if let Some(batch) = input.downcast_ref::<BatchGetItemInput>() {
            let (table, asked) = batch
                .request_items()
                .and_then(|items| items.iter().next())
                .expect("a BatchGetItem of one table");
            Asked {
                table: table.clone(),
                consistent: asked.consistent_read() == Some(true),
                keys: asked.keys().len(),
            }
        } else {
            return Ok(());
        };
        cfg.interceptor_state().store_put(asked);
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (Some(asked), Ok(output)) = (cfg.load::<Asked>(), context.output_or_error()) else {
            return Ok(());
        };
        let price = |bytes: usize| {
            eventually_consistent_half_units(bytes) * if asked.consistent { 2 } else { 1 }
        };
        let half_units = if let Some(query) = output.downcast_ref::<QueryOutput>() {
            price(query.items().iter().map(item_size).sum())
        } else if let Some(get) = output.downcast_ref::<GetItemOutput>() {
            price(get.item().map_or(0, item_size))
        } else if let Some(batch) = output.downcast_ref::<BatchGetItemOutput>() {
            let read = batch
                .responses()
                .and_then(|r| r.get(&asked.table))
                .map_or(&[][..], Vec::as_slice);
            let left = batch
                .unprocessed_keys()
                .and_then(|u| u.get(&asked.table))
                .map_or(0, |u| u.keys().len());
            let missing = asked.keys - read.len() - left;
            read.iter().map(|item| price(item_size(item))).sum::<u64>() + missing as u64 * price(0)
        } else {
            return Ok(());
        };
        self.0.lock().expect("not poisoned").push(Priced {
            table: asked.table.clone(),
            half_units,
        });
        Ok(())
    }
}
