//! The leaderboard's and the likers' consumer of the Kinesis event log.
//!
//! Per invocation of the consumer (one shard's records, in order): finish the intent a
//! crashed attempt left, skip the records the shard's progress already covers, write each
//! event's likers entries (a like's, or its end's, as the claim of the record it came in:
//! an event on the log twice scores once), freeze each run's net deltas per board and item
//! as the shard's next intent, apply it (one conditional ADD per score row however many
//! events it holds) and move the progress.

use std::collections::{BTreeMap, BTreeSet};

use aws_lambda_events::event::kinesis::{KinesisEvent, KinesisEventRecord};
use aws_lambda_events::event::streams::{KinesisBatchItemFailure, KinesisEventResponse};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use lambda_runtime::LambdaEvent;
use likes_core::leaderboard::{score_deltas, KeptWindows};
use likes_core::likers::{liker_updates, unplaced};
use likes_core::namespace::Namespace;
use likes_core::pipeline::{sequence_after, LogRecord, ReactionEvent};
use likes_core::reconcile::Period;
use likes_store::leaderboard::{run_length, Owned, IN_FLIGHT};
use likes_store::metrics::Report;
use likes_store::{CatalogCache, CatalogStore, LeaderboardStore, LikersStore, StoreError};
use tracing::Instrument;

use crate::ConfigError;

#[derive(Debug, Clone)]
pub struct LeaderboardConfig {
    pub leaderboard_table: String,
    pub likers_table: String,
    /// Where each namespace's rules name the leaderboard windows it keeps.
    pub catalog_table: String,
    /// The shards each board's score rows spread over.
    pub board_shards: u32,
    /// Reconciliation's epochs, which all-time score rows keep subtotals by.
    pub period: Period,
}

impl LeaderboardConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let seconds = |name| ConfigError::whole(&lookup, name).map(|n| n as i64 * 1000);
        Ok(Self {
            leaderboard_table: ConfigError::var(&lookup, "LEADERBOARD_TABLE")?,
            likers_table: ConfigError::var(&lookup, "LIKERS_TABLE")?,
            catalog_table: ConfigError::var(&lookup, "CATALOG_TABLE")?,
            board_shards: ConfigError::whole(&lookup, "LEADERBOARD_SHARDS")? as u32,
            period: Period {
                length_ms: seconds("RECONCILE_EPOCH_SECONDS")?,
                uncertainty_ms: seconds("EXPORT_UNCERTAINTY_SECONDS")?,
            },
        })
    }
}

#[derive(Debug, Clone)]
pub struct Leaderboard {
    store: LeaderboardStore,
    likers: LikersStore,
    catalog: CatalogCache,
    period: Period,
}

/// What one invocation did.
#[derive(Debug, Default)]
struct Applied {
    /// Events this invocation scored (its records' own claims).
    scored: usize,
    /// Likers entries written, and those that already held the flip or a later one.
    entries_written: usize,
    entries_superseded: usize,
    /// Events that end a like without saying when it was liked: their entries are left
    /// to reconciliation, and they are claimed on their own.
    unplaced: usize,
    /// The first record not applied, if the invocation stopped early.
    failed_at: Option<usize>,
}

impl Leaderboard {
    pub fn new(config: LeaderboardConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            store: LeaderboardStore::new(dynamodb.clone(), config.leaderboard_table)
                .with_board_shards(config.board_shards),
            likers: LikersStore::new(dynamodb.clone(), config.likers_table),
            catalog: CatalogCache::new(CatalogStore::new(dynamodb, config.catalog_table)),
            period: config.period,
        }
    }

    /// Applies the batch's events. A failed write, or an event that cannot be read, is a
    /// `batchItemFailures` entry: at the unreadable record (the records before it are
    /// applied), else at the first record, whose retry skips what the progress covers.
    pub async fn handle(
        &self,
        event: LambdaEvent<KinesisEvent>,
    ) -> Result<KinesisEventResponse, lambda_runtime::Error> {
        let records = event.payload.records;
        let span = tracing::info_span!("leaderboard", records = records.len());
        // Boxed: the future nests the store's streams of calls deeper than rustc lays out.
        let applied = match Box::pin(self.apply(&records)).instrument(span).await {
            Ok(applied) => applied,
            Err(err) => {
                tracing::error!(error = %err, "the batch could not be applied; Lambda retries it");
                Applied {
                    failed_at: Some(0),
                    ..Applied::default()
                }
            }
        };
        let mut response = KinesisEventResponse::default();
        if let Some(at) = applied.failed_at {
            let mut failure = KinesisBatchItemFailure::default();
            failure.item_identifier = Some(records[at].kinesis.sequence_number.clone());
            response.batch_item_failures.push(failure);
        }
        Report::new("Likes/Leaderboard")
            .value("RecordsReceived", "Count", records.len() as f64)
            .value("EventsApplied", "Count", applied.scored as f64)
            .value("EntriesWritten", "Count", applied.entries_written as f64)
            .value(
                "EntriesSuperseded",
                "Count",
                applied.entries_superseded as f64,
            )
            .value("EventsUnplaced", "Count", applied.unplaced as f64)
            .value(
                "BatchFailures",
                "Count",
                applied.failed_at.is_some() as u64 as f64,
            )
            .emit();
        Ok(response)
    }

    async fn apply(&self, records: &[KinesisEventRecord]) -> Result<Applied, StoreError> {
        let Some(first) = records.first() else {
            return Ok(Applied::default());
        };
        let shard = shard_of(first);
        let state = self.store.shard_state(shard).await?;
        let mut through = state.through_seq;
        let mut intents = state.intents;
        let mut scored = state.scored;
        if let Some(intent) = state.pending {
            self.store
                .complete(shard, &intent, through.as_deref(), &mut scored)
                .await?;
            through = Some(intent.last_seq);
            intents = intent.n;
        }

        let mut events: Vec<(&KinesisEventRecord, ReactionEvent)> = Vec::new();
        let mut failed_at = None;
        // The last record read, event or heartbeat: the progress moves to it.
        let mut last_read = None;
        for (at, record) in records.iter().enumerate() {
            let seq = &record.kinesis.sequence_number;
            if through.as_deref().is_some_and(|t| !sequence_after(seq, t)) {
                continue;
            }
            match LogRecord::parse(&record.kinesis.data) {
                Ok(read) => {
                    last_read = Some(record);
                    events.extend(read.event().map(|event| (record, event)));
                }
                Err(err) => {
                    tracing::error!(sequence_number = %seq, error = %err, "unreadable event; Lambda retries from it");
                    failed_at = Some(at);
                    break;
                }
            }
        }
        let mut applied = Applied {
            failed_at,
            ..Applied::default()
        };
        let kept = self.kept_windows(&events).await?;
        for run in runs(&events, self.period, &kept) {
            let (last, _) = run.last().expect("runs are never empty");
            let last_seq = last.kinesis.sequence_number.clone();
            let arrival = last
                .kinesis
                .approximate_arrival_timestamp
                .timestamp_millis();
            let owners: Vec<String> = run
                .iter()
                .map(|(record, _)| format!("{shard}:{}", record.kinesis.sequence_number))
                .collect();
            let owned: Vec<Owned> = run
                .iter()
                .zip(&owners)
                .map(|((_, event), by)| Owned { event, by })
                .collect();
            let scoring = self.take(&owned, &mut applied).await?;
            applied.scored += scoring.len();
            let deltas = score_deltas(scoring, self.period, &kept);
            if deltas.is_empty() {
                self.store
                    .advance(shard, through.as_deref(), &last_seq, arrival, intents)
                    .await?;
            } else {
                let intent = self
                    .store
                    .begin(shard, intents + 1, &deltas, &last_seq, arrival)
                    .await?;
                self.store
                    .complete(shard, &intent, through.as_deref(), &mut scored)
                    .await?;
                intents = intent.n;
            }
            through = Some(last_seq);
        }
        // Heartbeats after the last event score nothing; the progress moves over them.
        if let Some(last) = last_read {
            let last_seq = &last.kinesis.sequence_number;
            if through
                .as_deref()
                .is_none_or(|t| sequence_after(last_seq, t))
            {
                let arrival = last
                    .kinesis
                    .approximate_arrival_timestamp
                    .timestamp_millis();
                self.store
                    .advance(shard, through.as_deref(), last_seq, arrival, intents)
                    .await?;
            }
        }
        Ok(applied)
    }

    /// The windows the events' namespaces keep, as their rules name them now (through the
    /// container's catalog cache). A run's intent freezes its deltas, so a retry after a rule
    /// changed finishes what was begun.
    async fn kept_windows<R>(
        &self,
        events: &[(R, ReactionEvent)],
    ) -> Result<KeptWindows, StoreError> {
        let namespaces: Vec<Namespace> = events
            .iter()
            .map(|(_, event)| Namespace::of_prefix(&event.item_id))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let rules = self
            .catalog
            .namespace_rules(&namespaces, likes_core::clock::now_ms())
            .await?;
        Ok(KeptWindows::new(rules.into_iter().map(
            |(namespace, rules)| (namespace, rules.leaderboard_windows),
        )))
    }

    /// Writes the likers entries of a run's events, each like's and each like's end's as
    /// the claim of the record it came in, and claims on their own the scoring events that
    /// write no such entry (an end that does not say when it was liked): the events the run
    /// scores, those its records claimed (new, or by an earlier attempt at the same record).
    async fn take<'e>(
        &self,
        run: &[Owned<'e>],
        applied: &mut Applied,
    ) -> Result<Vec<&'e ReactionEvent>, StoreError> {
        let now_ms = likes_core::clock::now_ms();
        // Collected before they are streamed, so the future stays `Send`. A row's flips are
        // written in their order, other rows' at once: a like and its unlike in one run
        // would otherwise race for one entry, and when the unlike landed first, the like's
        // write was refused and its claim took a write of its own.
        let mut writes: BTreeMap<(&str, &str), Vec<_>> = BTreeMap::new();
        let mut on_their_own = Vec::new();
        for (at, owned) in run.iter().enumerate() {
            let event = owned.event;
            if unplaced(event) {
                tracing::warn!(event_id = %event.event_id, "an unlike without the like's time: its entry is left to reconciliation");
                applied.unplaced += 1;
            }
            let mut claimed = false;
            for update in liker_updates(event, now_ms) {
                let claims = update.change.claims();
                claimed |= claims;
                let likers = &self.likers;
                // (the event, whether the entry took the flip, whether it scores)
                let row = (event.item_id.as_str(), event.user_id.as_str());
                writes.entry(row).or_default().push(async move {
                    if claims {
                        let mine = likers.claim(&update, owned.by).await?;
                        Ok::<_, StoreError>((at, mine, mine))
                    } else {
                        Ok((at, likers.apply(&update).await?, false))
                    }
                });
            }
            if event.like_delta != 0 && !claimed {
                on_their_own.push(*owned);
            }
        }
        let rows: Vec<_> = writes
            .into_values()
            .map(|row| async move {
                let mut done = Vec::with_capacity(row.len());
                for write in row {
                    done.push(write.await?);
                }
                Ok::<_, StoreError>(done)
            })
            .collect();
        let done: Vec<(usize, bool, bool)> = stream::iter(rows)
            .buffer_unordered(IN_FLIGHT)
            .try_concat()
            .await?;
        let mut scoring = Vec::new();
        for (at, took, scores) in done {
            if took {
                applied.entries_written += 1;
            } else {
                applied.entries_superseded += 1;
            }
            if scores {
                scoring.push(at);
            }
        }
        scoring.sort_unstable();
        let mut scoring: Vec<&ReactionEvent> =
            scoring.into_iter().map(|at| run[at].event).collect();
        let mine = self.store.claim(&on_their_own, now_ms).await?;
        scoring.extend(
            on_their_own
                .iter()
                .zip(mine)
                .filter(|(_, mine)| *mine)
                .map(|(owned, _)| owned.event),
        );
        Ok(scoring)
    }
}

/// `events` cut into runs, each as [`run_length`] takes it: its intent fits one item.
fn runs<'e, R>(
    events: &'e [(R, ReactionEvent)],
    period: Period,
    kept: &KeptWindows,
) -> Vec<&'e [(R, ReactionEvent)]> {
    let mut runs = Vec::new();
    let mut rest = events;
    while !rest.is_empty() {
        let (run, after) = rest.split_at(run_length(rest.iter().map(|(_, e)| e), period, kept));
        runs.push(run);
        rest = after;
    }
    runs
}

/// The Kinesis shard a record came from: its event id is `<shard id>:<sequence number>`.
fn shard_of(record: &KinesisEventRecord) -> &str {
    record
        .event_id
        .as_deref()
        .and_then(|id| id.split_once(':'))
        .map_or("", |(shard, _)| shard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use likes_core::leaderboard::MAX_RUN_EPOCHS;
    use likes_core::ReactionState::{Like, None as Neutral};
    use likes_store::leaderboard::{intent_row_bytes, MAX_INTENT_BYTES};

    const PERIOD: Period = Period {
        length_ms: 300_000,
        uncertainty_ms: 60_000,
    };

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
            liked_at_ms: None,
            cause: None,
            reason: None,
            moderation_id: None,
        }
    }

    /// What the intent of `run` holds.
    fn intent_bytes(run: &[((), ReactionEvent)]) -> usize {
        intent_row_bytes(&score_deltas(
            run.iter().map(|(_, e)| e),
            PERIOD,
            &KeptWindows::default(),
        ))
    }

    #[test]
    fn runs_cut_where_an_intent_would_outgrow_its_row_and_keep_every_event_in_order() {
        // Items of the longest ids, each liked once: every event adds two rows.
        let events: Vec<((), ReactionEvent)> = (0..5_000)
            .map(|u| ((), event(u, &format!("{u:i>128}"))))
            .collect();
        let cut = runs(&events, PERIOD, &KeptWindows::default());
        assert!(cut.len() > 1);
        let mut start = 0;
        for run in &cut {
            assert!(intent_bytes(run) <= MAX_INTENT_BYTES);
            let end = start + run.len();
            if end < events.len() {
                // Full: with the next event its intent would not have fitted.
                assert!(intent_bytes(&events[start..=end]) > MAX_INTENT_BYTES);
            }
            start = end;
        }
        let rejoined: Vec<&str> = cut
            .iter()
            .flat_map(|run| run.iter().map(|(_, e)| e.user_id.as_str()))
            .collect();
        let all: Vec<&str> = events.iter().map(|(_, e)| e.user_id.as_str()).collect();
        assert_eq!(rejoined, all);
        assert!(runs::<()>(&[], PERIOD, &KeptWindows::default()).is_empty());
        // A short batch is one run.
        assert_eq!(
            runs(&events[..10], PERIOD, &KeptWindows::default()).len(),
            1
        );
    }

    #[test]
    fn a_viral_items_events_between_others_add_nothing_to_a_run_after_its_first() {
        let item = |u: usize| format!("{u:i>128}");
        let distinct: Vec<((), ReactionEvent)> =
            (0..5_000).map(|u| ((), event(u, &item(u)))).collect();
        // The same items, each followed by two likes of a viral item by other users.
        let with_viral: Vec<((), ReactionEvent)> = (0..5_000)
            .flat_map(|u| {
                [
                    ((), event(u, &item(u))),
                    ((), event(10_000 + 2 * u, "game:viral")),
                    ((), event(10_001 + 2 * u, "game:viral")),
                ]
            })
            .collect();
        let lengths = |cut: Vec<&[((), ReactionEvent)]>| {
            cut.iter()
                .map(|run| {
                    assert!(intent_bytes(run) <= MAX_INTENT_BYTES);
                    run.iter()
                        .filter(|(_, e)| e.item_id != "game:viral")
                        .count()
                })
                .collect::<Vec<_>>()
        };
        let plain = lengths(runs(&distinct, PERIOD, &KeptWindows::default()));
        let among_viral = lengths(runs(&with_viral, PERIOD, &KeptWindows::default()));
        // As many runs, each full one holding as many other items, less the room the viral
        // item's own rows take.
        assert_eq!(plain.len(), among_viral.len());
        let full = plain.len() - 1;
        assert!(plain[..full]
            .iter()
            .zip(&among_viral[..full])
            .all(|(alone, mixed)| alone >= mixed && alone - mixed <= 1));
    }

    #[test]
    fn runs_cut_before_they_span_more_epochs_than_a_score_row_update_may_name() {
        // A replay of old events: one event per epoch.
        let events: Vec<((), ReactionEvent)> = (0..40)
            .map(|n| {
                let mut event = event(n, "game:1");
                event.event_time_ms = n as i64 * PERIOD.length_ms;
                ((), event)
            })
            .collect();
        let cut = runs(&events, PERIOD, &KeptWindows::default());
        assert_eq!(
            cut.iter().map(|run| run.len()).collect::<Vec<_>>(),
            [MAX_RUN_EPOCHS, MAX_RUN_EPOCHS, 40 - 2 * MAX_RUN_EPOCHS]
        );
    }
}
