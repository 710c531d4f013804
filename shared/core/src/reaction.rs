//! Reaction states and the transition table: the heart of count correctness.

use std::fmt;
use std::ops::{Add, AddAssign, Neg};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ValidationError;

/// A user's reaction to one item. A row that was never written reads as `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ReactionState {
    Like,
    Dislike,
    None,
}

impl ReactionState {
    pub const ALL: [ReactionState; 3] = [Self::Like, Self::Dislike, Self::None];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Like => "LIKE",
            Self::Dislike => "DISLIKE",
            Self::None => "NONE",
        }
    }

    /// One letter, for the compact idempotency records kept on the row.
    pub fn code(self) -> char {
        match self {
            Self::Like => 'L',
            Self::Dislike => 'D',
            Self::None => 'N',
        }
    }

    pub fn from_code(code: char) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The contribution of one row in this state to an item's counts.
    fn weight(self) -> Delta {
        match self {
            Self::Like => Delta {
                like: 1,
                dislike: 0,
            },
            Self::Dislike => Delta {
                like: 0,
                dislike: 1,
            },
            Self::None => Delta::ZERO,
        }
    }
}

impl fmt::Display for ReactionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReactionState {
    type Err = ValidationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| ValidationError::UnknownState(s.to_owned()))
    }
}

/// A change to an item's like and dislike counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Delta {
    pub like: i64,
    pub dislike: i64,
}

impl Delta {
    pub const ZERO: Delta = Delta {
        like: 0,
        dislike: 0,
    };

    pub fn is_zero(self) -> bool {
        self == Self::ZERO
    }
}

impl Add for Delta {
    type Output = Delta;

    fn add(self, rhs: Delta) -> Delta {
        Delta {
            like: self.like + rhs.like,
            dislike: self.dislike + rhs.dislike,
        }
    }
}

impl AddAssign for Delta {
    fn add_assign(&mut self, rhs: Delta) {
        *self = *self + rhs;
    }
}

impl Neg for Delta {
    type Output = Delta;

    fn neg(self) -> Delta {
        Delta {
            like: -self.like,
            dislike: -self.dislike,
        }
    }
}

/// A move of one stored row from one state to another.
///
/// Deltas are computed from the stored old state, never from the request: a count
/// changes only when a stored state really flips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transition {
    pub from: ReactionState,
    pub to: ReactionState,
}

impl Transition {
    pub fn new(from: ReactionState, to: ReactionState) -> Self {
        Self { from, to }
    }

    /// True when the stored state really changes (X → X is no write and no event).
    pub fn is_flip(self) -> bool {
        self.from != self.to
    }

    pub fn delta(self) -> Delta {
        self.to.weight() + -self.from.weight()
    }
}

#[cfg(test)]
mod tests {
    use super::ReactionState::{Dislike, Like, None as Neutral};
    use super::*;

    fn d(like: i64, dislike: i64) -> Delta {
        Delta { like, dislike }
    }

    #[test]
    fn every_transition_pair_has_the_designed_delta() {
        let table = [
            (Neutral, Like, d(1, 0)),
            (Neutral, Dislike, d(0, 1)),
            (Like, Neutral, d(-1, 0)),
            (Dislike, Neutral, d(0, -1)),
            (Like, Dislike, d(-1, 1)),
            (Dislike, Like, d(1, -1)),
            (Like, Like, d(0, 0)),
            (Dislike, Dislike, d(0, 0)),
            (Neutral, Neutral, d(0, 0)),
        ];
        let listed: std::collections::HashSet<(ReactionState, ReactionState)> =
            table.iter().map(|(from, to, _)| (*from, *to)).collect();
        let every: std::collections::HashSet<(ReactionState, ReactionState)> = ReactionState::ALL
            .into_iter()
            .flat_map(|from| ReactionState::ALL.map(|to| (from, to)))
            .collect();
        assert_eq!(listed, every, "every pair is listed once");
        for (from, to, expected) in table {
            let t = Transition::new(from, to);
            assert_eq!(t.delta(), expected, "{from} -> {to}");
            assert_eq!(t.is_flip(), from != to, "{from} -> {to}");
        }
    }

    #[test]
    fn states_parse_only_their_exact_names() {
        for state in ReactionState::ALL {
            assert_eq!(state.as_str().parse::<ReactionState>().unwrap(), state);
            assert_eq!(ReactionState::from_code(state.code()), Some(state));
        }
        for bad in ["like", "Like", "", "NEUTRAL", "LIKE "] {
            assert!(bad.parse::<ReactionState>().is_err(), "{bad:?}");
        }
        assert_eq!(ReactionState::from_code('x'), None);
    }

    #[test]
    fn states_serialize_as_upper_case_names() {
        assert_eq!(serde_json::to_string(&Dislike).unwrap(), "\"DISLIKE\"");
        let parsed: ReactionState = serde_json::from_str("\"NONE\"").unwrap();
        assert_eq!(parsed, Neutral);
    }

    proptest::proptest! {
        /// Any walk through states sums to the final state's weight: counts converge to a recount.
        #[test]
        fn deltas_along_any_history_telescope_to_the_final_state(
            walk in proptest::collection::vec(0usize..3, 0..40)
        ) {
            let mut state = Neutral;
            let mut total = Delta::ZERO;
            for i in walk {
                let next = ReactionState::ALL[i];
                total += Transition::new(state, next).delta();
                state = next;
            }
            proptest::prop_assert_eq!(total, Transition::new(Neutral, state).delta());
        }
    }
}
