//! A function's configuration variables, read from any source (the process environment on
//! AWS, template.yaml's resolved `Environment` in the local stack).

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("{name} must be a whole number from 1 to {max}, not {value:?}")]
    Range {
        name: &'static str,
        max: usize,
        value: String,
    },
}

impl ConfigError {
    /// Variable `name` of `lookup`, required.
    pub fn var(
        lookup: impl Fn(&str) -> Option<String>,
        name: &'static str,
    ) -> Result<String, Self> {
        lookup(name).ok_or(Self::Missing(name))
    }

    /// Variable `name` of `lookup`: a whole number from 1 to `max`.
    pub fn whole(
        lookup: impl Fn(&str) -> Option<String>,
        name: &'static str,
        max: usize,
    ) -> Result<usize, Self> {
        let value = Self::var(lookup, name)?;
        value
            .parse()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or(Self::Range { name, max, value })
    }
}
