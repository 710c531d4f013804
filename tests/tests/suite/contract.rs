//! The API document (`openapi.yaml`) against the service: it declares exactly the template's
//! routes, and the local front answers every request schemathesis makes from it as the
//! document says.

use std::collections::BTreeSet;

use likes_local::template::Template;
use likes_tests::stack::Schedules;
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

/// schemathesis generates requests from openapi.yaml (valid and invalid ones, with and
/// without the token) and checks every answer: no 5xx, documented statuses, bodies, content
/// types and headers, refusals of invalid data and of missing auth. The one check left out,
/// `unsupported_method`, wants 405 for an undeclared method; API Gateway answers those 404
/// before any function runs, and the local front answers as AWS does.
#[tokio::test]
async fn the_local_front_answers_as_openapi_yaml_says() {
    let root = likes_local::repo_root();
    let schemathesis = root.join(".venv/bin/schemathesis");
    assert!(
        schemathesis.exists(),
        "{} is missing: `make .venv` installs the project's pinned tools",
        schemathesis.display()
    );
    // The pulse runs, so `as_of` is a time and not only null. Every request comes from one
    // user, hundreds a second: under the template's write limit (5/s, bursts of 30) most
    // writes would meet the documented 429 and the generated cases would never reach the
    // write itself. This stack is deployed with a limit no run reaches, a configuration
    // like any other; the limit's own answers are tested in http_reactions.rs.
    let stack = TestStack::start_with_parameters(
        Schedules::All,
        &[("WriteRatePerSecond", "100000"), ("WriteBurst", "100000")],
    )
    .await;
    let token = stack.token("contract-user");
    let examples = likes_tests::env_count("LIKES_CONTRACT_EXAMPLES", MAX_EXAMPLES).to_string();
    let seed = std::env::var("LIKES_CONTRACT_SEED").unwrap_or_else(|_| SEED.to_owned());
    let output = tokio::process::Command::new(&schemathesis)
        .current_dir(&root)
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
