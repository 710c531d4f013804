//! Cuts a run cannot serve or gives up: a cut before the table existed, none yet within the
//! recovery window, an export that fails every attempt; none of them blocks the next cut.

use likes_core::clock::now_ms;
use likes_core::ReactionState::Like;
use likes_reconcile::{ReconcileError, Step, MAX_ATTEMPTS};
use likes_store::reconciliation::Phase;
use likes_tests::{until, TestStack};

use crate::reconcile_support::{reconcile, reconcile_next, run_state};

/// A cut the table's recovery window does not reach (a stack younger than it) cannot be
/// exported: the run is given up with a clear error, and the next cut runs as usual.
#[tokio::test]
async fn a_cut_before_the_table_existed_is_given_up_and_blocks_nothing() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let before = now_ms() - 60_000;
    let err = stack
        .reconciler()
        .run_at(Some(before), true, now_ms() + 60_000, &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            likes_reconcile::ReconcileError::CutNotExportable { .. }
        ),
        "{err}"
    );
    stack.react("after", "game:after", Like).await;
    let report = reconcile_next(&stack).await;
    assert_eq!(
        (report.items_checked, report.items_drifted),
        (1, 0),
        "{report:?}"
    );
}

/// A stack younger than point-in-time recovery's lag has no cut an export can serve: the
/// operator's run says when one will be and writes nothing; waiting for it succeeds.
#[tokio::test]
async fn no_cut_is_served_before_recovery_reaches_one_and_nothing_is_left_behind() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    // Day-long epochs: the first cut inside the table's recovery window is hours away.
    let daily = stack.reconciler_with(&[("RECONCILE_EPOCH_SECONDS", "86400")]);
    let err = daily
        .run_at(None, false, now_ms() + 60_000, &mut |_| {})
        .await
        .unwrap_err();
    let ReconcileError::NotYetRestorable {
        cut_ms,
        servable_at_ms,
    } = err
    else {
        panic!("{err}")
    };
    assert!(cut_ms > now_ms() && servable_at_ms > cut_ms, "{err}");
    assert!(
        err.to_string().starts_with("no cut can be exported yet"),
        "{err}"
    );
    assert_eq!(
        run_state(&stack).state().await.unwrap(),
        None,
        "a refused run leaves nothing behind"
    );

    // With the stack's short epochs, waiting reaches the first servable cut.
    stack.react("first", "game:first", Like).await;
    let step = stack
        .reconciler()
        .run_at(None, true, now_ms() + 60_000, &mut |_| {})
        .await
        .expect("the first servable cut is reconciled");
    let Step::Reconciled(report) = step else {
        panic!("the run stopped at {step:?}")
    };
    assert!(report.cut_ms <= stack.latest_restorable_ms().await);
}

/// An export that fails every attempt gives its cut up, with why, after a bounded number of
/// attempts; the cut can be run again, and the next cut proceeds.
#[tokio::test]
async fn an_export_that_fails_every_attempt_gives_the_cut_up_and_the_next_cut_proceeds() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let item = "game:given-up";
    stack.react("u0", item, Like).await;
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    // DynamoDB fails an export whose bucket it cannot write.
    let broken = stack.reconciler_with(&[("EXPORT_BUCKET", "likes-no-such-bucket")]);
    let mut errors = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        errors.push(
            broken
                .run_at(Some(cut), true, now_ms() + 60_000, &mut |_| {})
                .await
                .unwrap_err(),
        );
    }
    assert!(
        matches!(errors[0], ReconcileError::ExportFailed { .. }),
        "{}",
        errors[0]
    );
    let last = errors.last().unwrap();
    assert!(
        matches!(last, ReconcileError::GivenUp { cut_ms, .. } if *cut_ms == cut),
        "{last}"
    );
    let state = run_state(&stack).state().await.unwrap().unwrap();
    assert_eq!((state.cut_ms, &state.phase), (cut, &Phase::Done));
    assert!(state.abandoned.is_some(), "{state:?}");

    // The operator runs the given-up cut again, and it is reconciled from a new export.
    let again = reconcile(&stack, cut).await;
    assert_eq!(
        (again.items_checked, again.items_drifted),
        (1, 0),
        "{again:?}"
    );
    let later = reconcile_next(&stack).await;
    assert_eq!(
        (later.items_checked, later.items_drifted),
        (1, 0),
        "{later:?}"
    );
}
