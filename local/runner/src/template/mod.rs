//! Reads `template.yaml`: the one description of the service's resources, routes and function
//! environments, for the cloud (SAM) and the local stack alike.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml::Value;

#[cfg(test)]
mod agreement;
#[cfg(test)]
mod deploy;
mod routes;
#[cfg(test)]
mod tests;

pub use routes::{DeclaredWebSocketApi, HttpRoute, Throttle, WebSocketRoute};

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
