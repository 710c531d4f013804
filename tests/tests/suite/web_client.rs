//! The reference web client (`web/`) in a real browser: headless Chromium, driven by
//! Playwright (`tests/browser/web_client.py`), against this test's stack. The page is served
//! from the stack's web origin and calls the HTTP and WebSocket APIs across origins.

use likes_tests::TestStack;

/// Debian's Chromium (`make test` installs the package); `LIKES_CHROMIUM` names another.
const CHROMIUM: &str = "/usr/bin/chromium";

#[tokio::test]
async fn the_web_client_works_in_a_real_browser() {
    let root = likes_local::repo_root();
    let python = likes_tests::venv_tool("python");
    let chromium = std::env::var("LIKES_CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_owned());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: `make test` installs it"
    );
    // The pulse publishes `as_of` and the refresher ranks the board; one write a second per
    // user, so two taps in a row meet the limit.
    let stack = TestStack::builder()
        .scheduled()
        .parameters(&[("WriteRatePerSecond", "1"), ("WriteBurst", "1")])
        .start()
        .await;
    let failures = concat!(env!("CARGO_TARGET_TMPDIR"), "/browser");
    let mut command = tokio::process::Command::new(&python);
    command
        .current_dir(&root)
        .env("LIKES_CHROMIUM", &chromium)
        .arg("tests/browser/web_client.py")
        .args(["--web", &stack.stack.web_url()])
        .args(["--api", &stack.stack.http_url()])
        .args(["--prefix", "t", "--failures", failures]);
    // `LIKES_WEB_SCREENSHOT=docs/web-client.png` renews the README's picture of the page.
    if let Ok(shot) = std::env::var("LIKES_WEB_SCREENSHOT") {
        command.args(["--page-shot", &shot]);
    }
    let output = command.output().await.expect("the browser test runs");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "the web client failed in the browser ({}); screenshots in {failures}",
        output.status
    );
}
