//! Section 2: one row flipped LIKE <-> NONE many times, for typical and for the longest ids:
//! how the row grows, when its idempotency keys are trimmed, and the units per flip.

use likes_core::write::{KEYS_KEPT, KEYS_TRIM_ABOVE};
use likes_core::ReactionState::{Like, None as Neutral};
use likes_core::{ItemId, UserId};
use likes_tests::say;

use crate::observe::{Bench, Observed, Units};
use crate::sent::{self, Sent};
use crate::{capacity, TYPICAL_USER};

impl Bench {
    /// Section 2: one row flipped LIKE <-> NONE with a fresh key each time, for typical and
    /// for the longest ids the API accepts: growth, trims, amortized units.
    pub async fn row_growth(&self, flips: usize) {
        let shapes = [
            (
                "typical ids",
                TYPICAL_USER.to_owned(),
                "growth:12345".to_owned(),
            ),
            (
                "longest ids",
                "u".repeat(likes_core::ids::USER_ID_MAX_LEN),
                format!(
                    "growth:{}",
                    "i".repeat(likes_core::ids::ITEM_ID_MAX_LEN - 7)
                ),
            ),
        ];
        let mut columns = Vec::new();
        for (label, user, item) in &shapes {
            let user = UserId::parse(user).expect("valid");
            let item = ItemId::parse(item).expect("valid");
            let mut observed = Vec::with_capacity(flips);
            for flip in 0..flips {
                let target = if flip % 2 == 0 { Like } else { Neutral };
                let key = format!("{label}-{flip}");
                let o = self.observe(&user, &item, target, &key).await;
                assert!(o.written, "flip {flip} of the growth run was refused");
                observed.push(o);
            }
            columns.push(Growth::new(label, &user, &item, &observed));
        }
        say!(
            "\n2. One row flipped {flips} times LIKE <-> NONE, a new Idempotency-Key each (keeps {KEYS_KEPT} keys, trims above {KEYS_TRIM_ABOVE})"
        );
        let row = |name: &str, cell: &dyn Fn(&Growth) -> String| {
            let cells: String = columns
                .iter()
                .map(|column| format!(" {:<38}", cell(column)))
                .collect();
            say!("{}", format!("   {name:<38}{cells}").trim_end());
        };
        row("", &|g| g.label.clone());
        row("requests sent", &|g| g.requests.clone());
        row("trim writes", &|g| g.trim_schedule.clone());
        row("trims per flip", &|g| {
            format!("{:.3}", g.trims as f64 / flips as f64)
        });
        row("row bytes after flip 1", &|g| g.sizes_after[0].to_string());
        row(&format!("row bytes after flip {flips}"), &|g| {
            g.sizes_after[flips - 1].to_string()
        });
        row("row bytes at rest, min-max", &|g| {
            format!(
                "{}-{}",
                g.sizes_after.iter().min().expect("flips"),
                g.sizes_after.iter().max().expect("flips")
            )
        });
        row("row bytes at peak (before a trim)", &|g| g.peak.to_string());
        row("largest write", &|g| format!("{} WCU", g.largest_write));
        row("flips with a write over 1 WCU", &|g| {
            g.over_one_unit.to_string()
        });
        row("table WCU per flip", &|g| {
            format!("{:.3}", g.per_flip(|u| u.table))
        });
        row("index WCU per flip", &|g| {
            format!("{:.3}", g.per_flip(|u| u.index))
        });
        row("trim WCU per flip", &|g| {
            format!("{:.3}", g.per_flip(|u| u.trim))
        });
        row("total WCU per flip", &|g| {
            format!("{:.3}", g.per_flip(Units::total))
        });
        // Between the first and the last trim lie whole trim periods: the long-run rate.
        row("total WCU per flip, steady state", &|g| match g.steady() {
            Some(units) => format!(
                "{:.3} (flips {}-{})",
                average(units, Units::total),
                g.trimmed_at[0] + 1,
                g.trimmed_at[g.trimmed_at.len() - 1]
            ),
            None => "n/a: fewer than 2 trims".to_owned(),
        });
    }
}

/// The figures of one row-growth run.
struct Growth {
    label: String,
    requests: String,
    /// The flips (counted from 1) that were followed by a trim.
    trimmed_at: Vec<usize>,
    trims: usize,
    trim_schedule: String,
    sizes_after: Vec<usize>,
    peak: usize,
    largest_write: u64,
    over_one_unit: usize,
    units: Vec<Units>,
}

impl Growth {
    fn new(label: &str, user: &UserId, item: &ItemId, observed: &[Observed]) -> Self {
        let sent: Vec<Sent> = observed.iter().flat_map(|o| o.sent.clone()).collect();
        let trimmed_at: Vec<usize> = observed
            .iter()
            .enumerate()
            .filter(|(_, o)| o.trims() > 0)
            .map(|(i, _)| i + 1)
            .collect();
        let gaps: Vec<usize> = trimmed_at.windows(2).map(|w| w[1] - w[0]).collect();
        let trim_schedule = match (trimmed_at.first(), gaps.first()) {
            (None, _) => "none".to_owned(),
            (Some(first), None) => format!("1, at flip {first}"),
            (Some(first), Some(gap)) if gaps.iter().all(|g| g == gap) => {
                format!("{}: flip {first}, then every {gap}th", trimmed_at.len())
            }
            (Some(_), Some(_)) => format!("{} at flips {trimmed_at:?}", trimmed_at.len()),
        };
        let largest: Vec<u64> = observed
            .iter()
            .map(|o| {
                let flip = capacity::update_units(&o.before, &o.flipped);
                match o.trims() {
                    0 => flip,
                    _ => flip.max(capacity::update_units(&o.flipped, &o.after)),
                }
            })
            .collect();
        Self {
            label: format!(
                "{label} ({} B user, {} B item)",
                user.as_str().len(),
                item.as_str().len()
            ),
            requests: sent::describe(&sent),
            trims: trimmed_at.len(),
            trimmed_at,
            trim_schedule,
            sizes_after: observed
                .iter()
                .map(|o| capacity::item_size(&o.after))
                .collect(),
            peak: observed
                .iter()
                .map(|o| capacity::item_size(&o.flipped))
                .max()
                .unwrap_or(0),
            largest_write: largest.iter().copied().max().unwrap_or(0),
            over_one_unit: largest.iter().filter(|u| **u > 1).count(),
            units: observed.iter().map(Observed::units).collect(),
        }
    }

    fn per_flip(&self, part: impl Fn(Units) -> u64) -> f64 {
        average(&self.units, part)
    }

    /// The flips after the first trim up to and including the last: whole trim periods.
    fn steady(&self) -> Option<&[Units]> {
        match self.trimmed_at.as_slice() {
            [first, .., last] => Some(&self.units[*first..*last]),
            _ => None,
        }
    }
}

fn average(units: &[Units], part: impl Fn(Units) -> u64) -> f64 {
    units.iter().map(|u| part(*u)).sum::<u64>() as f64 / units.len() as f64
}
