//! The whole local service: AWS endpoint (the emulator, or `AWS_ENDPOINT_URL`), resources
//! from the template, the HTTP front serving the template's routes, and the event source
//! mappings polling the template's streams.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use aws_config::SdkConfig;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::aws::{local_clients, AwsTarget, LOCAL_REGION};
use crate::emulator::EmulatorError;
use crate::event_source_mapping::{MappingConfig, MappingError, Pipeline};
use crate::http_api::{HttpApi, RouteTarget};
use crate::jwt::{JwtAuthorizer, LOCAL_AUDIENCE, LOCAL_ISSUER, LOCAL_JWKS_PATH};
use crate::resources::{self, ResourceError, Resources};
use crate::scheduler::{Schedule, ScheduleError};
use crate::template::{self, Template, TemplateError};
use crate::web::WebOrigin;
use crate::websocket_api::{SocketTarget, WebSocketApi};

/// The documented local default for secrets the template generates in AWS (the cursor
/// signing key). `LIKES_LOCAL_CURSOR_KEY` overrides it.
pub const DEFAULT_LOCAL_CURSOR_KEY: &str = "local-dev-cursor-signing-key";
/// Board shards of the local leaderboard (`LeaderboardShards`; AWS's default is the
/// template's): more than one, so ranking merges shards, and few, so a refresh stays cheap
/// on the emulator.
const LOCAL_BOARD_SHARDS: &str = "4";

#[derive(Debug, thiserror::Error)]
pub enum StackError {
    #[error(transparent)]
    Emulator(#[from] EmulatorError),
    #[error(transparent)]
    Simulator(#[from] likes_simulator::SimulatorError),
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error(transparent)]
    Resource(#[from] ResourceError),
    #[error(transparent)]
    Mapping(#[from] MappingError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("LIKES_STREAM_SHARDS={0:?} is not a whole number of at least 1")]
    StreamShards(String),
    #[error("function {function}: {message}")]
    Function { function: String, message: String },
    #[error("template.yaml declares {0} WebSocket APIs; the local stack serves one")]
    WebSocketApis(usize),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

pub struct StackOptions {
    /// Resources are named `<prefix>-<LogicalId>`.
    pub prefix: String,
    pub http_addr: SocketAddr,
    /// Where the WebSocket API is served (its management API too).
    pub ws_addr: SocketAddr,
    /// Where the reference web client (`web/`) is served: an origin of its own, which the
    /// HTTP API's CORS allows unless `AllowedOrigins` is among `parameters`.
    pub web_addr: SocketAddr,
    /// Environment variables set over the template's values, for every function that
    /// declares them (tests use it to cut smaller chunks); empty runs the template as is.
    pub environment_overrides: BTreeMap<String, String>,
    /// Which of the template's schedules to fire (the pulse that publishes `as_of` and writes
    /// probes, scheduled reconciliation). Tests of the count pipeline alone fire none, so the
    /// stream holds only what they wrote.
    pub schedules: Schedules,
    /// Properties set over every DynamoDB-stream mapping's (a test trying an option the
    /// template does not declare yet); empty runs the template as is.
    pub mapping_overrides: BTreeMap<String, serde_yaml::Value>,
    /// Virtual shards per stream shard (see [`stream_shards_from_env`]).
    pub stream_shards: usize,
    /// Template parameters set over their defaults, as `sam deploy --parameter-overrides`
    /// sets them; empty deploys the defaults.
    pub parameters: BTreeMap<String, String>,
}

/// The template's `ScheduleV2` events a stack fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedules {
    None,
    All,
    /// Only these functions' (logical ids).
    Only(Vec<String>),
}

impl Schedules {
    fn fires(&self, function: &str) -> bool {
        match self {
            Self::None => false,
            Self::All => true,
            Self::Only(functions) => functions.iter().any(|f| f == function),
        }
    }
}

/// Virtual shards per stream shard when `LIKES_STREAM_SHARDS` is not set: several, so every
/// run meets AWS's topology (records of different keys in flight at once, out of order
/// with each other).
pub const DEFAULT_STREAM_SHARDS: usize = 4;

/// `LIKES_STREAM_SHARDS` (at least 1), or [`DEFAULT_STREAM_SHARDS`].
pub fn stream_shards_from_env() -> Result<usize, StackError> {
    match std::env::var("LIKES_STREAM_SHARDS") {
        Err(_) => Ok(DEFAULT_STREAM_SHARDS),
        Ok(value) => value
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or(StackError::StreamShards(value)),
    }
}

pub struct Stack {
    pub aws: AwsTarget,
    pub template: Template,
    pub resources: Resources,
    pub http_addr: SocketAddr,
    pub ws_addr: SocketAddr,
    pub web_addr: SocketAddr,
    /// The local token issuer (its keys rotate through it), which the HTTP front's
    /// authorizer and the web origin's sign-in share.
    pub issuer: JwtAuthorizer,
    /// The WebSocket front, when the template declares a WebSocket API.
    websocket_api: Option<Arc<WebSocketApi>>,
    tasks: Vec<JoinHandle<()>>,
    /// One per `Type: DynamoDB` function event; dropping them stops their pollers.
    pipelines: Vec<Pipeline>,
    environment_overrides: BTreeMap<String, String>,
}

impl Stack {
    /// Creates the template's resources, serves its HTTP API and polls its streams.
    pub async fn start(aws: AwsTarget, options: StackOptions) -> Result<Self, StackError> {
        let web_listener = listen(options.web_addr).await?;
        let web_addr = local_addr(&web_listener, options.web_addr)?;
        let template =
            Template::load(&template::default_path())?.with_parameters(local_parameters(
                options.parameters.clone(),
                &format!("http://{web_addr}"),
                aws.serves_athena(),
            ));
        let secrets: BTreeMap<String, String> = template
            .resources_of("AWS::SecretsManager::Secret")
            .into_keys()
            .map(|id| (id, local_cursor_key()))
            .collect();
        let mut resources = resources::create(&template, &aws, &options.prefix, secrets).await?;
        // The issuer's keys, where the template names them, are the web origin's.
        resources.local_endpoints.insert(
            format!("{LOCAL_ISSUER}{LOCAL_JWKS_PATH}"),
            format!("http://{web_addr}{LOCAL_JWKS_PATH}"),
        );
        let ws_listener = listen(options.ws_addr).await?;
        let ws_addr = local_addr(&ws_listener, options.ws_addr)?;
        let websocket_api = websocket_api(
            &template,
            &mut resources,
            &aws.sdk,
            &options.prefix,
            ws_addr,
            &options.environment_overrides,
        )?;
        let routes = template
            .http_routes()?
            .into_iter()
            .map(|route| {
                let function = build_function(
                    &template,
                    &resources,
                    &aws.sdk,
                    &route.function,
                    &route.handler,
                    &options.environment_overrides,
                )?;
                Ok(RouteTarget { route, function })
            })
            .collect::<Result<Vec<_>, StackError>>()?;
        let listener = listen(options.http_addr).await?;
        let http_addr = local_addr(&listener, options.http_addr)?;
        let pipelines = MappingConfig::all(
            &template,
            &resources,
            &options.prefix,
            &options.environment_overrides,
            &options.mapping_overrides,
        )?
        .into_iter()
        .map(|mapping| Pipeline::start(mapping, options.stream_shards, &aws.sdk))
        .collect::<Result<Vec<_>, _>>()?;
        // As the template's authorizer: tokens of its issuer for its audience.
        let issuer = JwtAuthorizer::from_env();
        let authorizer = issuer.clone().expecting(
            template.parameter("JwtIssuer").unwrap_or_default(),
            template.parameter("JwtAudience").unwrap_or_default(),
        );
        let front = Arc::new(HttpApi::new(routes, authorizer, template.http_api_cors()?));
        let web = Arc::new(WebOrigin::new(
            crate::repo_root().join("web"),
            &format!("http://{http_addr}"),
            &format!("ws://{ws_addr}"),
            issuer.clone(),
        ));
        let mut tasks = vec![
            tokio::spawn(front.serve(listener)),
            tokio::spawn(web.serve(web_listener)),
        ];
        let websocket_api = websocket_api.map(Arc::new);
        if let Some(websocket_api) = &websocket_api {
            tasks.push(tokio::spawn(websocket_api.clone().serve(ws_listener)));
        }
        for schedule in Schedule::all(&template, &resources, &options.environment_overrides)? {
            if options.schedules.fires(&schedule.function) {
                tasks.push(schedule.start(&aws.sdk, options.stream_shards)?);
            }
        }
        Ok(Self {
            aws,
            template,
            resources,
            http_addr,
            ws_addr,
            web_addr,
            issuer,
            websocket_api,
            tasks,
            pipelines,
            environment_overrides: options.environment_overrides,
        })
    }

    pub fn http_url(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// The reference web client's origin.
    pub fn web_url(&self) -> String {
        format!("http://{}", self.web_addr)
    }

    /// The WebSocket front (its fault switches), when the template declares a WebSocket API.
    pub fn websocket_api(&self) -> Option<&WebSocketApi> {
        self.websocket_api.as_deref()
    }

    /// The WebSocket API's URL, as a client connects to it.
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.ws_addr)
    }

    /// The event source mappings (one per `Type: DynamoDB` function event).
    pub fn pipelines(&self) -> &[Pipeline] {
        &self.pipelines
    }

    /// A function's environment as this stack resolved it (template values, overrides).
    pub fn function_environment(
        &self,
        function: &str,
    ) -> Result<BTreeMap<String, String>, StackError> {
        self.resources
            .function_environment(&self.template, function, &self.environment_overrides)
            .map_err(|message| StackError::Function {
                function: function.to_owned(),
                message,
            })
    }

    /// The template's function `logical_id` as the bootstrap builds it (its `Handler`, its
    /// environment resolved against the local resources), for a caller that hands it an
    /// event of its own.
    pub fn function(
        &self,
        logical_id: &str,
    ) -> Result<Box<dyn likes_functions::Invoke>, StackError> {
        let handler = self
            .template
            .handler(logical_id)
            .map_err(|err| StackError::Function {
                function: logical_id.to_owned(),
                message: err.to_string(),
            })?;
        build_function(
            &self.template,
            &self.resources,
            &self.aws.sdk,
            logical_id,
            &handler,
            &self.environment_overrides,
        )
    }

    /// The first mapping that invokes `function` (a logical id), if the template has one.
    pub fn pipeline(&self, function: &str) -> Option<&Pipeline> {
        self.pipelines
            .iter()
            .find(|p| p.config().function == function)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A function's handler state, configured from its `Environment` in the template, resolved
/// against the local resources: the same wiring CloudFormation does in AWS.
/// The function `function` of the template, built from the registry by its `Handler` with
/// its environment resolved against the local resources.
fn build_function(
    template: &Template,
    resources: &Resources,
    sdk: &SdkConfig,
    function: &str,
    handler: &str,
    overrides: &BTreeMap<String, String>,
) -> Result<Box<dyn likes_functions::Invoke>, StackError> {
    let failed = |message: String| StackError::Function {
        function: function.to_owned(),
        message,
    };
    let variables = resources
        .function_environment(template, function, overrides)
        .map_err(failed)?;
    likes_functions::build(
        handler,
        &|name| variables.get(name).cloned(),
        &local_clients(sdk, 1),
    )
    .map_err(|err| failed(err.to_string()))
}

async fn listen(addr: SocketAddr) -> Result<TcpListener, StackError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StackError::Listen { addr, source })
}

fn local_addr(listener: &TcpListener, asked: SocketAddr) -> Result<SocketAddr, StackError> {
    listener.local_addr().map_err(|source| StackError::Listen {
        addr: asked,
        source,
    })
}

/// The parameters the template is deployed with locally: the caller's, over the local
/// token issuer's (its issuer, audience and the address of its keys, which the live API's
/// `$connect` fetches as it fetches the real issuer's in AWS), over the web client's
/// origin as the one CORS allows, and over a few board shards: a leaderboard refresh
/// Queries every shard, and the emulator's Query reads its whole table each time.
pub(crate) fn local_parameters(
    mut parameters: BTreeMap<String, String>,
    web_origin: &str,
    serves_athena: bool,
) -> BTreeMap<String, String> {
    // Where no Athena answers (the simulator), the recount stays in the function: its work
    // group would have nothing to be created in.
    if !serves_athena {
        parameters
            .entry("RecountEngine".to_owned())
            .or_insert_with(|| "function".to_owned());
    }
    for (name, value) in [
        ("AllowedOrigins", web_origin.to_owned()),
        ("JwtIssuer", LOCAL_ISSUER.to_owned()),
        ("JwtAudience", LOCAL_AUDIENCE.to_owned()),
        ("JwtJwksUri", format!("{LOCAL_ISSUER}{LOCAL_JWKS_PATH}")),
        ("LeaderboardShards", LOCAL_BOARD_SHARDS.to_owned()),
    ] {
        parameters.entry(name.to_owned()).or_insert(value);
    }
    parameters
}

/// The template's WebSocket API on `ws_addr`: its `!Ref`s (the API id, the stage name) and
/// its management endpoint resolve to the local front, and each route's function is built
/// from its environment as the template declares it.
fn websocket_api(
    template: &Template,
    resources: &mut Resources,
    sdk: &SdkConfig,
    prefix: &str,
    ws_addr: SocketAddr,
    overrides: &BTreeMap<String, String>,
) -> Result<Option<WebSocketApi>, StackError> {
    let apis = template.websocket_apis()?;
    let api = match apis.as_slice() {
        [] => return Ok(None),
        [api] => api,
        more => return Err(StackError::WebSocketApis(more.len())),
    };
    let api_id = format!("{prefix}-{}", api.api).to_lowercase();
    resources.names.insert(api.api.clone(), api_id.clone());
    resources
        .names
        .insert(api.stage.clone(), api.stage_name.clone());
    resources.local_endpoints.insert(
        format!("https://{api_id}.execute-api.{LOCAL_REGION}.amazonaws.com"),
        format!("http://{ws_addr}"),
    );
    let targets = api
        .routes
        .iter()
        .map(|route| {
            Ok(SocketTarget {
                route_key: route.route_key.clone(),
                throttle: route.throttle,
                function: build_function(
                    template,
                    resources,
                    sdk,
                    &route.function,
                    &route.handler,
                    overrides,
                )?,
                responds: route.responds,
            })
        })
        .collect::<Result<Vec<_>, StackError>>()?;
    Ok(Some(WebSocketApi::new(api, api_id, targets)))
}

fn local_cursor_key() -> String {
    std::env::var("LIKES_LOCAL_CURSOR_KEY").unwrap_or_else(|_| DEFAULT_LOCAL_CURSOR_KEY.into())
}
