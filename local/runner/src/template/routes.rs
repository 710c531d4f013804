//! The routes the template declares: the HTTP API's (from its functions' `HttpApi` events),
//! its CORS configuration, and the WebSocket APIs' routes.

use serde_yaml::Value;

use super::{ref_target, sub_reference, sub_text, Template, TemplateError};
use crate::cors::Cors;

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
    /// The event's `Auth.AuthorizationScopes`: a token must hold one of them in its `scope`
    /// claim, else API Gateway answers 403. Empty: any valid token.
    pub scopes: Vec<String>,
    /// The API's throttle for the route: its `RouteSettings` entry, else its
    /// `DefaultRouteSettings`; `None` when neither sets one.
    pub throttle: Option<Throttle>,
}

/// A route's throttle, as API Gateway keeps it: a token bucket of `burst` requests refilled
/// at `rate_per_second`; a request past it is answered 429.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    pub rate_per_second: u32,
    pub burst: u32,
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
    /// The stage's throttle for the route (its `RouteSettings` entry, else its
    /// `DefaultRouteSettings`).
    pub throttle: Option<Throttle>,
}

impl Template {
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
                let method = method.to_ascii_uppercase();
                let throttle = self.route_throttle(&format!("{method} {path}"));
                routes.push(HttpRoute {
                    method,
                    path: path.to_owned(),
                    function: function.clone(),
                    handler: self.handler(&function)?,
                    authorizer: self.route_authorizer(props),
                    scopes: authorization_scopes(&function, props)?,
                    throttle,
                });
            }
        }
        Ok(routes)
    }

    /// The throttle of the route `key` (`METHOD /path`): the HTTP API's `RouteSettings`
    /// entry for it, else its `DefaultRouteSettings`.
    fn route_throttle(&self, key: &str) -> Option<Throttle> {
        let apis = self.resources_of("AWS::Serverless::HttpApi");
        self.throttle_of(&apis.values().next()?["Properties"], key)
    }

    /// The throttle `properties` (an HTTP API's or a stage's) set for route `key`: its
    /// `RouteSettings` entry, else its `DefaultRouteSettings`, values resolved (a `!Ref` of
    /// a parameter).
    fn throttle_of(&self, properties: &Value, key: &str) -> Option<Throttle> {
        let number = |value: &Value| -> Option<u32> {
            match ref_target(value) {
                Some(parameter) => self.parameter(parameter)?.parse().ok(),
                None => value.as_u64().and_then(|n| u32::try_from(n).ok()),
            }
        };
        let settings = [
            &properties["RouteSettings"][key],
            &properties["DefaultRouteSettings"],
        ];
        settings.into_iter().find_map(|settings| {
            Some(Throttle {
                rate_per_second: number(&settings["ThrottlingRateLimit"])?,
                burst: number(&settings["ThrottlingBurstLimit"])?,
            })
        })
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

    /// The function a `${...}` reference in an integration's URI invokes: `Function.Arn`, or
    /// the alias SAM publishes for it (`<Function>Alias<name>`, with `AutoPublishAlias`).
    fn invoked_function(&self, reference: &str) -> Option<String> {
        if let Some(function) = reference.strip_suffix(".Arn") {
            return Some(function.to_owned());
        }
        self.resources_of("AWS::Serverless::Function")
            .into_keys()
            .find(|function| {
                self.function_property(function, "AutoPublishAlias")
                    .and_then(Value::as_str)
                    .is_some_and(|alias| reference == format!("{function}Alias{alias}"))
            })
    }

    /// The template's WebSocket APIs with their routes: each route's `Target`
    /// (`integrations/${Integration}`) names an integration whose `IntegrationUri` holds
    /// `${Function.Arn}`, or its alias's `${<Function>Alias<name>}`.
    pub fn websocket_apis(&self) -> Result<Vec<DeclaredWebSocketApi>, TemplateError> {
        let shape = |message: String| TemplateError::Shape(message);
        let mut apis = Vec::new();
        for (api, resource) in self.resources_of("AWS::ApiGatewayV2::Api") {
            let props = &resource["Properties"];
            if props["ProtocolType"].as_str() != Some("WEBSOCKET") {
                continue;
            }
            let of_api = |r: &&Value| ref_target(&r["Properties"]["ApiId"]) == Some(api.as_str());
            let (stage, stage_name, stage_properties) = self
                .resources_of("AWS::ApiGatewayV2::Stage")
                .into_iter()
                .find(|(_, r)| of_api(r))
                .and_then(|(id, r)| {
                    let name = r["Properties"]["StageName"].as_str()?.to_owned();
                    Some((id, name, r["Properties"].clone()))
                })
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
                    .filter_map(|part| part.split_once('}'))
                    .find_map(|(name, _)| self.invoked_function(name))
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
                    throttle: self.throttle_of(&stage_properties, route_key),
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
}

/// An `HttpApi` event's `Auth.AuthorizationScopes`, a list of strings when present.
fn authorization_scopes(function: &str, props: &Value) -> Result<Vec<String>, TemplateError> {
    match &props["Auth"]["AuthorizationScopes"] {
        Value::Null => Ok(Vec::new()),
        Value::Sequence(scopes) => scopes
            .iter()
            .map(|scope| scope.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                TemplateError::Shape(format!(
                    "{function}: Auth.AuthorizationScopes is not a list of strings"
                ))
            }),
        _ => Err(TemplateError::Shape(format!(
            "{function}: Auth.AuthorizationScopes is not a list"
        ))),
    }
}
