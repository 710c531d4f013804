//! Reads `template.yaml`: the one description of the service's resources, routes and function
//! environments, for the cloud (SAM) and the local stack alike.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use crate::cors::Cors;

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("template.yaml is not valid YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("template.yaml: {0}")]
    Shape(String),
}

/// The template of this checkout (`LIKES_TEMPLATE` overrides the path).
pub fn default_path() -> PathBuf {
    std::env::var_os("LIKES_TEMPLATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join("template.yaml"))
}

#[derive(Debug, Clone)]
pub struct Template {
    root: Value,
    /// Parameter values set over the defaults, as `sam deploy --parameter-overrides` does.
    parameters: BTreeMap<String, String>,
}

/// One `Type: HttpApi` event of a function: a route of the HTTP API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRoute {
    pub method: String,
    pub path: String,
    /// The function's logical id.
    pub function: String,
    /// The function's `Handler`: what the one bootstrap serves (`functions/src/lib.rs`).
    pub handler: String,
    /// The authorizer API Gateway runs before the function: the event's `Auth.Authorizer`,
    /// else its API's `DefaultAuthorizer`. `None` on a public route (`Authorizer: NONE`, or
    /// an API without a default), where any token, or none, is let through unchecked.
    pub authorizer: Option<String>,
}

/// The WebSocket API of the template (`AWS::ApiGatewayV2::Api`, protocol WEBSOCKET), its
/// stage and routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredWebSocketApi {
    pub api: String,
    /// The stage's logical id and `StageName`.
    pub stage: String,
    pub stage_name: String,
    /// `RouteSelectionExpression`: `$request.body.<member>` is what the local front reads.
    pub route_selection: String,
    pub routes: Vec<WebSocketRoute>,
}

/// One `AWS::ApiGatewayV2::Route` and the function its integration invokes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSocketRoute {
    pub route_key: String,
    /// The function's logical id.
    pub function: String,
    pub handler: String,
    /// A route response is declared: the function's answer body goes back to the client.
    pub responds: bool,
}

impl Template {
    pub fn load(path: &Path) -> Result<Self, TemplateError> {
        let text = std::fs::read_to_string(path).map_err(|source| TemplateError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let root: Value = serde_yaml::from_str(text)?;
        if !root.get("Resources").is_some_and(Value::is_mapping) {
            return Err(TemplateError::Shape("no Resources section".into()));
        }
        Ok(Self {
            root,
            parameters: BTreeMap::new(),
        })
    }

    /// The template deployed with these parameter values over the defaults.
    pub fn with_parameters(mut self, parameters: BTreeMap<String, String>) -> Self {
        self.parameters = parameters;
        self
    }

    /// Logical id → resource, for every resource of `resource_type` the template creates
    /// with its parameters (a resource whose `Condition` is false is not created).
    pub fn resources_of(&self, resource_type: &str) -> BTreeMap<String, &Value> {
        self.root["Resources"]
            .as_mapping()
            .into_iter()
            .flatten()
            .filter(|(_, r)| r["Type"].as_str() == Some(resource_type))
            .filter(|(_, r)| {
                r["Condition"]
                    .as_str()
                    .is_none_or(|c| self.condition(c) == Some(true))
            })
            .filter_map(|(id, r)| Some((id.as_str()?.to_owned(), r)))
            .collect()
    }

    /// A condition of the `Conditions` section, evaluated against the parameters:
    /// `!Equals`, `!Not`, `!And`, `!Or` and `{Condition: name}`; `None` when it uses
    /// anything else.
    pub fn condition(&self, name: &str) -> Option<bool> {
        self.evaluate(&self.root["Conditions"][name])
    }

    /// The branch an `!If [condition, then, otherwise]`'s arguments choose; `None` when the
    /// arguments are not that or the condition cannot be evaluated.
    pub fn branch<'v>(&self, arguments: &'v Value) -> Option<&'v Value> {
        let [condition, then, otherwise] = arguments.as_sequence()?.as_slice() else {
            return None;
        };
        Some(if self.condition(condition.as_str()?)? {
            then
        } else {
            otherwise
        })
    }

    /// `value` with every `!If` in it replaced by the branch it chooses, as CloudFormation
    /// resolves a resource's properties (an `!If` it cannot evaluate is left as it is).
    pub fn chosen(&self, value: &Value) -> Value {
        if let Some((function, arguments)) = intrinsic(value) {
            if let Some(branch) = (function == "If").then(|| self.branch(arguments)).flatten() {
                return self.chosen(branch);
            }
        }
        match value {
            Value::Mapping(map) => Value::Mapping(
                map.iter()
                    .map(|(key, value)| (key.clone(), self.chosen(value)))
                    .collect(),
            ),
            Value::Sequence(items) => {
                Value::Sequence(items.iter().map(|item| self.chosen(item)).collect())
            }
            other => other.clone(),
        }
    }

    fn evaluate(&self, condition: &Value) -> Option<bool> {
        let (function, arguments) = intrinsic(condition)?;
        let all = |values: &Value| -> Option<Vec<bool>> {
            values
                .as_sequence()?
                .iter()
                .map(|c| self.evaluate(c))
                .collect()
        };
        match function.as_str() {
            "Equals" => {
                let [a, b] = arguments.as_sequence()?.as_slice() else {
                    return None;
                };
                Some(self.scalar(a)? == self.scalar(b)?)
            }
            "Not" => Some(!*all(arguments)?.first()?),
            "And" => Some(all(arguments)?.iter().all(|c| *c)),
            "Or" => Some(all(arguments)?.iter().any(|c| *c)),
            "Condition" => self.condition(arguments.as_str()?),
            _ => None,
        }
    }

    /// A literal, or `!Ref` of a parameter, as a condition compares it.
    fn scalar(&self, value: &Value) -> Option<String> {
        match ref_target(value) {
            Some(parameter) => self.parameter(parameter),
            None => match value {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => None,
            },
        }
    }

    pub fn resource(&self, logical_id: &str) -> Option<&Value> {
        self.root["Resources"].get(logical_id)
    }

    /// The HTTP API's routes, from the functions' `HttpApi` events.
    pub fn http_routes(&self) -> Result<Vec<HttpRoute>, TemplateError> {
        let mut routes = Vec::new();
        for (function, resource) in self.resources_of("AWS::Serverless::Function") {
            let Some(events) = resource["Properties"]["Events"].as_mapping() else {
                continue;
            };
            for event in events.values() {
                if event["Type"].as_str() != Some("HttpApi") {
                    continue;
                }
                let props = &event["Properties"];
                let (Some(method), Some(path)) = (props["Method"].as_str(), props["Path"].as_str())
                else {
                    return Err(TemplateError::Shape(format!(
                        "{function}: an HttpApi event needs Method and Path"
                    )));
                };
                routes.push(HttpRoute {
                    method: method.to_ascii_uppercase(),
                    path: path.to_owned(),
                    function: function.clone(),
                    handler: self.handler(&function)?,
                    authorizer: self.route_authorizer(props),
                });
            }
        }
        Ok(routes)
    }

    /// The HTTP API's `CorsConfiguration`, values resolved (a list may be a `!Ref` of a
    /// `CommaDelimitedList` parameter); `None` when the API declares no CORS.
    pub fn http_api_cors(&self) -> Result<Option<Cors>, TemplateError> {
        let apis = self.resources_of("AWS::Serverless::HttpApi");
        let Some(config) = apis
            .values()
            .map(|api| &api["Properties"]["CorsConfiguration"])
            .find(|c| !c.is_null())
        else {
            return Ok(None);
        };
        let list = |name: &str| -> Result<Vec<String>, TemplateError> {
            let value = &config[name];
            if let Some(parameter) = ref_target(value) {
                let text = self.parameter(parameter).unwrap_or_default();
                return Ok(text
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
                    .collect());
            }
            match value {
                Value::Null => Ok(Vec::new()),
                Value::Sequence(items) => items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned))
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        TemplateError::Shape(format!(
                            "CorsConfiguration.{name}: not a list of strings"
                        ))
                    }),
                _ => Err(TemplateError::Shape(format!(
                    "CorsConfiguration.{name}: not a list or a !Ref of one"
                ))),
            }
        };
        let max_age = match &config["MaxAge"] {
            Value::Null => None,
            value => Some(
                value
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        TemplateError::Shape("CorsConfiguration.MaxAge: not a whole number".into())
                    })?,
            ),
        };
        Ok(Some(Cors {
            allow_origins: list("AllowOrigins")?,
            allow_methods: list("AllowMethods")?,
            allow_headers: list("AllowHeaders")?,
            expose_headers: list("ExposeHeaders")?,
            max_age,
            allow_credentials: config["AllowCredentials"].as_bool().unwrap_or(false),
        }))
    }

    /// The template's WebSocket APIs with their routes: each route's `Target`
    /// (`integrations/${Integration}`) names an integration whose `IntegrationUri` holds
    /// `${Function.Arn}`.
    pub fn websocket_apis(&self) -> Result<Vec<DeclaredWebSocketApi>, TemplateError> {
        let shape = |message: String| TemplateError::Shape(message);
        let mut apis = Vec::new();
        for (api, resource) in self.resources_of("AWS::ApiGatewayV2::Api") {
            let props = &resource["Properties"];
            if props["ProtocolType"].as_str() != Some("WEBSOCKET") {
                continue;
            }
            let of_api = |r: &&Value| ref_target(&r["Properties"]["ApiId"]) == Some(api.as_str());
            let (stage, stage_name) = self
                .resources_of("AWS::ApiGatewayV2::Stage")
                .into_iter()
                .find(|(_, r)| of_api(r))
                .and_then(|(id, r)| Some((id, r["Properties"]["StageName"].as_str()?.to_owned())))
                .ok_or_else(|| shape(format!("{api}: no stage with a StageName")))?;
            let responses = self.resources_of("AWS::ApiGatewayV2::RouteResponse");
            let mut routes = Vec::new();
            for (route, r) in self.resources_of("AWS::ApiGatewayV2::Route") {
                if !of_api(&r) {
                    continue;
                }
                let props = &r["Properties"];
                let route_key = props["RouteKey"]
                    .as_str()
                    .ok_or_else(|| shape(format!("{route}: no RouteKey")))?;
                let integration = sub_reference(&props["Target"], "integrations/")
                    .ok_or_else(|| shape(format!("{route}: Target is not integrations/${{…}}")))?;
                let uri = self
                    .resource(&integration)
                    .map(|i| &i["Properties"]["IntegrationUri"])
                    .and_then(sub_text)
                    .ok_or_else(|| shape(format!("{integration}: no IntegrationUri")))?;
                let function = uri
                    .split("${")
                    .filter_map(|part| part.split_once(".Arn}"))
                    .map(|(id, _)| id.to_owned())
                    .next()
                    .ok_or_else(|| {
                        shape(format!("{integration}: IntegrationUri names no function"))
                    })?;
                routes.push(WebSocketRoute {
                    route_key: route_key.to_owned(),
                    handler: self.handler(&function)?,
                    function,
                    responds: responses
                        .values()
                        .any(|rr| ref_target(&rr["Properties"]["RouteId"]) == Some(route.as_str())),
                });
            }
            apis.push(DeclaredWebSocketApi {
                route_selection: props["RouteSelectionExpression"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                api,
                stage,
                stage_name,
                routes,
            });
        }
        Ok(apis)
    }

    /// SAM's rule for an `HttpApi` event: its own `Auth.Authorizer` wins (`NONE` makes the
    /// route public), else the `DefaultAuthorizer` of the API its `ApiId` names.
    fn route_authorizer(&self, props: &Value) -> Option<String> {
        let named = match props["Auth"]["Authorizer"].as_str() {
            Some("NONE") => return None,
            Some(name) => Some(name),
            None => ref_target(&props["ApiId"])
                .and_then(|api| self.resource(api))
                .and_then(|api| api["Properties"]["Auth"]["DefaultAuthorizer"].as_str()),
        };
        named.map(str::to_owned)
    }

    /// A function's `Handler`: which function the one bootstrap serves in it.
    pub fn handler(&self, function: &str) -> Result<String, TemplateError> {
        self.resource(function)
            .and_then(|r| r["Properties"]["Handler"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| TemplateError::Shape(format!("{function}: no Handler")))
    }

    /// A function's environment variables (Globals merged under its own), values unresolved.
    pub fn environment(&self, function: &str) -> BTreeMap<String, Value> {
        let globals = &self.root["Globals"]["Function"]["Environment"]["Variables"];
        let own = self
            .resource(function)
            .map(|r| &r["Properties"]["Environment"]["Variables"]);
        [Some(globals), own]
            .into_iter()
            .flatten()
            .filter_map(Value::as_mapping)
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.clone())))
            .collect()
    }

    /// A function property as SAM resolves it: the function's own, else `Globals.Function`'s.
    pub fn function_property(&self, function: &str, property: &str) -> Option<&Value> {
        self.resource(function)
            .and_then(|r| r["Properties"].get(property))
            .or_else(|| self.root["Globals"]["Function"].get(property))
    }

    /// A parameter's value: the one it was deployed with, else its default.
    pub fn parameter(&self, name: &str) -> Option<String> {
        if let Some(value) = self.parameters.get(name) {
            return Some(value.clone());
        }
        match &self.root["Parameters"][name]["Default"] {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// An intrinsic function's name (without `Fn::` or `!`) and its arguments, in the short
/// (`!Equals [...]`) or long (`{Fn::Equals: [...]}`) form; `{Condition: name}` too.
pub fn intrinsic(value: &Value) -> Option<(String, &Value)> {
    match value {
        Value::Tagged(tagged) => Some((
            tagged.tag.to_string().trim_start_matches('!').to_owned(),
            &tagged.value,
        )),
        Value::Mapping(map) if map.len() == 1 => {
            let (key, arguments) = map.iter().next()?;
            let key = key.as_str()?;
            Some((
                key.strip_prefix("Fn::").unwrap_or(key).to_owned(),
                arguments,
            ))
        }
        _ => None,
    }
}

/// The `!Ref` target of a value, if it is one (short `!Ref X` or long `{Ref: X}` form).
pub fn ref_target(value: &Value) -> Option<&str> {
    match value {
        Value::Tagged(tagged) if tagged.tag == "!Ref" => tagged.value.as_str(),
        Value::Mapping(map) if map.len() == 1 => map.get("Ref").and_then(Value::as_str),
        _ => None,
    }
}

/// The text of a `!Sub` (short form or `{Fn::Sub: text}`).
fn sub_text(value: &Value) -> Option<&str> {
    match intrinsic(value)? {
        (function, text) if function == "Sub" => text.as_str(),
        _ => None,
    }
}

/// `X` of a `!Sub '<prefix>${X}'`.
fn sub_reference(value: &Value, prefix: &str) -> Option<String> {
    let rest = sub_text(value)?.strip_prefix(prefix)?;
    let name = rest.strip_prefix("${")?.strip_suffix('}')?;
    Some(name.to_owned())
}

/// The `!GetAtt Resource.Attribute` of a value, if it is one.
pub fn get_att(value: &Value) -> Option<(String, String)> {
    let raw = match value {
        Value::Tagged(tagged) if tagged.tag == "!GetAtt" => tagged.value.clone(),
        Value::Mapping(map) if map.len() == 1 => map.get("Fn::GetAtt")?.clone(),
        _ => return None,
    };
    match raw {
        Value::String(s) => {
            let (resource, attribute) = s.split_once('.')?;
            Some((resource.to_owned(), attribute.to_owned()))
        }
        Value::Sequence(parts) if parts.len() == 2 => {
            Some((parts[0].as_str()?.to_owned(), parts[1].as_str()?.to_owned()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
Globals:
  Function:
    Timeout: 7
    Environment:
      Variables:
        SHARED: "1"
Parameters:
  CountShards: { Type: Number, Default: 16 }
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties: {}
  Api:
    Type: AWS::Serverless::HttpApi
    Properties:
      Auth: { DefaultAuthorizer: Jwt }
  Fn:
    Type: AWS::Serverless::Function
    Metadata:
      BuildMethod: rust-cargolambda
      BuildProperties: { Binary: likes }
    Properties:
      Handler: put-reaction
      Environment:
        Variables:
          REACTIONS_TABLE: !Ref Table
          ARN: !GetAtt Table.StreamArn
      Events:
        Put:
          Type: HttpApi
          Properties: { ApiId: !Ref Api, Path: "/v1/items/{item_id}/reaction", Method: put }
        Count:
          Type: HttpApi
          Properties:
            ApiId: !Ref Api
            Path: "/v1/items/{item_id}/like-count"
            Method: get
            Auth: { Authorizer: NONE }
        Stream:
          Type: DynamoDB
          Properties: { Stream: !GetAtt Table.StreamArn }
"#;

    #[test]
    fn routes_come_from_http_api_events_only_with_their_authorizer() {
        let template = Template::parse(SAMPLE).unwrap();
        let mut routes = template.http_routes().unwrap();
        routes.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(
            routes,
            vec![
                HttpRoute {
                    method: "GET".into(),
                    path: "/v1/items/{item_id}/like-count".into(),
                    function: "Fn".into(),
                    handler: "put-reaction".into(),
                    authorizer: None,
                },
                HttpRoute {
                    method: "PUT".into(),
                    path: "/v1/items/{item_id}/reaction".into(),
                    function: "Fn".into(),
                    handler: "put-reaction".into(),
                    authorizer: Some("Jwt".into()),
                },
            ]
        );
    }

    #[test]
    fn environments_merge_globals_and_keep_intrinsics() {
        let template = Template::parse(SAMPLE).unwrap();
        let env = template.environment("Fn");
        assert_eq!(env["SHARED"].as_str(), Some("1"));
        assert_eq!(ref_target(&env["REACTIONS_TABLE"]), Some("Table"));
        assert_eq!(
            get_att(&env["ARN"]),
            Some(("Table".to_owned(), "StreamArn".to_owned()))
        );
        assert_eq!(template.parameter("CountShards").as_deref(), Some("16"));
        assert_eq!(template.resources_of("AWS::DynamoDB::Table").len(), 1);
    }

    const CONDITIONAL: &str = r#"
Parameters:
  Engine: { Type: String, Default: function }
Conditions:
  InAthena: !Equals [!Ref Engine, athena]
  NotInAthena: !Not [!Condition InAthena]
  Long: {"Fn::Or": [{"Condition": InAthena}, {"Fn::Equals": ["a", "b"]}]}
Resources:
  Group:
    Type: AWS::Athena::WorkGroup
    Condition: InAthena
  Bucket:
    Type: AWS::S3::Bucket
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      PointInTimeRecoverySpecification:
        PointInTimeRecoveryEnabled: !If [InAthena, true, false]
      Tags: [{Key: engine, Value: {"Fn::If": [NotInAthena, function, athena]}}]
"#;

    #[test]
    fn conditions_follow_the_parameters_and_decide_which_resources_exist() {
        let default = Template::parse(CONDITIONAL).unwrap();
        assert_eq!(default.condition("InAthena"), Some(false));
        assert_eq!(default.condition("NotInAthena"), Some(true));
        assert_eq!(default.condition("Long"), Some(false));
        assert!(default.resources_of("AWS::Athena::WorkGroup").is_empty());
        assert_eq!(default.resources_of("AWS::S3::Bucket").len(), 1);

        let athena = Template::parse(CONDITIONAL)
            .unwrap()
            .with_parameters(BTreeMap::from([("Engine".into(), "athena".into())]));
        assert_eq!(athena.parameter("Engine").as_deref(), Some("athena"));
        assert_eq!(athena.condition("InAthena"), Some(true));
        assert_eq!(athena.condition("Long"), Some(true));
        assert_eq!(athena.resources_of("AWS::Athena::WorkGroup").len(), 1);
        assert_eq!(athena.condition("Missing"), None);
    }

    #[test]
    fn a_resources_properties_take_the_branch_each_if_chooses() {
        let chosen = |template: &Template| {
            let table = template.resources_of("AWS::DynamoDB::Table")["Table"];
            let properties = template.chosen(&table["Properties"]);
            (
                properties["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"]
                    .as_bool(),
                properties["Tags"][0]["Value"].as_str().map(str::to_owned),
            )
        };
        let default = Template::parse(CONDITIONAL).unwrap();
        assert_eq!(chosen(&default), (Some(false), Some("function".into())));
        let athena = default.with_parameters(BTreeMap::from([("Engine".into(), "athena".into())]));
        assert_eq!(chosen(&athena), (Some(true), Some("athena".into())));
    }

    const SOCKETS: &str = r#"
Resources:
  Live:
    Type: AWS::ApiGatewayV2::Api
    Properties: { ProtocolType: WEBSOCKET, RouteSelectionExpression: $request.body.action }
  Http:
    Type: AWS::ApiGatewayV2::Api
    Properties: { ProtocolType: HTTP }
  Stage:
    Type: AWS::ApiGatewayV2::Stage
    Properties: { ApiId: !Ref Live, StageName: live }
  ConnectRoute:
    Type: AWS::ApiGatewayV2::Route
    Properties: { ApiId: !Ref Live, RouteKey: $connect, Target: !Sub "integrations/${ConnectIntegration}" }
  DefaultRoute:
    Type: AWS::ApiGatewayV2::Route
    Properties: { ApiId: !Ref Live, RouteKey: $default, Target: !Sub "integrations/${MessageIntegration}" }
  DefaultResponse:
    Type: AWS::ApiGatewayV2::RouteResponse
    Properties: { ApiId: !Ref Live, RouteId: !Ref DefaultRoute, RouteResponseKey: $default }
  ConnectIntegration:
    Type: AWS::ApiGatewayV2::Integration
    Properties:
      IntegrationUri: !Sub "arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${ConnectFn.Arn}/invocations"
  MessageIntegration:
    Type: AWS::ApiGatewayV2::Integration
    Properties:
      IntegrationUri: !Sub "arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/${MessageFn.Arn}/invocations"
  ConnectFn:
    Type: AWS::Serverless::Function
    Properties: { Handler: live-connect }
  MessageFn:
    Type: AWS::Serverless::Function
    Properties: { Handler: live-message }
"#;

    #[test]
    fn websocket_routes_come_from_routes_integrations_and_route_responses() {
        let apis = Template::parse(SOCKETS).unwrap().websocket_apis().unwrap();
        assert_eq!(apis.len(), 1, "the HTTP API is not a WebSocket API");
        let api = &apis[0];
        assert_eq!(
            (
                api.api.as_str(),
                api.stage.as_str(),
                api.stage_name.as_str()
            ),
            ("Live", "Stage", "live")
        );
        assert_eq!(api.route_selection, "$request.body.action");
        let mut routes = api.routes.clone();
        routes.sort_by(|a, b| a.route_key.cmp(&b.route_key));
        assert_eq!(
            routes,
            vec![
                WebSocketRoute {
                    route_key: "$connect".into(),
                    function: "ConnectFn".into(),
                    handler: "live-connect".into(),
                    responds: false,
                },
                WebSocketRoute {
                    route_key: "$default".into(),
                    function: "MessageFn".into(),
                    handler: "live-message".into(),
                    responds: true,
                },
            ]
        );
    }

    /// The one bootstrap serves exactly the functions template.yaml declares: each
    /// function's `Handler` is in the registry (`functions/src/lib.rs`), and every entry there
    /// is a function of the template.
    #[test]
    fn every_functions_handler_is_in_the_registry_and_nothing_else_is() {
        let template = Template::load(&default_path()).unwrap();
        let declared: std::collections::BTreeSet<String> = template
            .resources_of("AWS::Serverless::Function")
            .into_keys()
            .map(|id| template.handler(&id).unwrap())
            .collect();
        let registered: std::collections::BTreeSet<String> = likes_functions::FUNCTIONS
            .iter()
            .map(|function| function.handler.to_owned())
            .collect();
        assert_eq!(declared, registered);
    }

    #[test]
    fn a_template_without_resources_is_refused() {
        assert!(Template::parse("Parameters: {}").is_err());
    }

    /// Every default the README and `docs/` quote as `` `NAME` (value) ``, `` `NAME` (default
    /// value) `` or `` `NAME` defaults to value `` is the template's: a parameter's `Default`,
    /// or the value a function's environment sets (through a parameter or literally). Values
    /// in seconds may be quoted in minutes or hours.
    #[test]
    fn every_default_the_docs_quote_is_the_templates() {
        let template = Template::load(&default_path()).unwrap();
        let mut defaults: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let number = |value: &Value| match value {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        };
        if let Some(parameters) = template.root["Parameters"].as_mapping() {
            for (name, declared) in parameters {
                if let (Some(name), Some(value)) = (name.as_str(), number(&declared["Default"])) {
                    defaults.entry(name.to_owned()).or_default().push(value);
                }
            }
        }
        for function in template.resources_of("AWS::Serverless::Function").keys() {
            for (name, value) in template.environment(function) {
                let value = match ref_target(&value) {
                    Some(parameter) => number(&template.root["Parameters"][parameter]["Default"]),
                    None => number(&value),
                };
                if let Some(value) = value {
                    defaults.entry(name).or_default().push(value);
                }
            }
        }
        let mut checked = 0;
        let mut wrong = Vec::new();
        for page in &doc_pages() {
            let text = std::fs::read_to_string(page).unwrap();
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            for (name, values) in &defaults {
                let quoted = format!("`{name}`");
                for (at, _) in text.match_indices(&quoted) {
                    let rest = &text[at + quoted.len()..];
                    let Some(said) = quoted_default(name, rest) else {
                        continue;
                    };
                    checked += 1;
                    if !values.contains(&said) {
                        wrong.push(format!(
                            "{}: `{name}` quoted as {said}, the template says {values:?}",
                            page.display()
                        ));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
        assert!(checked >= 8, "only {checked} quoted defaults found");
    }

    /// The README and every page under docs/.
    fn doc_pages() -> Vec<PathBuf> {
        let root = default_path().parent().expect("the repository").to_owned();
        let mut pages = vec![root.join("README.md")];
        for entry in std::fs::read_dir(root.join("docs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
        pages.sort();
        pages
    }

    /// Each thing is said on one page: no run of twelve words of prose (code blocks and
    /// code spans left out) is on two pages; a page links to the other instead.
    #[test]
    fn no_page_repeats_another() {
        const RUN: usize = 12;
        let mut said: BTreeMap<String, PathBuf> = BTreeMap::new();
        let mut repeats = Vec::new();
        for page in doc_pages() {
            let text = std::fs::read_to_string(&page).unwrap();
            let prose: String = text
                .split("```")
                .step_by(2)
                .flat_map(|outside| outside.split('`').step_by(2))
                .collect::<Vec<_>>()
                .join(" ");
            let words: Vec<String> = prose
                .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-'))
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect();
            let mut own = std::collections::BTreeSet::new();
            for run in words.windows(RUN) {
                let run = run.join(" ");
                match said.get(&run) {
                    Some(other) if *other != page => repeats.push(format!(
                        "{} repeats {}: {run}",
                        page.display(),
                        other.display()
                    )),
                    Some(_) => {}
                    None => {
                        own.insert(run);
                    }
                }
            }
            said.extend(own.into_iter().map(|run| (run, page.clone())));
        }
        assert!(repeats.is_empty(), "{repeats:#?}");
    }

    /// The default quoted right after `` `name` `` (`rest`), in the name's own unit.
    fn quoted_default(name: &str, rest: &str) -> Option<f64> {
        let said = rest
            .strip_prefix(" (default ")
            .or_else(|| rest.strip_prefix(" ("))
            .or_else(|| rest.strip_prefix(" defaults to "))?;
        let digits: String = said
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
            .filter(|c| *c != ',')
            .collect();
        let value: f64 = digits.trim_end_matches('.').parse().ok()?;
        let unit = said[said.find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))?..]
            .trim_start()
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("");
        let in_seconds = name.to_ascii_lowercase().ends_with("seconds");
        Some(match unit {
            "min" | "minutes" if in_seconds => value * 60.0,
            "h" | "hours" if in_seconds => value * 3600.0,
            _ => value,
        })
    }

    /// Every whole-number variable a function reads is set from a parameter whose range is
    /// exactly the one the code accepts, or from a literal inside it; and every range the
    /// code states is set somewhere.
    #[test]
    fn every_parameter_range_is_the_range_the_code_accepts() {
        use likes_core::config::{max_of, WHOLE_VARIABLES};
        let template = Template::load(&default_path()).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        let functions = template.resources_of("AWS::Serverless::Function");
        assert!(!functions.is_empty());
        for function in functions.keys() {
            for (name, value) in template.environment(function) {
                let Some(max) = max_of(&name) else { continue };
                seen.insert(name.clone());
                match ref_target(&value) {
                    Some(parameter) => {
                        let declared = &template.root["Parameters"][parameter];
                        let bound = |key: &str| declared[key].as_u64();
                        assert_eq!(
                            (bound("MinValue"), bound("MaxValue")),
                            (Some(1), Some(max as u64)),
                            "{function} {name}: parameter {parameter}'s range is not 1..={max}"
                        );
                    }
                    None => {
                        let literal = match &value {
                            Value::Number(n) => n.as_u64(),
                            Value::String(s) => s.parse().ok(),
                            _ => None,
                        };
                        assert!(
                            literal.is_some_and(|n| (1..=max as u64).contains(&n)),
                            "{function} {name}: {value:?} is outside 1..={max}"
                        );
                    }
                }
            }
        }
        let unset: Vec<_> = WHOLE_VARIABLES
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| !seen.contains(*name))
            .collect();
        assert!(unset.is_empty(), "no function sets {unset:?}");
    }
}
