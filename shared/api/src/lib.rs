//! The HTTP edge of Likes: one handler per endpoint, shared by the Lambda bootstrap
//! (`functions/`) and the local HTTP front, so both run the very same code.

mod catalog;
mod counts;
mod cursor_secret;
pub mod edge;
mod erasure;
mod error;
mod leaderboard;
mod likers;
mod moderation;
mod privacy;
mod reactions;

use aws_config::SdkConfig;
use lambda_http::http::header::{HeaderValue, CACHE_CONTROL};
use lambda_http::{Body, Request, Response};
use likes_core::{ItemId, ValidationError, WriteLimit};
use likes_store::{
    CachedCounts, CatalogCache, CatalogStore, CountsStore, ErasuresStore, LeaderboardStore,
    LikersStore, ModerationStore, PrivacyStore, RateLimitsStore, ReactionsStore, RemovedItems,
};

pub use cursor_secret::CursorSecret;
pub use error::ApiError;

/// Every HTTP endpoint; each is its own Lambda function, named by its `Handler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    PutReaction,
    PutLike,
    DeleteLike,
    GetReaction,
    ListLikedItems,
    GetLikeCount,
    BatchGetLikeCounts,
    BatchGetItems,
    EraseReactions,
    GetErasure,
    GetLeaderboard,
    ListLikers,
    RetractUser,
    GetRetraction,
    LiftSuspension,
    RemoveItem,
    GetSettings,
    PutSettings,
    PutBlock,
    DeleteBlock,
    ListBlocks,
    GetNamespace,
    PutNamespace,
    PutItemOwner,
    GetItemOwner,
    GetItemSettings,
    PutItemSettings,
    GetItemStats,
}

impl Endpoint {
    /// The function's `Handler` in template.yaml.
    pub const fn handler(self) -> &'static str {
        match self {
            Self::PutReaction => "put-reaction",
            Self::PutLike => "put-like",
            Self::DeleteLike => "delete-like",
            Self::GetReaction => "get-reaction",
            Self::ListLikedItems => "list-liked-items",
            Self::GetLikeCount => "get-like-count",
            Self::BatchGetLikeCounts => "batch-get-like-counts",
            Self::BatchGetItems => "batch-get-items",
            Self::EraseReactions => "erase-reactions",
            Self::GetErasure => "get-erasure",
            Self::GetLeaderboard => "get-leaderboard",
            Self::ListLikers => "list-likers",
            Self::RetractUser => "retract-user",
            Self::GetRetraction => "get-retraction",
            Self::LiftSuspension => "lift-suspension",
            Self::RemoveItem => "remove-item",
            Self::GetSettings => "get-settings",
            Self::PutSettings => "put-settings",
            Self::PutBlock => "put-block",
            Self::DeleteBlock => "delete-block",
            Self::ListBlocks => "list-blocks",
            Self::GetNamespace => "get-namespace",
            Self::PutNamespace => "put-namespace",
            Self::PutItemOwner => "put-item-owner",
            Self::GetItemOwner => "get-item-owner",
            Self::GetItemSettings => "get-item-settings",
            Self::PutItemSettings => "put-item-settings",
            Self::GetItemStats => "get-item-stats",
        }
    }

    fn needs_reactions(self) -> bool {
        !self.needs_catalog_only()
            && !matches!(
                self,
                Self::GetLikeCount
                    | Self::BatchGetLikeCounts
                    | Self::EraseReactions
                    | Self::GetErasure
                    | Self::GetLeaderboard
                    | Self::ListLikers
                    | Self::GetRetraction
                    | Self::LiftSuspension
                    | Self::RemoveItem
                    | Self::GetSettings
                    | Self::PutSettings
                    | Self::PutBlock
                    | Self::DeleteBlock
                    | Self::ListBlocks
            )
    }

    /// The namespace, owner and item settings endpoints: the Catalog table alone (the
    /// stats read the counts too).
    fn needs_catalog_only(self) -> bool {
        matches!(
            self,
            Self::GetNamespace
                | Self::PutNamespace
                | Self::PutItemOwner
                | Self::GetItemOwner
                | Self::GetItemSettings
                | Self::PutItemSettings
                | Self::GetItemStats
        )
    }

    /// What reads or applies the catalog: its own endpoints, a reaction write (a dislike
    /// where the namespace takes none is refused) and every public count read (it shows what
    /// the rules and the owner let it).
    fn needs_catalog(self) -> bool {
        self.needs_catalog_only()
            || matches!(
                self,
                Self::PutReaction
                    | Self::GetLikeCount
                    | Self::BatchGetLikeCounts
                    | Self::BatchGetItems
                    | Self::GetLeaderboard
            )
    }

    /// The erasure endpoints see only the Erasures table; the eraser does the deleting.
    fn needs_erasures(self) -> bool {
        matches!(self, Self::EraseReactions | Self::GetErasure)
    }

    /// The moderation endpoints see the Moderation table; the retractor does the writing.
    fn needs_moderation(self) -> bool {
        matches!(
            self,
            Self::RetractUser | Self::GetRetraction | Self::LiftSuspension | Self::RemoveItem
        ) || self.needs_removals()
    }

    /// Writes to an item and its own reads (its count, its likers) are refused once it is
    /// removed: they read its removal mark, through the container's cache.
    fn needs_removals(self) -> bool {
        matches!(
            self,
            Self::PutReaction
                | Self::PutLike
                | Self::DeleteLike
                | Self::GetLikeCount
                | Self::ListLikers
        )
    }

    /// Suspensions sit on the users' RateLimits rows.
    fn needs_suspensions(self) -> bool {
        matches!(self, Self::RetractUser | Self::LiftSuspension)
    }

    /// The count reads, and the likers list, which reads the buckets an item's count rows
    /// list.
    fn needs_counts(self) -> bool {
        matches!(
            self,
            Self::GetLikeCount
                | Self::BatchGetLikeCounts
                | Self::BatchGetItems
                | Self::ListLikers
                | Self::GetItemStats
        )
    }

    fn needs_cursor_secret(self) -> bool {
        matches!(
            self,
            Self::ListLikedItems | Self::ListLikers | Self::ListBlocks
        )
    }

    /// The privacy endpoints, and the likers list, which shows each reader what they may see.
    fn needs_privacy(self) -> bool {
        matches!(
            self,
            Self::GetSettings
                | Self::PutSettings
                | Self::PutBlock
                | Self::DeleteBlock
                | Self::ListBlocks
                | Self::ListLikers
        )
    }

    /// Every write is limited per user; reads are not.
    fn needs_write_limit(self) -> bool {
        matches!(self, Self::PutReaction | Self::PutLike | Self::DeleteLike)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error(transparent)]
    Variable(likes_core::config::ConfigError),
    #[error("WRITE_RATE_PER_SECOND and WRITE_BURST: {0}")]
    WriteLimit(ValidationError),
}

/// What the handlers need to know, read once at start. Each endpoint reads only what it
/// uses; the rest stays `None`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub reactions_table: Option<String>,
    pub counts_table: Option<String>,
    pub erasures_table: Option<String>,
    /// The secret (its ARN) whose values are the page cursors' keys.
    pub cursor_secret: Option<String>,
    /// The RateLimits table and the limit the write endpoints hold each user to.
    pub write_limit: Option<(String, WriteLimit)>,
    pub leaderboard_table: Option<String>,
    pub likers_table: Option<String>,
    /// The Moderation table, and the RateLimits table where suspensions are set.
    pub moderation_table: Option<String>,
    pub suspensions_table: Option<String>,
    /// The endpoint refuses a removed item (its mark is on the Moderation table).
    pub removals: bool,
    pub privacy_table: Option<String>,
    pub catalog_table: Option<String>,
}

impl Config {
    /// Reads the variables `endpoint` needs from the process environment, failing fast with
    /// the name of a missing one.
    pub fn from_env(endpoint: Endpoint) -> Result<Self, ConfigError> {
        Self::from_lookup(endpoint, |name| std::env::var(name).ok())
    }

    /// The same from any source of variables: the local stack resolves each function's
    /// `Environment` from template.yaml and passes it here.
    pub fn from_lookup(
        endpoint: Endpoint,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let var = |name: &'static str, needed: bool| {
            needed
                .then(|| lookup(name).ok_or(ConfigError::Missing(name)))
                .transpose()
        };
        let limited = endpoint.needs_write_limit();
        let whole = |name: &'static str| {
            var(name, limited)?
                .map(|value| {
                    likes_core::config::ConfigError::in_range(name, value)
                        .map(|n| n as u32)
                        .map_err(ConfigError::Variable)
                })
                .transpose()
        };
        let write_limit = match (
            var("RATE_LIMITS_TABLE", limited)?,
            whole("WRITE_RATE_PER_SECOND")?,
            whole("WRITE_BURST")?,
        ) {
            (Some(table), Some(rate), Some(burst)) => Some((
                table,
                WriteLimit::new(rate, burst).map_err(ConfigError::WriteLimit)?,
            )),
            _ => None,
        };
        Ok(Self {
            reactions_table: var("REACTIONS_TABLE", endpoint.needs_reactions())?,
            counts_table: var("COUNTS_TABLE", endpoint.needs_counts())?,
            erasures_table: var("ERASURES_TABLE", endpoint.needs_erasures())?,
            cursor_secret: var("CURSOR_SECRET_ARN", endpoint.needs_cursor_secret())?,
            write_limit,
            leaderboard_table: var("LEADERBOARD_TABLE", endpoint == Endpoint::GetLeaderboard)?,
            likers_table: var("LIKERS_TABLE", endpoint == Endpoint::ListLikers)?,
            moderation_table: var("MODERATION_TABLE", endpoint.needs_moderation())?,
            suspensions_table: var("RATE_LIMITS_TABLE", endpoint.needs_suspensions())?,
            removals: endpoint.needs_removals(),
            privacy_table: var("PRIVACY_TABLE", endpoint.needs_privacy())?,
            catalog_table: var("CATALOG_TABLE", endpoint.needs_catalog())?,
        })
    }
}

/// The handlers' shared state: AWS clients built once, reused by warm invocations.
#[derive(Debug, Clone)]
pub struct App {
    reactions: Option<ReactionsStore>,
    /// Count reads go through the container's cache: warm invocations share it.
    counts: Option<CachedCounts>,
    erasures: Option<ErasuresStore>,
    cursor_secret: Option<CursorSecret>,
    rate_limits: Option<RateLimitsStore>,
    leaderboard: Option<LeaderboardStore>,
    likers: Option<LikersStore>,
    moderation: Option<ModerationStore>,
    removed: Option<RemovedItems>,
    privacy: Option<PrivacyStore>,
    /// Its own endpoints write and read the catalog's rows directly; count reads, dislikes
    /// and the board read them through the container's cache.
    catalog: Option<CatalogCache>,
}

/// A store of `App`, or the 500 that says which variable its function was deployed without.
fn configured<'a, T>(store: &'a Option<T>, variable: &'static str) -> Result<&'a T, ApiError> {
    store.as_ref().ok_or(ApiError::Config(variable))
}

impl App {
    pub fn new(config: Config, sdk: &SdkConfig) -> Self {
        Self::with_clients(
            config,
            aws_sdk_dynamodb::Client::new(sdk),
            aws_sdk_secretsmanager::Client::new(sdk),
        )
    }

    /// The same over given clients (a bench counts the requests the DynamoDB one sends).
    pub fn with_clients(
        config: Config,
        dynamodb: aws_sdk_dynamodb::Client,
        secrets: aws_sdk_secretsmanager::Client,
    ) -> Self {
        Self {
            reactions: config
                .reactions_table
                .map(|table| ReactionsStore::new(dynamodb.clone(), table)),
            rate_limits: config
                .write_limit
                .map(|(table, limit)| RateLimitsStore::new(dynamodb.clone(), table, limit)),
            erasures: config
                .erasures_table
                .map(|table| ErasuresStore::new(dynamodb.clone(), table)),
            leaderboard: config
                .leaderboard_table
                .map(|table| LeaderboardStore::new(dynamodb.clone(), table)),
            likers: config
                .likers_table
                .map(|table| LikersStore::new(dynamodb.clone(), table)),
            removed: config
                .moderation_table
                .as_ref()
                .filter(|_| config.removals)
                .map(|table| RemovedItems::new(ModerationStore::new(dynamodb.clone(), table))),
            moderation: config.moderation_table.map(|table| {
                let store = ModerationStore::new(dynamodb.clone(), table);
                match config.suspensions_table {
                    Some(rate_limits) => store.with_suspensions(rate_limits),
                    None => store,
                }
            }),
            privacy: config
                .privacy_table
                .map(|table| PrivacyStore::new(dynamodb.clone(), table)),
            catalog: config
                .catalog_table
                .map(|table| CatalogCache::new(CatalogStore::new(dynamodb.clone(), table))),
            counts: config
                .counts_table
                .map(|table| CachedCounts::new(CountsStore::new(dynamodb, table))),
            cursor_secret: config
                .cursor_secret
                .map(|secret| CursorSecret::new(secrets, secret)),
        }
    }

    fn reactions(&self) -> Result<&ReactionsStore, ApiError> {
        configured(&self.reactions, "REACTIONS_TABLE")
    }

    fn counts(&self) -> Result<&CachedCounts, ApiError> {
        configured(&self.counts, "COUNTS_TABLE")
    }

    fn erasures(&self) -> Result<&ErasuresStore, ApiError> {
        configured(&self.erasures, "ERASURES_TABLE")
    }

    fn rate_limits(&self) -> Result<&RateLimitsStore, ApiError> {
        configured(&self.rate_limits, "RATE_LIMITS_TABLE")
    }

    fn leaderboard(&self) -> Result<&LeaderboardStore, ApiError> {
        configured(&self.leaderboard, "LEADERBOARD_TABLE")
    }

    fn likers(&self) -> Result<&LikersStore, ApiError> {
        configured(&self.likers, "LIKERS_TABLE")
    }

    /// 410 when a moderator removed `item` (as this container read it at most a second
    /// ago; a removal is answered only after that).
    async fn refuse_removed(&self, item: &ItemId) -> Result<(), ApiError> {
        // Not through `configured`: the IAM test reads the removal mark's table from
        // `self.removed`, the field its method call is made on.
        let removed = self
            .removed
            .as_ref()
            .ok_or(ApiError::Config("MODERATION_TABLE"))?;
        if removed
            .is_removed(item, likes_core::clock::now_ms())
            .await?
        {
            return Err(ApiError::ItemRemoved);
        }
        Ok(())
    }

    fn moderation(&self) -> Result<&ModerationStore, ApiError> {
        configured(&self.moderation, "MODERATION_TABLE")
    }

    fn privacy(&self) -> Result<&PrivacyStore, ApiError> {
        configured(&self.privacy, "PRIVACY_TABLE")
    }

    fn catalog(&self) -> Result<&CatalogStore, ApiError> {
        self.catalog_cache().map(CatalogCache::store)
    }

    fn catalog_cache(&self) -> Result<&CatalogCache, ApiError> {
        configured(&self.catalog, "CATALOG_TABLE")
    }

    fn cursor_secret(&self) -> Result<&CursorSecret, ApiError> {
        configured(&self.cursor_secret, "CURSOR_SECRET_ARN")
    }

    /// Serves one request of `endpoint`; every error becomes its problem+json response here.
    /// An answer is private unless its endpoint gave it a shared cache policy: only the
    /// counts and the leaderboard are the same for every caller, and errors never are.
    pub async fn handle(&self, endpoint: Endpoint, request: Request) -> Response<Body> {
        let result = match endpoint {
            Endpoint::PutReaction => reactions::put_reaction(self, request).await,
            Endpoint::PutLike => reactions::put_like(self, request).await,
            Endpoint::DeleteLike => reactions::delete_like(self, request).await,
            Endpoint::GetReaction => reactions::get_reaction(self, request).await,
            Endpoint::ListLikedItems => reactions::list_liked_items(self, request).await,
            Endpoint::GetLikeCount => counts::get_like_count(self, request).await,
            Endpoint::BatchGetLikeCounts => counts::batch_get_like_counts(self, request).await,
            Endpoint::BatchGetItems => counts::batch_get_items(self, request).await,
            Endpoint::EraseReactions => erasure::erase_reactions(self, request).await,
            Endpoint::GetErasure => erasure::get_erasure(self, request).await,
            Endpoint::GetLeaderboard => leaderboard::get_leaderboard(self, request).await,
            Endpoint::ListLikers => likers::list_likers(self, request).await,
            Endpoint::RetractUser => moderation::retract_user(self, request).await,
            Endpoint::GetRetraction => moderation::get_retraction(self, request).await,
            Endpoint::LiftSuspension => moderation::lift_suspension(self, request).await,
            Endpoint::RemoveItem => moderation::remove_item(self, request).await,
            Endpoint::GetSettings => privacy::get_settings(self, request).await,
            Endpoint::PutSettings => privacy::put_settings(self, request).await,
            Endpoint::PutBlock => privacy::put_block(self, request).await,
            Endpoint::DeleteBlock => privacy::delete_block(self, request).await,
            Endpoint::ListBlocks => privacy::list_blocks(self, request).await,
            Endpoint::GetNamespace => catalog::get_namespace(self, request).await,
            Endpoint::PutNamespace => catalog::put_namespace(self, request).await,
            Endpoint::PutItemOwner => catalog::put_item_owner(self, request).await,
            Endpoint::GetItemOwner => catalog::get_item_owner(self, request).await,
            Endpoint::GetItemSettings => catalog::get_item_settings(self, request).await,
            Endpoint::PutItemSettings => catalog::put_item_settings(self, request).await,
            Endpoint::GetItemStats => catalog::get_item_stats(self, request).await,
        };
        let mut response = result.unwrap_or_else(ApiError::into_response);
        response
            .headers_mut()
            .entry(CACHE_CONTROL)
            .or_insert(HeaderValue::from_static(edge::PRIVATE));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: Endpoint, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_lookup(endpoint, |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn every_write_endpoint_needs_its_write_limit_and_reads_do_not() {
        let full = [
            ("CATALOG_TABLE", "n"),
            ("MODERATION_TABLE", "m"),
            ("REACTIONS_TABLE", "r"),
            ("RATE_LIMITS_TABLE", "l"),
            ("WRITE_RATE_PER_SECOND", "5"),
            ("WRITE_BURST", "30"),
        ];
        for endpoint in [
            Endpoint::PutReaction,
            Endpoint::PutLike,
            Endpoint::DeleteLike,
        ] {
            let (table, limit) = config(endpoint, &full).unwrap().write_limit.unwrap();
            assert_eq!(table, "l");
            assert_eq!((limit.rate_per_second(), limit.burst()), (5, 30));
            let missing = config(endpoint, &full[..5]).unwrap_err();
            assert_eq!(
                missing.to_string(),
                "environment variable WRITE_BURST is required"
            );
        }
        for (rate, burst, wrong) in [
            ("5", "many", "WRITE_BURST"),
            ("0", "30", "WRITE_RATE_PER_SECOND"),
            ("1000001", "30", "WRITE_RATE_PER_SECOND"),
            ("5", "1000001", "WRITE_BURST"),
        ] {
            let bad = config(
                Endpoint::PutLike,
                &[
                    ("MODERATION_TABLE", "m"),
                    ("REACTIONS_TABLE", "r"),
                    ("RATE_LIMITS_TABLE", "l"),
                    ("WRITE_RATE_PER_SECOND", rate),
                    ("WRITE_BURST", burst),
                ],
            );
            assert!(
                matches!(
                    bad,
                    Err(ConfigError::Variable(likes_core::config::ConfigError::Range { name, .. }))
                        if name == wrong
                ),
                "{rate} {burst}: {bad:?}"
            );
        }
        let read = config(Endpoint::GetReaction, &[("REACTIONS_TABLE", "r")]).unwrap();
        assert!(read.write_limit.is_none());
    }

    #[test]
    fn an_items_writes_and_own_reads_refuse_it_once_removed_and_other_reads_do_not_look() {
        for endpoint in [
            Endpoint::PutReaction,
            Endpoint::GetLikeCount,
            Endpoint::ListLikers,
        ] {
            let config = config(
                endpoint,
                &[
                    ("MODERATION_TABLE", "m"),
                    ("REACTIONS_TABLE", "r"),
                    ("RATE_LIMITS_TABLE", "l"),
                    ("WRITE_RATE_PER_SECOND", "5"),
                    ("WRITE_BURST", "30"),
                    ("COUNTS_TABLE", "c"),
                    ("LIKERS_TABLE", "k"),
                    ("PRIVACY_TABLE", "p"),
                    ("CATALOG_TABLE", "n"),
                    (
                        "CURSOR_SECRET_ARN",
                        "arn:aws:secretsmanager:us-east-1:123456789012:secret:c",
                    ),
                ],
            )
            .unwrap();
            assert!(config.removals, "{endpoint:?}");
            assert_eq!(config.moderation_table.as_deref(), Some("m"));
        }
        for endpoint in [Endpoint::GetReaction, Endpoint::BatchGetLikeCounts] {
            let tables = [
                ("REACTIONS_TABLE", "r"),
                ("COUNTS_TABLE", "c"),
                ("CATALOG_TABLE", "n"),
            ];
            let config = config(endpoint, &tables);
            let config = config.unwrap();
            assert!(!config.removals && config.moderation_table.is_none());
        }
    }

    #[test]
    fn the_public_count_reads_and_a_reaction_write_read_the_catalog_and_its_routes_only_it() {
        // Every other variable these read, so only the catalog's can be missing.
        let others = [
            ("MODERATION_TABLE", "m"),
            ("REACTIONS_TABLE", "r"),
            ("RATE_LIMITS_TABLE", "l"),
            ("WRITE_RATE_PER_SECOND", "5"),
            ("WRITE_BURST", "30"),
            ("COUNTS_TABLE", "c"),
            ("LEADERBOARD_TABLE", "b"),
        ];
        for endpoint in [
            Endpoint::PutReaction,
            Endpoint::GetLikeCount,
            Endpoint::BatchGetLikeCounts,
            Endpoint::BatchGetItems,
            Endpoint::GetLeaderboard,
        ] {
            let missing = config(endpoint, &others).unwrap_err().to_string();
            assert_eq!(
                missing, "environment variable CATALOG_TABLE is required",
                "{endpoint:?}"
            );
            let mut all = others.to_vec();
            all.push(("CATALOG_TABLE", "n"));
            let config = config(endpoint, &all).unwrap();
            assert_eq!(config.catalog_table.as_deref(), Some("n"), "{endpoint:?}");
        }
        for endpoint in [
            Endpoint::GetNamespace,
            Endpoint::PutNamespace,
            Endpoint::PutItemOwner,
            Endpoint::GetItemOwner,
            Endpoint::GetItemSettings,
            Endpoint::PutItemSettings,
        ] {
            let only = config(endpoint, &[("CATALOG_TABLE", "n")]).unwrap();
            assert_eq!(only.catalog_table.as_deref(), Some("n"));
            assert!(only.reactions_table.is_none() && only.counts_table.is_none());
        }
        assert_eq!(
            config(Endpoint::GetItemStats, &[("CATALOG_TABLE", "n")])
                .unwrap_err()
                .to_string(),
            "environment variable COUNTS_TABLE is required"
        );
        assert_eq!(
            config(
                Endpoint::GetLikeCount,
                &[("MODERATION_TABLE", "m"), ("COUNTS_TABLE", "c")]
            )
            .unwrap_err()
            .to_string(),
            "environment variable CATALOG_TABLE is required"
        );
    }

    #[test]
    fn the_privacy_endpoints_and_the_likers_list_need_the_privacy_table() {
        for endpoint in [
            Endpoint::GetSettings,
            Endpoint::PutSettings,
            Endpoint::PutBlock,
            Endpoint::DeleteBlock,
        ] {
            let only = config(endpoint, &[("PRIVACY_TABLE", "p")]).unwrap();
            assert_eq!(only.privacy_table.as_deref(), Some("p"));
            assert!(only.reactions_table.is_none() && only.cursor_secret.is_none());
        }
        let key = (
            "CURSOR_SECRET_ARN",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:c",
        );
        let blocks = config(Endpoint::ListBlocks, &[("PRIVACY_TABLE", "p"), key]).unwrap();
        assert!(blocks.cursor_secret.is_some());
        assert_eq!(
            config(
                Endpoint::ListLikers,
                &[("LIKERS_TABLE", "l"), ("MODERATION_TABLE", "m"), key]
            )
            .unwrap_err()
            .to_string(),
            "environment variable COUNTS_TABLE is required"
        );
        assert_eq!(
            config(
                Endpoint::ListLikers,
                &[
                    ("LIKERS_TABLE", "l"),
                    ("MODERATION_TABLE", "m"),
                    ("COUNTS_TABLE", "c"),
                    key
                ]
            )
            .unwrap_err()
            .to_string(),
            "environment variable PRIVACY_TABLE is required"
        );
    }

    #[test]
    fn the_erasure_endpoints_need_only_the_erasures_table() {
        for endpoint in [Endpoint::EraseReactions, Endpoint::GetErasure] {
            let only = config(endpoint, &[("ERASURES_TABLE", "e")]).unwrap();
            assert_eq!(only.erasures_table.as_deref(), Some("e"));
            assert!(only.reactions_table.is_none() && only.write_limit.is_none());
            assert_eq!(
                config(endpoint, &[]).unwrap_err().to_string(),
                "environment variable ERASURES_TABLE is required"
            );
        }
    }
}
