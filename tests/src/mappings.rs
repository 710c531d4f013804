//! The stack's event source mappings, as tests drive and read them: fault switches,
//! counters, settling, and the freshness the pipeline reports.

use crate::{
    within, TestStack, AGGREGATOR_FUNCTION, ERASE_FUNCTION, LEADERBOARD_FUNCTION,
    PUBLISHER_FUNCTION, RETRACT_FUNCTION,
};

impl TestStack {
    /// The aggregator's event source mapping: its fault switches, counters and `settle`.
    pub fn pipeline(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(AGGREGATOR_FUNCTION)
            .expect("template.yaml maps the Reactions stream to AggregatorFunction")
    }

    /// A second mapping identical to `mapping` (its own checkpoints, from its starting
    /// position): what CloudFormation runs beside the old mapping while it replaces it.
    /// Dropping it stops it.
    pub fn second_mapping(
        &self,
        mapping: &likes_local::event_source_mapping::Pipeline,
    ) -> likes_local::event_source_mapping::Pipeline {
        likes_local::event_source_mapping::Pipeline::start(
            mapping.config().clone(),
            crate::stream_shards(),
            &self.stack.aws.sdk,
        )
        .expect("the mapping starts a second time")
    }

    /// The publisher's event source mapping: the event log's faults and counters.
    pub fn publisher(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(PUBLISHER_FUNCTION)
            .expect("template.yaml maps the Reactions stream to PublisherFunction")
    }

    /// The eraser's event source mapping: its fault switches and counters.
    pub fn eraser(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(ERASE_FUNCTION)
            .expect("template.yaml maps the Erasures stream to EraseFunction")
    }

    /// The retractor's event source mapping (on the Moderation stream): faults and counters.
    pub fn retractor(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(RETRACT_FUNCTION)
            .expect("template.yaml maps the Moderation stream to RetractFunction")
    }

    /// How long the aggregator's current tumbling window has left (`None` without windows):
    /// a window's end cuts a batch, and its final invocation writes.
    pub fn window_left(&self) -> Option<std::time::Duration> {
        let window = self.pipeline().config().tumbling_window?;
        let into = likes_core::clock::now_ms() as u128 % window.as_millis();
        Some(window - std::time::Duration::from_millis(into as u64))
    }

    /// Waits until the pipeline applied everything in the stream now (panics after 60 s).
    pub async fn settle(&self) -> likes_local::faults::Counters {
        self.pipeline()
            .settle(std::time::Duration::from_secs(60))
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// Waits until the publisher put the events of everything in the stream now (panics
    /// after 60 s).
    pub async fn settle_events(&self) -> likes_local::faults::Counters {
        self.publisher()
            .settle(std::time::Duration::from_secs(60))
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// The leaderboard's event source mapping (on the Kinesis log): its faults and counters.
    pub fn leaderboard(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.log_reader(LEADERBOARD_FUNCTION)
    }

    pub(crate) fn log_reader(
        &self,
        function: &str,
    ) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(function)
            .unwrap_or_else(|| panic!("template.yaml maps the event log to {function}"))
    }

    /// Waits until every flip in the Reactions stream now is on the event log and applied
    /// to the leaderboard (panics after 60 s each).
    pub async fn settle_leaderboard(&self) -> likes_local::faults::Counters {
        self.settle_log_reader(self.leaderboard()).await
    }

    /// Waits until every flip in the Reactions stream now is counted and through every
    /// reader of the event log: the leaderboard, the likers and the broadcaster.
    pub async fn settle_consumers(&self) {
        self.settle().await;
        self.settle_leaderboard().await;
        self.settle_broadcaster().await;
    }

    pub(crate) async fn settle_log_reader(
        &self,
        reader: &likes_local::event_source_mapping::Pipeline,
    ) -> likes_local::faults::Counters {
        self.settle_events().await;
        reader
            .settle(std::time::Duration::from_secs(60))
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// Waits until the published `as_of` is at least `at_ms` (panics after `timeout`).
    pub async fn wait_for_as_of(&self, at_ms: i64, timeout: std::time::Duration) -> i64 {
        let reached = within(timeout, async || {
            let as_of = self.like_count("game:as-of-probe").await.json()["as_of"].clone();
            match as_of
                .as_str()
                .and_then(|t| likes_core::clock::parse_rfc3339(t).ok())
            {
                Some(as_of) if as_of >= at_ms => Ok(as_of),
                _ => Err(format!("as_of {as_of} did not reach {at_ms}")),
            }
        })
        .await;
        match reached {
            Ok(as_of) => as_of,
            Err(seen) => panic!(
                "{seen} within {timeout:?}\n{}",
                self.watermark_report().await
            ),
        }
    }

    /// Every stream shard's reading, and every virtual shard's progress and watermark: what
    /// `as_of` is computed from, for a failure to show which shard held it back.
    pub(crate) async fn watermark_report(&self) -> String {
        let shards = self.pipeline().shards();
        let ids: Vec<String> = shards.keys().cloned().collect();
        let watermarks =
            likes_store::FreshnessStore::new(self.dynamodb(), self.name("CountsTable"))
                .watermarks(&ids)
                .await;
        let mut report = format!("stream shards: {:#?}\n", self.pipeline().stream_shards());
        for (id, progress) in &shards {
            let watermark = watermarks.as_ref().map(|w| w.get(id));
            report.push_str(&format!("{id}: {progress:?}, watermark {watermark:?}\n"));
        }
        report
    }
}
