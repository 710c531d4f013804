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
  ReadRate: { Type: Number, Default: 20 }
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties: {}
  Api:
    Type: AWS::Serverless::HttpApi
    Properties:
      Auth: { DefaultAuthorizer: Jwt }
      DefaultRouteSettings: { ThrottlingRateLimit: 1000, ThrottlingBurstLimit: 500 }
      RouteSettings:
        GET /v1/items/{item_id}/like-count:
          ThrottlingRateLimit: !Ref ReadRate
          ThrottlingBurstLimit: 10
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
        Moderate:
          Type: HttpApi
          Properties:
            ApiId: !Ref Api
            Path: "/v1/moderation/users/{user_id}/retractions"
            Method: post
            Auth: { AuthorizationScopes: [likes/moderate] }
        Stream:
          Type: DynamoDB
          Properties: { Stream: !GetAtt Table.StreamArn }
"#;

#[test]
fn routes_come_from_http_api_events_only_with_their_authorizer_scopes_and_throttle() {
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
                scopes: vec![],
                throttle: Some(Throttle {
                    rate_per_second: 20,
                    burst: 10
                }),
            },
            HttpRoute {
                method: "PUT".into(),
                path: "/v1/items/{item_id}/reaction".into(),
                function: "Fn".into(),
                handler: "put-reaction".into(),
                authorizer: Some("Jwt".into()),
                scopes: vec![],
                throttle: Some(Throttle {
                    rate_per_second: 1000,
                    burst: 500
                }),
            },
            HttpRoute {
                method: "POST".into(),
                path: "/v1/moderation/users/{user_id}/retractions".into(),
                function: "Fn".into(),
                handler: "put-reaction".into(),
                authorizer: Some("Jwt".into()),
                scopes: vec!["likes/moderate".into()],
                throttle: Some(Throttle {
                    rate_per_second: 1000,
                    burst: 500
                }),
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
            properties["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"].as_bool(),
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
    Properties:
      ApiId: !Ref Live
      StageName: live
      DefaultRouteSettings: { ThrottlingRateLimit: 500, ThrottlingBurstLimit: 200 }
      RouteSettings:
        $connect: { ThrottlingRateLimit: 5, ThrottlingBurstLimit: 2 }
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
      IntegrationUri: !Sub "arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/${MessageFnAliaslive}/invocations"
  ConnectFn:
    Type: AWS::Serverless::Function
    Properties: { Handler: live-connect }
  MessageFn:
    Type: AWS::Serverless::Function
    Properties: { Handler: live-message, AutoPublishAlias: live }
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
                throttle: Some(Throttle {
                    rate_per_second: 5,
                    burst: 2
                }),
            },
            WebSocketRoute {
                route_key: "$default".into(),
                function: "MessageFn".into(),
                handler: "live-message".into(),
                responds: true,
                throttle: Some(Throttle {
                    rate_per_second: 500,
                    burst: 200
                }),
            },
        ]
    );
}

#[test]
fn a_template_without_resources_is_refused() {
    assert!(Template::parse("Parameters: {}").is_err());
}
