//! The API document (`openapi.yaml`) against the service: it declares exactly the template's
//! routes, and the local front answers every request schemathesis makes from it as the
//! document says.

use std::collections::BTreeSet;

use likes_core::moderation::MODERATE_SCOPE;
use likes_core::namespace::{ADMIN_SCOPE, ITEMS_SCOPE};
use likes_local::template::Template;
use likes_tests::TestStack;

/// Generated requests per operation and phase: enough to reach every documented answer,
/// bounded so the run takes a minute or two here (`LIKES_CONTRACT_EXAMPLES` changes it).
const MAX_EXAMPLES: usize = 100;
/// A fixed seed, so a failure found once is found again (`LIKES_CONTRACT_SEED` changes it).
const SEED: &str = "20261201";

fn document() -> serde_yaml::Value {
    let path = likes_local::repo_root().join("openapi.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("openapi.yaml: {e}"))
}

#[test]
fn openapi_yaml_declares_exactly_the_templates_routes() {
    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "patch", "head", "options", "trace",
    ];
    let document = document();
    let paths = document["paths"]
        .as_mapping()
        .expect("openapi.yaml has paths");
    let mut documented = BTreeSet::new();
    for (path, item) in paths {
        let path = path.as_str().expect("paths are strings");
        for (key, _) in item.as_mapping().expect("a path item is a mapping") {
            let key = key.as_str().expect("path item keys are strings");
            if METHODS.contains(&key) {
                documented.insert((key.to_ascii_uppercase(), path.to_owned()));
            }
        }
    }
    let template = Template::load(&likes_local::template::default_path()).expect("template");
    let declared: BTreeSet<(String, String)> = template
        .http_routes()
        .expect("HttpApi routes")
        .into_iter()
        .map(|route| (route.method, route.path))
        .collect();
    assert!(
        !declared.is_empty(),
        "template.yaml declares HttpApi routes"
    );
    let undocumented: Vec<_> = declared.difference(&documented).collect();
    let not_routed: Vec<_> = documented.difference(&declared).collect();
    assert!(
        undocumented.is_empty() && not_routed.is_empty(),
        "routes in template.yaml but not in openapi.yaml: {undocumented:?}; \
         in openapi.yaml but not in template.yaml: {not_routed:?}"
    );
}

/// The CORS configuration openapi.yaml states is the template's (with `AllowedOrigins` at its
/// default), and it lets a page send every request header the document declares and read
/// every response header it declares, but for those a browser always shows a page
/// (CORS-safelisted) and API Gateway's own `WWW-Authenticate` (a page needs only the 401).
#[test]
fn openapi_yaml_states_the_templates_cors_and_it_covers_every_documented_header() {
    let template = Template::load(&likes_local::template::default_path()).expect("template");
    let cors = template
        .http_api_cors()
        .expect("CorsConfiguration")
        .expect("the HTTP API declares CORS");
    let stated = &document()["x-amazon-apigateway-cors"];
    let list = |name: &str| -> Vec<String> {
        stated[name]
            .as_sequence()
            .unwrap_or_else(|| panic!("x-amazon-apigateway-cors.{name} is a list"))
            .iter()
            .map(|v| v.as_str().expect("a string").to_owned())
            .collect()
    };
    assert_eq!(list("allowOrigins"), cors.allow_origins);
    assert_eq!(list("allowMethods"), cors.allow_methods);
    assert_eq!(list("allowHeaders"), cors.allow_headers);
    assert_eq!(list("exposeHeaders"), cors.expose_headers);
    assert_eq!(stated["maxAge"].as_u64(), cors.max_age.map(u64::from));
    assert_eq!(
        stated["allowCredentials"].as_bool(),
        Some(cors.allow_credentials)
    );
    assert!(
        !(cors.allow_credentials && cors.allow_origins.iter().any(|o| o == "*")),
        "`*` with credentials lets every site act as the user"
    );

    // Request headers: the declared header parameters, the token and the JSON bodies' type.
    let document = document();
    let mut named = BTreeSet::new();
    // Not `components.headers`: its keys are the shared definitions' own names.
    for part in [
        &document["paths"],
        &document["components"]["parameters"],
        &document["components"]["responses"],
    ] {
        collect_headers(part, &mut named);
    }
    let mut sent = named.clone();
    sent.retain(|(place, _)| place == "parameter");
    let mut sent: BTreeSet<String> = sent.into_iter().map(|(_, name)| name).collect();
    sent.extend(["authorization".to_owned(), "content-type".to_owned()]);
    let unsendable: Vec<_> = sent
        .iter()
        .filter(|h| !cors.allow_headers.contains(h))
        .collect();
    assert!(unsendable.is_empty(), "not in AllowHeaders: {unsendable:?}");
    // Response headers: every `headers:` entry of an answer.
    let read: BTreeSet<String> = named
        .into_iter()
        .filter(|(place, _)| place == "answer")
        .map(|(_, name)| name)
        .collect();
    const SHOWN_ANYWAY: [&str; 2] = ["cache-control", "www-authenticate"];
    let unreadable: Vec<_> = read
        .iter()
        .filter(|h| !SHOWN_ANYWAY.contains(&h.as_str()) && !cors.expose_headers.contains(h))
        .collect();
    assert!(
        !read.is_empty() && unreadable.is_empty(),
        "not in ExposeHeaders: {unreadable:?}"
    );
}

/// Every header the document names, lower-cased: `("parameter", name)` for a parameter
/// `in: header`, `("answer", name)` for a key of an answer's `headers:`.
fn collect_headers(value: &serde_yaml::Value, into: &mut BTreeSet<(String, String)>) {
    match value {
        serde_yaml::Value::Mapping(map) => {
            if value["in"].as_str() == Some("header") {
                if let Some(name) = value["name"].as_str() {
                    into.insert(("parameter".into(), name.to_ascii_lowercase()));
                }
            }
            for (key, child) in map {
                if key.as_str() == Some("headers") {
                    for name in child.as_mapping().into_iter().flat_map(|h| h.keys()) {
                        if let Some(name) = name.as_str() {
                            into.insert(("answer".into(), name.to_ascii_lowercase()));
                        }
                    }
                }
                collect_headers(child, into);
            }
        }
        serde_yaml::Value::Sequence(items) => {
            for item in items {
                collect_headers(item, into);
            }
        }
        _ => {}
    }
}

/// schemathesis generates requests from openapi.yaml (valid and invalid ones, with and
/// without the token) and checks every answer: no 5xx, documented statuses, bodies, content
/// types and headers, refusals of invalid data and of missing auth. The one check left out,
/// `unsupported_method`, wants 405 for an undeclared method; API Gateway answers those 404
/// before any function runs, and the local front answers as AWS does.
#[tokio::test]
async fn the_local_front_answers_as_openapi_yaml_says() {
    let schemathesis = likes_tests::venv_tool("schemathesis");
    // The pulse runs, so `as_of` is a time and not only null. Every request comes from one
    // user, hundreds a second: under the template's write limit (5/s, bursts of 30) most
    // writes would meet the documented 429 and the generated cases would never reach the
    // write itself. This stack is deployed with a limit no run reaches, a configuration
    // like any other; the limit's own answers are tested in http_limits.rs.
    let stack = TestStack::builder()
        .scheduled()
        .parameters(&[("WriteRatePerSecond", "100000"), ("WriteBurst", "100000")])
        .start()
        .await;
    // A token of every scope (a moderator's, a platform admin's, a platform service's), so
    // the scoped routes answer past API Gateway's scope check too (their 403 to a token
    // without the scope is tested in http_moderation.rs and http_catalog.rs).
    let token = stack.scoped_token(
        "contract-user",
        &[MODERATE_SCOPE, ADMIN_SCOPE, ITEMS_SCOPE].join(" "),
    );
    let examples = likes_tests::env_count("LIKES_CONTRACT_EXAMPLES", MAX_EXAMPLES).to_string();
    let seed = std::env::var("LIKES_CONTRACT_SEED").unwrap_or_else(|_| SEED.to_owned());
    let output = tokio::process::Command::new(&schemathesis)
        .current_dir(likes_local::repo_root())
        // Hypothesis keeps its caches here rather than in the checkout.
        .env(
            "HYPOTHESIS_STORAGE_DIRECTORY",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/hypothesis"),
        )
        .args([
            "--config-file",
            "tests/contract/schemathesis.toml",
            "--no-color",
        ])
        .args(["run", "openapi.yaml", "--url", &stack.stack.http_url()])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "all", "--exclude-checks", "unsupported_method"])
        .args(["--max-examples", &examples, "--seed", &seed])
        .args(["--workers", "1", "--generation-database", "none"])
        // As long as API Gateway waits for an integration (30 s): the suite shares one
        // emulator, and a slow answer is not a contract's business.
        .args(["--request-timeout", "30"])
        .output()
        .await
        .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "schemathesis found answers that differ from openapi.yaml ({}); see its report above",
        output.status
    );
}
