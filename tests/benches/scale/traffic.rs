//! The offered load: flips as the Reactions table's stream carries them, millisecond by
//! millisecond. A viral item liked by distinct users at a steady rate, over a background
//! of reactions to many items drawn from a Zipf-like (power-law) popularity, by users drawn
//! uniformly from a large population. Seeded: every run, and both designs, see the same
//! flips.

use likes_core::pipeline::{Change, ChangeRecord};
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_core::{Delta, ItemId, Transition};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use crate::mapping::{Micros, MS};

pub const VIRAL_ITEM: &str = "experience:viral";
/// Simulated time 0 as epoch millis, so stored times have their real width.
pub const EPOCH_MS: i64 = 1_750_000_000_000;
/// Background users are drawn from this many.
const USERS: u64 = 100_000_000;

#[derive(Debug, Clone)]
pub struct TrafficConfig {
    pub seconds: u64,
    pub viral_per_second: f64,
    pub background_per_second: f64,
    pub background_items: u64,
    /// Exponent of the background's popularity: 0 is uniform, 1 is classic Zipf.
    pub zipf_exponent: f64,
    pub seed: u64,
}

/// Records arriving on a stream at `at`: one millisecond's flips on the Reactions stream,
/// or one put's events on the event log.
#[derive(Debug, Clone)]
pub struct Arrival<R = ChangeRecord> {
    pub at: Micros,
    pub records: Vec<R>,
}

/// What was offered, to check the counts against.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Offered {
    pub flips: u64,
    pub viral: Delta,
    pub total: Delta,
}

pub struct Traffic {
    config: TrafficConfig,
    rng: ChaCha8Rng,
    viral: ItemId,
    popularity: Popularity,
    millisecond: u64,
    viral_due: f64,
    background_due: f64,
    viral_users: u64,
    records: u64,
    offered: Offered,
}

impl Traffic {
    pub fn new(config: TrafficConfig) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            viral: ItemId::parse(VIRAL_ITEM).expect("a valid item id"),
            popularity: Popularity::new(config.background_items, config.zipf_exponent),
            millisecond: 0,
            viral_due: 0.0,
            background_due: 0.0,
            viral_users: 0,
            records: 0,
            offered: Offered::default(),
            config,
        }
    }

    /// The next millisecond's flips, viral ones spread evenly among the background ones.
    fn next_millisecond(&mut self) -> Vec<ChangeRecord> {
        self.viral_due += self.config.viral_per_second / 1000.0;
        self.background_due += self.config.background_per_second / 1000.0;
        let (viral, background) = (self.viral_due as u64, self.background_due as u64);
        self.viral_due -= viral as f64;
        self.background_due -= background as f64;
        let total = viral + background;
        let records = (0..total)
            .map(|i| {
                let is_viral = (i + 1) * viral / total > i * viral / total;
                self.flip(is_viral)
            })
            .collect();
        self.millisecond += 1;
        records
    }

    fn flip(&mut self, viral: bool) -> ChangeRecord {
        let (user_id, item_id, transition) = if viral {
            self.viral_users += 1;
            let user = format!("v{}", self.viral_users);
            (user, self.viral.clone(), Transition::new(Neutral, Like))
        } else {
            let user = format!("u{}", self.rng.random_range(0..USERS));
            let rank = self.popularity.rank(self.rng.random::<f64>());
            let item = ItemId::parse(&format!("item:{rank}")).expect("a valid item id");
            (user, item, self.background_transition())
        };
        let delta = transition.delta();
        self.offered.flips += 1;
        self.offered.total += delta;
        if viral {
            self.offered.viral += delta;
        }
        self.records += 1;
        let time_ms = EPOCH_MS + self.millisecond as i64;
        ChangeRecord {
            // Stream eventIDs are 32 hex digits, as AWS's: two 16-digit halves, each with its
            // top bit set so no padding is needed.
            event_id: format!("{:x}{:x}", 1u64 << 63, (1u64 << 63) | self.records),
            sequence_number: self.records.to_string(),
            stream_time_ms: time_ms,
            change: Some(Change {
                user_id,
                item_id,
                transition,
                op_id: 1,
                event_time_ms: time_ms,
                row_created_ms: time_ms,
                // A like begun or ended now: where its entry is, for the likers.
                liked_at_ms: Some(time_ms),
                moderated: None,
            }),
        }
    }

    /// Mostly first likes, some dislikes, unlikes and switches: a chunk can net an item to
    /// zero, which then writes nothing.
    fn background_transition(&mut self) -> Transition {
        match self.rng.random_range(0..10) {
            0..=5 => Transition::new(Neutral, Like),
            6 => Transition::new(Neutral, Dislike),
            7 | 8 => Transition::new(Like, Neutral),
            _ => Transition::new(Like, Dislike),
        }
    }

    pub fn offered(&self) -> Offered {
        self.offered
    }
}

/// Millisecond by millisecond, until the run's time is up.
impl Iterator for Traffic {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        if self.millisecond >= self.config.seconds * 1000 {
            return None;
        }
        let at = self.millisecond * MS;
        let records = self.next_millisecond();
        Some(Arrival { at, records })
    }
}

/// Item ranks 1..=N with weight rank^-s, drawn by inverting the continuous power law's
/// distribution (close to the discrete Zipf law for large N, and O(1) per draw).
#[derive(Debug, Clone, Copy)]
struct Popularity {
    items: u64,
    /// 1 - s, and (N + 1)^(1 - s) - 1; for s = 1, ln(N + 1).
    a: f64,
    span: f64,
}

impl Popularity {
    fn new(items: u64, exponent: f64) -> Self {
        assert!(items > 0, "at least one background item");
        let (n, a) = (items as f64 + 1.0, 1.0 - exponent);
        let span = if a.abs() < 1e-9 {
            n.ln()
        } else {
            n.powf(a) - 1.0
        };
        Self { items, a, span }
    }

    fn rank(&self, u: f64) -> u64 {
        let x = if self.a.abs() < 1e-9 {
            (self.span * u).exp()
        } else {
            (self.span * u + 1.0).powf(1.0 / self.a)
        };
        (x as u64).clamp(1, self.items)
    }
}
