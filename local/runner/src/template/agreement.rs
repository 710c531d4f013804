//! What the code and the docs say agrees with the template: every function's `Handler` is
//! in the registry, every variable's range is its parameter's, and every default the docs
//! quote is the template's (and no page repeats another).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_yaml::Value;

use super::*;

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
