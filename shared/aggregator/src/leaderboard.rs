//! The leaderboard's consumer of the Kinesis event log: each batch's events, deduplicated by
//! `event_id`, applied in chunks of one transaction each (a claim per event, one score delta
//! per board and item), then the shard's progress for `as_of`.

use aws_lambda_events::event::kinesis::{KinesisEvent, KinesisEventRecord};
use aws_lambda_events::event::streams::{KinesisBatchItemFailure, KinesisEventResponse};
use lambda_runtime::LambdaEvent;
use likes_core::pipeline::ReactionEvent;
use likes_store::leaderboard::{actions_for, MAX_ACTIONS};
use likes_store::metrics::Report;
use likes_store::LeaderboardStore;
use tracing::Instrument;

use crate::ConfigError;

#[derive(Debug, Clone)]
pub struct LeaderboardConfig {
    pub leaderboard_table: String,
}

impl LeaderboardConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            leaderboard_table: lookup("LEADERBOARD_TABLE")
                .ok_or(ConfigError::Missing("LEADERBOARD_TABLE"))?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Leaderboard {
    store: LeaderboardStore,
}

impl Leaderboard {
    pub fn new(config: LeaderboardConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            store: LeaderboardStore::new(dynamodb, config.leaderboard_table),
        }
    }

    /// Applies the batch's events. A chunk that cannot be written, or an event that cannot
    /// be read, is a `batchItemFailures` entry at its first record, so Lambda retries from
    /// there; the chunks before it stay applied and their claims make the retry skip them.
    pub async fn handle(
        &self,
        event: LambdaEvent<KinesisEvent>,
    ) -> Result<KinesisEventResponse, lambda_runtime::Error> {
        let records = event.payload.records;
        let span = tracing::info_span!("leaderboard", records = records.len());
        let (applied, failed) = self.apply(&records).instrument(span).await;
        let mut response = KinesisEventResponse::default();
        if let Some(at) = failed {
            let mut failure = KinesisBatchItemFailure::default();
            failure.item_identifier = Some(records[at].kinesis.sequence_number.clone());
            response.batch_item_failures.push(failure);
        }
        Report::new("Likes/Leaderboard")
            .value("RecordsReceived", "Count", records.len() as f64)
            .value("EventsApplied", "Count", applied as f64)
            .value("BatchFailures", "Count", failed.is_some() as u64 as f64)
            .emit();
        Ok(response)
    }

    /// Events applied, and the first record not applied if the batch stopped early.
    async fn apply(&self, records: &[KinesisEventRecord]) -> (usize, Option<usize>) {
        let mut events = Vec::with_capacity(records.len());
        for (at, record) in records.iter().enumerate() {
            match serde_json::from_slice::<ReactionEvent>(&record.kinesis.data) {
                Ok(event) => events.push((at, event)),
                Err(err) => {
                    tracing::error!(sequence_number = %record.kinesis.sequence_number, error = %err, "unreadable event; Lambda retries from it");
                    return (self.apply_events(records, &events).await.0, Some(at));
                }
            }
        }
        self.apply_events(records, &events).await
    }

    async fn apply_events(
        &self,
        records: &[KinesisEventRecord],
        events: &[(usize, ReactionEvent)],
    ) -> (usize, Option<usize>) {
        let now_ms = likes_core::clock::now_ms();
        let mut applied = 0;
        let mut rest = events;
        while !rest.is_empty() {
            let (chunk, len) = chunk(rest.iter().map(|(_, event)| event));
            match self.store.apply(&chunk, now_ms).await {
                Ok(n) => applied += n,
                Err(err) => {
                    tracing::error!(error = %err, "a chunk could not be applied; Lambda retries from it");
                    return (applied, Some(rest[0].0));
                }
            }
            rest = &rest[len..];
        }
        // Progress is the arrival of the last record applied on this shard (one batch holds
        // one shard's records, in order).
        if let Some(last) = events.last().map(|(at, _)| &records[*at]) {
            let shard = last
                .event_id
                .as_deref()
                .and_then(|id| id.split_once(':'))
                .map_or("", |(shard, _)| shard);
            let through = last
                .kinesis
                .approximate_arrival_timestamp
                .timestamp_millis();
            if let Err(err) = self.store.advance(shard, through).await {
                // The events are applied; only as_of lags until the next batch.
                tracing::warn!(error = %err, "shard progress not recorded");
            }
        }
        (applied, None)
    }
}

/// The leading events that fit one transaction, each event once (the log may hold an event
/// twice, even in one batch), and how many of `events` they cover.
pub fn chunk<'e>(
    events: impl IntoIterator<Item = &'e ReactionEvent>,
) -> (Vec<&'e ReactionEvent>, usize) {
    let mut chunk: Vec<&ReactionEvent> = Vec::new();
    let mut taken = 0;
    for event in events {
        if chunk.iter().any(|e| e.flip_key() == event.flip_key()) {
            taken += 1;
            continue;
        }
        chunk.push(event);
        if actions_for(chunk.iter().copied()) > MAX_ACTIONS {
            chunk.pop();
            break;
        }
        taken += 1;
    }
    (chunk, taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use likes_core::ReactionState::{Like, None as Neutral};

    fn event(user: usize, item: &str) -> ReactionEvent {
        ReactionEvent {
            event_id: format!("u{user}#{item}#1"),
            user_id: format!("u{user}"),
            item_id: item.into(),
            op_id: 1,
            old_state: Neutral,
            new_state: Like,
            like_delta: 1,
            dislike_delta: 0,
            event_time_ms: 1_796_119_200_000,
            source_sequence_number: user.to_string(),
            row_created_ms: 1_796_119_100_000,
        }
    }

    #[test]
    fn a_chunk_takes_each_event_once_and_fits_one_transaction() {
        let hot: Vec<ReactionEvent> = (0..150).map(|u| event(u, "hot")).collect();
        let (first, len) = chunk(&hot);
        // 98 claims and the item's two score rows.
        assert_eq!((first.len(), len), (98, 98));
        assert_eq!(actions_for(first.iter().copied()), MAX_ACTIONS);

        let twice = [event(1, "a"), event(1, "a"), event(2, "b")];
        let (deduplicated, len) = chunk(&twice);
        assert_eq!(len, 3, "the duplicate is covered");
        assert_eq!(deduplicated, [&twice[0], &twice[2]]);
        // The same event_id in a later life of the row is another flip.
        let mut again = event(1, "a");
        again.row_created_ms += 60_000;
        let lives = [event(1, "a"), again];
        assert_eq!(chunk(&lives).0.len(), 2);

        let cold: Vec<ReactionEvent> = (0..50).map(|u| event(u, &format!("i{u}"))).collect();
        let (first, len) = chunk(&cold);
        // 33 claims and 66 score rows: a 34th event would take three more actions.
        assert_eq!((first.len(), len), (33, 33));
    }
}
