//! How long each AWS call of a consumer takes: uniform over a range typical of calls made
//! from Lambda in the same region, seeded so a run repeats exactly. No tail, no jitter
//! beyond the range, no throttling delay.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use crate::mapping::{Micros, MS};

/// One UpdateItem (or PutItem) of an item of up to a few tens of KB.
pub const UPDATE_ITEM: (Micros, Micros) = (4 * MS, 10 * MS);
/// One GetItem, or a Query of a few items, strongly consistent or not: an UpdateItem's
/// range, as the leaderboard's model takes its reads.
pub const QUERY: (Micros, Micros) = UPDATE_ITEM;
/// One PutRecords of up to 500 records.
pub const PUT_RECORDS: (Micros, Micros) = (10 * MS, 25 * MS);

#[derive(Debug)]
pub struct Latency {
    rng: ChaCha8Rng,
}

impl Latency {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    pub fn draw(&mut self, (low, high): (Micros, Micros)) -> Micros {
        self.rng.random_range(low..=high)
    }
}
