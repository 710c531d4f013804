//! Rows that keep reconciliation's epoch subtotals keep none for the epoch they were first
//! written in (see [`likes_core::reconcile::FIRST_EPOCH`]): what their writers share. A
//! writer that does not know a row's first epoch asks the row to begin at its delta's
//! earliest epoch, on condition the row is new or began there; refused, the row answers
//! with what it holds. A row's first epoch never changes, so each container asks a row once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use likes_core::reconcile::FIRST_EPOCH;

use crate::rows::Item;
use crate::StoreError;

/// Which epochs a write adds a subtotal for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subtotals {
    /// Every epoch: a row that keeps no first epoch (written before rows kept one, or begun
    /// by a correction), or a row that never does.
    Every,
    /// Every epoch but the row's first.
    After(i64),
    /// Every epoch after this one, which the write makes the row's first, on condition the
    /// row is new, or began there ([`Subtotals::begin_condition`]) where the writer allows it.
    Begin(i64),
}

impl Subtotals {
    /// The epoch the write adds no subtotal for.
    pub(crate) fn implicit(self) -> Option<i64> {
        match self {
            Subtotals::Every => None,
            Subtotals::After(first) | Subtotals::Begin(first) => Some(first),
        }
    }

    /// For [`Subtotals::Begin`], the condition a write adds (with `#first` and `:first`
    /// bound to [`FIRST_EPOCH`] and the epoch): the row is new (it has no `exists`
    /// attribute) or began at that epoch.
    pub(crate) fn begin_condition(exists: &str) -> String {
        format!("(attribute_not_exists({exists}) OR #first = :first)")
    }
}

/// What a conditional write of such a row came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    Took,
    /// Its condition failed on the row as it is: the row's first epoch, if it keeps one,
    /// and whether it had noted this write's intent or a later one.
    Refused {
        first: Option<i64>,
        noted: bool,
    },
}

impl Written {
    /// An UpdateItem's answer, asked with `ReturnValuesOnConditionCheckFailure: ALL_OLD`,
    /// for a write of intent `n` noted in attribute `note`.
    pub(crate) fn of(
        result: Result<UpdateItemOutput, SdkError<UpdateItemError, HttpResponse>>,
        note: &str,
        n: i64,
    ) -> Result<Written, StoreError> {
        match result {
            Ok(_) => Ok(Written::Took),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let held = |name: &str| failed.item().and_then(|old| number_of(old, name));
                    Ok(Written::Refused {
                        first: held(FIRST_EPOCH),
                        noted: held(note).is_some_and(|noted| noted >= n),
                    })
                }
                _ => Err(StoreError::aws("UpdateItem", err)),
            },
        }
    }
}

/// The number a row holds in attribute `name`, if it holds one.
pub(crate) fn number_of(row: &Item, name: &str) -> Option<i64> {
    row.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

/// Where a write stands once its row's first epoch is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// The write that began the row (or found it begun at the same epoch) was the whole
    /// write.
    Took,
    /// The row's first epoch (`None`: it keeps none), and whether the row is known to have
    /// noted the intent already.
    Known { first: Option<i64>, noted: bool },
}

/// A row's partition and sort key.
pub(crate) type RowKey = (String, String);

/// The first epochs of the rows this container wrote or was refused by.
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstEpochs(Arc<Mutex<HashMap<RowKey, Option<i64>>>>);

/// Rows a container remembers; past it, it forgets them all and asks again.
const KEPT: usize = 100_000;

impl FirstEpochs {
    /// The row's first epoch, from memory, or else from `begin(earliest)`: a write that
    /// begins the row at the delta's earliest epoch. A delta without an epoch (`None`) is
    /// written as to a row that keeps no first epoch.
    pub(crate) async fn start<F, Fut>(
        &self,
        key: RowKey,
        earliest: Option<i64>,
        begin: F,
    ) -> Result<Start, StoreError>
    where
        F: FnOnce(i64) -> Fut,
        Fut: Future<Output = Result<Written, StoreError>>,
    {
        if let Some(first) = self.known(&key) {
            return Ok(Start::Known {
                first,
                noted: false,
            });
        }
        let Some(earliest) = earliest else {
            return Ok(Start::Known {
                first: None,
                noted: false,
            });
        };
        match begin(earliest).await? {
            Written::Took => {
                self.learn(key, Some(earliest));
                Ok(Start::Took)
            }
            Written::Refused { first, noted } => {
                self.learn(key, first);
                Ok(Start::Known { first, noted })
            }
        }
    }

    /// Of `keys`, the rows this container does not know.
    pub(crate) fn unknown<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k RowKey>,
    ) -> Vec<&'k RowKey> {
        let known = self.0.lock().expect("first epochs");
        keys.into_iter()
            .filter(|key| !known.contains_key(*key))
            .collect()
    }

    fn known(&self, key: &RowKey) -> Option<Option<i64>> {
        self.0.lock().expect("first epochs").get(key).copied()
    }

    /// Remembers a row that exists, and its first epoch (`None`: it keeps none).
    pub(crate) fn learn(&self, key: RowKey, first: Option<i64>) {
        let mut known = self.0.lock().expect("first epochs");
        if known.len() >= KEPT {
            known.clear();
        }
        known.insert(key, first);
    }
}
