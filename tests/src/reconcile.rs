//! Reconciliation as tests run it: the reconcile function built from the stack's template,
//! and the cuts its test stacks use.

use crate::TestStack;

impl TestStack {
    /// The reconcile function's handler state, configured like the stack's function.
    pub fn reconciler(&self) -> likes_reconcile::Reconciler {
        self.reconciler_with(&[])
    }

    /// As [`Self::reconciler`], with some of the function's variables set otherwise.
    pub fn reconciler_with(&self, overrides: &[(&str, &str)]) -> likes_reconcile::Reconciler {
        let mut environment = self
            .stack
            .function_environment("ReconcileFunction")
            .unwrap_or_else(|err| panic!("{err}"));
        for (name, value) in overrides {
            environment.insert((*name).to_owned(), (*value).to_owned());
        }
        let config =
            likes_reconcile::ReconcileConfig::from_lookup(|name| environment.get(name).cloned())
                .unwrap_or_else(|err| panic!("{err}"));
        likes_reconcile::Reconciler::new(
            config,
            self.dynamodb(),
            likes_local::aws::s3_client(&self.stack.aws.sdk),
            self.athena(),
        )
    }

    pub fn athena(&self) -> aws_sdk_athena::Client {
        aws_sdk_athena::Client::new(&self.stack.aws.sdk)
    }

    /// The epochs and export uncertainty the stack's aggregator and reconciliation use.
    pub fn reconcile_period(&self) -> likes_core::reconcile::Period {
        let environment = self
            .stack
            .function_environment("ReconcileFunction")
            .unwrap_or_else(|err| panic!("{err}"));
        let seconds = |name: &str| -> i64 {
            environment[name]
                .parse()
                .unwrap_or_else(|_| panic!("{name} is a number"))
        };
        likes_core::reconcile::Period {
            length_ms: seconds("RECONCILE_EPOCH_SECONDS") * 1000,
            uncertainty_ms: seconds("EXPORT_UNCERTAINTY_SECONDS") * 1000,
        }
    }

    /// The first cut at least `margin_ms` from now, so every write so far is clear of its
    /// uncertainty.
    pub fn next_cut(&self, margin_ms: i64) -> i64 {
        let period = self.reconcile_period();
        period.cut_at(likes_core::clock::now_ms() + margin_ms + period.uncertainty_ms)
            + period.length_ms
    }

    /// The first moment a write is clear of the cut's uncertainty, even as the stream records
    /// it: `ApproximateCreationDateTime` is rounded down to the second.
    pub fn clear_of(&self, cut: i64) -> i64 {
        cut + self.reconcile_period().uncertainty_ms + 1_200
    }
}
