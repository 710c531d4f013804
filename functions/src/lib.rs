//! The registry of Likes' Lambda functions: each one's `Handler` in template.yaml, and what
//! serves it. One bootstrap (`src/main.rs`) serves them all, dispatching on the `Handler`
//! Lambda gives it in `_HANDLER`; the handlers' logic lives in the shared crates.

use std::future::Future;
use std::pin::Pin;

use likes_api::Endpoint;

pub type Error = lambda_runtime::Error;

/// Runs one function's Lambda runtime loop until the process ends.
pub type Serve = fn() -> Pin<Box<dyn Future<Output = Result<(), Error>>>>;

/// An HTTP endpoint's entry: its `Handler` is the endpoint's own.
macro_rules! endpoint {
    ($endpoint:ident) => {
        (Endpoint::$endpoint.handler(), || {
            Box::pin(likes_api::run(Endpoint::$endpoint))
        })
    };
}

/// An entry: the `Handler` and the runtime loop that serves it.
macro_rules! function {
    ($handler:literal, $serve:expr) => {
        ($handler, || Box::pin($serve))
    };
}

/// A WebSocket route's entry: `likes-live` serves it by its `Handler`.
macro_rules! socket {
    ($handler:literal) => {
        function!($handler, likes_live::run_socket($handler))
    };
}

/// Every function, by its `Handler` in template.yaml. Adding a function is its template
/// entry, its handler in a shared crate, and one line here.
pub const FUNCTIONS: &[(&str, Serve)] = &[
    endpoint!(PutReaction),
    endpoint!(PutLike),
    endpoint!(DeleteLike),
    endpoint!(GetReaction),
    endpoint!(ListLikedItems),
    endpoint!(GetLikeCount),
    endpoint!(BatchGetLikeCounts),
    endpoint!(BatchGetItems),
    endpoint!(EraseReactions),
    endpoint!(GetErasure),
    endpoint!(GetLeaderboard),
    endpoint!(ListLikers),
    function!("aggregator", likes_aggregator::run_aggregator()),
    function!("publisher", likes_aggregator::run_publisher()),
    function!("erase", likes_aggregator::run_eraser()),
    function!("leaderboard", likes_aggregator::run_leaderboard()),
    function!("likers", likes_aggregator::run_likers()),
    function!("pulse", likes_aggregator::run_pulse()),
    function!(
        "refresh-leaderboard",
        likes_aggregator::run_leaderboard_refresh()
    ),
    function!("reconcile", likes_reconcile::run()),
    socket!("live-connect"),
    socket!("live-disconnect"),
    socket!("live-message"),
    function!("live-broadcast", likes_live::run_broadcaster()),
];

/// What serves the function whose `Handler` is `handler`.
pub fn function(handler: &str) -> Option<Serve> {
    FUNCTIONS
        .iter()
        .find(|(name, _)| *name == handler)
        .map(|(_, serve)| *serve)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_handler_is_listed_once() {
        let mut names: Vec<&str> = FUNCTIONS.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FUNCTIONS.len());
        assert!(function("put-reaction").is_some());
        assert!(function("bootstrap").is_none());
    }
}
