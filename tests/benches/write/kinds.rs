//! Section 1: every kind of reaction once, on one row with typical ids, its requests and
//! write units.

use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_core::{ItemId, UserId};
use likes_tests::say;

use crate::observe::Bench;
use crate::{capacity, sent, TYPICAL_ITEM, TYPICAL_USER};

impl Bench {
    /// Section 1: every kind of reaction once, on one row with typical ids.
    pub async fn reaction_kinds(&self) {
        let user = UserId::parse(TYPICAL_USER).expect("valid");
        let item = ItemId::parse(TYPICAL_ITEM).expect("valid");
        let untouched = ItemId::parse("game:never-liked").expect("valid");
        let steps = [
            ("first like      no row -> LIKE", &item, Like, "k1"),
            ("unchanged       LIKE -> LIKE, new key", &item, Like, "k2"),
            ("replayed key    (k1 again)", &item, Like, "k1"),
            ("unlike          LIKE -> NONE", &item, Neutral, "k3"),
            ("dislike         NONE -> DISLIKE", &item, Dislike, "k4"),
            ("re-like         DISLIKE -> LIKE", &item, Like, "k5"),
            ("switch          LIKE -> DISLIKE", &item, Dislike, "k6"),
            ("un-dislike      DISLIKE -> NONE", &item, Neutral, "k7"),
            ("re-like         NONE -> LIKE", &item, Like, "k8"),
            ("unlike, no row  (never reacted)", &untouched, Neutral, "k9"),
        ];
        say!(
            "\n1. Write units and requests per reaction: ReactionsStore::set as PUT reaction calls it, keyed\n   (user_id {} B, item_id {} B)",
            TYPICAL_USER.len(),
            TYPICAL_ITEM.len()
        );
        say!(
            "   {:<40} {:<16} {:>15} {:>7} {:>6} {:>6}",
            "reaction",
            "requests sent",
            "row B before>after",
            "table ",
            "index",
            "total"
        );
        for (name, item, target, key) in steps {
            let observed = self.observe(&user, item, target, key).await;
            let units = observed.units();
            let mark = if observed.written { " " } else { "*" };
            let table = format!("{}{mark}", units.table);
            say!(
                "   {:<40} {:<16} {:>8} > {:<4}  {:>7} {:>6} {:>6}",
                name,
                sent::describe(&observed.sent),
                capacity::item_size(&observed.before),
                capacity::item_size(&observed.after),
                table,
                units.index,
                units.total(),
            );
        }
        say!("   * the condition failed, nothing was written; DynamoDB still bills a failed conditional");
        say!("     write at the existing item's size, minimum 1 WCU (0 only if failed checks were free).");
        say!("   index: 1 = one by_liked_at entry put (liked_at appears) or deleted (liked_at removed).");
    }
}
