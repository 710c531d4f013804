//! What a route's function receives and answers: API Gateway's WebSocket proxy event, and
//! the invocation as the Lambda runtime makes it.

use std::collections::HashMap;

use aws_lambda_events::apigw::{
    ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest,
    ApiGatewayWebsocketProxyRequestContext,
};
use aws_lambda_events::encodings::Body;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use lambda_runtime::Context;
use likes_core::clock::{now_ms, rfc3339};

use super::{Caller, SocketTarget, WebSocketApi};
use crate::lambda::InvokeError;

impl WebSocketApi {
    /// API Gateway's WebSocket proxy event. Headers and query parameters come with
    /// `$connect` only, a body with messages only.
    pub(super) fn event(
        &self,
        event_type: &str,
        route_key: &str,
        connection_id: &str,
        connected_at_ms: i64,
        caller: Option<&Caller>,
        body: Option<String>,
    ) -> ApiGatewayWebsocketProxyRequest {
        let now = now_ms();
        let mut context = ApiGatewayWebsocketProxyRequestContext::default();
        context.account_id = Some(crate::resources::LOCAL_ACCOUNT.to_owned());
        context.apiid = Some(self.api_id.clone());
        context.stage = Some(self.stage.clone());
        context.route_key = Some(route_key.to_owned());
        context.event_type = Some(event_type.to_owned());
        context.connection_id = Some(connection_id.to_owned());
        context.connected_at = connected_at_ms;
        context.request_time_epoch = now;
        context.request_time = Some(rfc3339(now));
        context.request_id = Some(uuid::Uuid::new_v4().to_string());
        context.extended_request_id = context.request_id.clone();
        context.message_direction = Some("IN".to_owned());
        if event_type == "MESSAGE" {
            context.message_id =
                Some(URL_SAFE_NO_PAD.encode(&uuid::Uuid::new_v4().as_bytes()[..9]));
        }
        let mut request = ApiGatewayWebsocketProxyRequest::default();
        if let Some(caller) = caller {
            context.domain_name = Some(caller.domain.clone());
            context.identity.source_ip = Some(caller.source_ip.clone());
            context.identity.user_agent = Some(caller.user_agent.clone());
            request.headers = caller.headers.clone();
            request.multi_value_headers = caller.headers.clone();
            let mut query: HashMap<String, Vec<String>> = HashMap::new();
            for (name, value) in &caller.query {
                query.entry(name.clone()).or_default().push(value.clone());
            }
            request.query_string_parameters = query.clone().into();
            request.multi_value_query_string_parameters = query.into();
        }
        request.request_context = context;
        request.body = body;
        request
    }
}

/// Invokes the route's function exactly as the Lambda runtime does.
pub(super) async fn invoke(
    target: &SocketTarget,
    event: ApiGatewayWebsocketProxyRequest,
) -> Result<ApiGatewayProxyResponse, InvokeError> {
    crate::lambda::invoke(&*target.function, &event, Context::default()).await
}

pub(super) fn text_body(body: Body) -> Option<String> {
    match body {
        Body::Text(text) => Some(text),
        Body::Binary(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        _ => None,
    }
}
