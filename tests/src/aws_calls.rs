//! Which DynamoDB and Kinesis calls each Lambda function's code makes, read from the Rust
//! sources of the handlers and the adapters they reach. A reading, not a compiler: it
//! follows `self.field.method(..)`, `binding.accessor()?.method(..)`, `Type::function(..)`
//! and bare calls to a module's own functions, typing receivers by struct fields, function
//! parameters, `let` bindings and accessors' return types, and it names the table of each
//! call by its builder's `.table_name(..)` (or `.request_items(..)`, `.stream_name(..)`).
//! A table argument that is an expression of the adapter (`self.table`) is named by
//! [`TABLE_FIELDS`]; one that is a parameter is followed to the caller's argument.
//! What it cannot name it reports, so a new shape of code fails the test that reads it
//! instead of passing unseen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The environment variable that names the table (or stream) an adapter's expression
/// holds: `(type, expression)` as the code writes it in `.table_name(..)` or passes it on.
pub const TABLE_FIELDS: &[(&str, &str, &str)] = &[
    ("ReactionsStore", "self.table", "REACTIONS_TABLE"),
    ("CountsStore", "self.table", "COUNTS_TABLE"),
    ("CountsWriter", "self.table", "COUNTS_TABLE"),
    ("ErasuresStore", "self.table", "ERASURES_TABLE"),
    ("RateLimitsStore", "self.table", "RATE_LIMITS_TABLE"),
    ("ModerationStore", "self.table", "MODERATION_TABLE"),
    (
        "ModerationStore",
        "self.rate_limits_table()",
        "RATE_LIMITS_TABLE",
    ),
    ("LeaderboardStore", "self.table", "LEADERBOARD_TABLE"),
    ("LikersStore", "self.table", "LIKERS_TABLE"),
    ("CatalogStore", "self.table", "CATALOG_TABLE"),
    ("PrivacyStore", "self.table", "PRIVACY_TABLE"),
    ("FreshnessStore", "self.counts_table", "COUNTS_TABLE"),
    ("PruningStore", "self.counts_table", "COUNTS_TABLE"),
    ("ReconciliationStore", "self.counts_table", "COUNTS_TABLE"),
    // The UpdateItem that `progress_update` built on the board's own table.
    (
        "LeaderboardStore",
        "update.table_name()",
        "LEADERBOARD_TABLE",
    ),
    ("LiveStore", "self.connections_table", "CONNECTIONS_TABLE"),
    (
        "LiveStore",
        "self.subscriptions_table",
        "SUBSCRIPTIONS_TABLE",
    ),
    ("PushClaims", "self.table", "PUSHES_TABLE"),
    ("EventPublisher", "self.stream", "EVENTS_STREAM"),
    ("LogShards", "self.stream_arn", "EVENTS_STREAM_ARN"),
    ("Pulse", "self.config.reactions_table", "REACTIONS_TABLE"),
];

/// One AWS call: its IAM action, and the environment variable naming its resource (with
/// the index a Query reads, if any).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    pub action: &'static str,
    pub resource: Resource,
    pub index: bool,
    /// Where it is: `Type::function`.
    pub site: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    /// The environment variable that names it.
    Variable(String),
    /// An expression this reading could not name.
    Unknown(String),
}

/// SDK builder calls and the IAM action each needs. A transaction's items need the action
/// of their kind (`dynamodb:TransactWriteItems` is no IAM action).
const OPERATIONS: &[(&str, &str)] = &[
    (".get_item()", "dynamodb:GetItem"),
    (".batch_get_item()", "dynamodb:BatchGetItem"),
    (".query()", "dynamodb:Query"),
    (".scan()", "dynamodb:Scan"),
    (".put_item()", "dynamodb:PutItem"),
    (".update_item()", "dynamodb:UpdateItem"),
    (".delete_item()", "dynamodb:DeleteItem"),
    (".batch_write_item()", "dynamodb:BatchWriteItem"),
    ("Put::builder()", "dynamodb:PutItem"),
    ("Update::builder()", "dynamodb:UpdateItem"),
    ("Delete::builder()", "dynamodb:DeleteItem"),
    ("ConditionCheck::builder()", "dynamodb:ConditionCheckItem"),
    (".put_record()", "kinesis:PutRecord"),
    (".put_records()", "kinesis:PutRecords"),
];

/// The builder setters that name an operation's resource.
const RESOURCE_SETTERS: &[&str] = &[
    ".table_name(",
    ".request_items(",
    ".stream_name(",
    ".stream_arn(",
];

#[derive(Debug, Clone)]
struct Function {
    module: String,
    owner: String,
    name: String,
    /// Parameter names and types, `self` excluded.
    params: Vec<(String, String)>,
    returns: String,
    body: String,
}

/// The functions and struct fields of a set of Rust sources.
#[derive(Debug, Default)]
pub struct Code {
    functions: BTreeMap<(String, String), Function>,
    fields: BTreeMap<(String, String), String>,
}

impl Code {
    /// Reads every `.rs` file under `roots` (their `#[cfg(test)] mod tests` left out).
    pub fn read(roots: &[PathBuf]) -> Self {
        let mut code = Self::default();
        for root in roots {
            for file in rust_files(root) {
                let text = std::fs::read_to_string(&file)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
                code.add(&module_name(&file), &text);
            }
        }
        code
    }

    fn add(&mut self, module: &str, text: &str) {
        let text = without_comments(text);
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut owner = module.to_owned();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            if line.starts_with("impl") {
                owner = impl_owner(line);
            } else if line.starts_with('}') {
                owner = module.to_owned();
            } else if let Some(name) = struct_name(line) {
                i += 1;
                while i < lines.len() && !lines[i].starts_with('}') {
                    if let Some((field, ty)) = field_of(lines[i]) {
                        self.fields.insert((name.clone(), field), ty);
                    }
                    i += 1;
                }
            } else if let Some(name) = fn_name(line) {
                let start = i;
                i += 1;
                while i < lines.len()
                    && fn_name(lines[i]).is_none()
                    && !lines[i].starts_with("impl")
                    && !lines[i].starts_with('}')
                {
                    i += 1;
                }
                let text = lines[start..i].join("\n");
                let signature_end = text.find('{').unwrap_or(text.len());
                let (params, returns) = signature(&text[..signature_end]);
                self.functions.insert(
                    (owner.clone(), name.clone()),
                    Function {
                        module: module.to_owned(),
                        owner: owner.clone(),
                        name,
                        params,
                        returns,
                        body: squeeze(&text[signature_end..]),
                    },
                );
                continue;
            }
            i += 1;
        }
    }

    pub fn has(&self, owner: &str, name: &str) -> bool {
        self.functions
            .contains_key(&(owner.to_owned(), name.to_owned()))
    }

    /// Every call reachable from `owner::name`.
    pub fn calls_from(&self, owner: &str, name: &str) -> BTreeSet<Call> {
        let mut calls = BTreeSet::new();
        let mut stack = Vec::new();
        self.walk(owner, name, &[], &BTreeMap::new(), &mut stack, &mut calls);
        calls
    }

    fn walk(
        &self,
        owner: &str,
        name: &str,
        args: &[Option<Resource>],
        fields: &BTreeMap<String, Resource>,
        stack: &mut Vec<(String, String)>,
        calls: &mut BTreeSet<Call>,
    ) {
        let key = (owner.to_owned(), name.to_owned());
        let Some(function) = self.functions.get(&key) else {
            return;
        };
        if stack.contains(&key) || stack.len() > 24 {
            return;
        }
        stack.push(key);
        let body = &function.body;
        for (at, action) in operations(body) {
            let span_end = operations(&body[at + 1..])
                .first()
                .map_or(body.len(), |(next, _)| at + 1 + next);
            let span = &body[at..span_end];
            let resource = RESOURCE_SETTERS
                .iter()
                .filter_map(|setter| span.find(setter).map(|p| (p, setter.len())))
                .min()
                .map(|(p, len)| first_argument(&span[p + len..]))
                .map(|expr| self.resource(function, &expr, args, fields));
            let Some(resource) = resource else {
                continue;
            };
            calls.insert(Call {
                action,
                resource,
                index: span.contains(".index_name("),
                site: format!("{}::{}", function.owner, function.name),
            });
        }
        for (callee_owner, callee, arguments, built_by) in self.callees(function) {
            let Some(target) = self.functions.get(&(callee_owner.clone(), callee.clone())) else {
                continue;
            };
            let passed: Vec<Option<Resource>> = target
                .params
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    arguments.get(i).and_then(|expr| {
                        Some(self.resource(function, expr, args, fields))
                            .filter(|r| matches!(r, Resource::Variable(_)))
                    })
                })
                .collect();
            let built = built_by
                .map(|builder| self.literal_fields(&builder, &callee_owner))
                .unwrap_or_default();
            self.walk(&callee_owner, &callee, &passed, &built, stack, calls);
        }
        stack.pop();
    }

    /// The fields of `ty` a struct literal in `builder`'s body sets to a named resource:
    /// `JobRow { table: &self.table, .. }` built by `ErasuresStore::row`.
    fn literal_fields(&self, builder: &(String, String), ty: &str) -> BTreeMap<String, Resource> {
        let Some(function) = self.functions.get(builder) else {
            return BTreeMap::new();
        };
        let Some(at) = function.body.find(&format!("{ty}{{")) else {
            return BTreeMap::new();
        };
        split_arguments(&function.body[at + ty.len() + 1..])
            .into_iter()
            .filter_map(|field| {
                let (name, expr) = field.split_once(':')?;
                let resource = self.resource(function, expr, &[], &BTreeMap::new());
                matches!(resource, Resource::Variable(_)).then(|| (name.to_owned(), resource))
            })
            .collect()
    }

    /// The resource an expression of `function` names.
    fn resource(
        &self,
        function: &Function,
        expr: &str,
        args: &[Option<Resource>],
        fields: &BTreeMap<String, Resource>,
    ) -> Resource {
        let expr = expr
            .trim_start_matches('&')
            .trim_end_matches('?')
            .trim_end_matches(".clone()")
            .trim_end_matches(".as_str()")
            .trim_end_matches('?');
        if let Some(resource) = expr.strip_prefix("self.").and_then(|f| fields.get(f)) {
            return resource.clone();
        }
        if let Some(i) = function.params.iter().position(|(p, _)| p == expr) {
            if let Some(Some(resource)) = args.get(i) {
                return resource.clone();
            }
        }
        TABLE_FIELDS
            .iter()
            .find(|(owner, field, _)| *owner == function.owner && *field == expr)
            .map(|(_, _, variable)| Resource::Variable((*variable).to_owned()))
            .unwrap_or_else(|| {
                Resource::Unknown(format!("{expr} in {}::{}", function.owner, function.name))
            })
    }

    /// The functions `function` calls that this reading can type: `(owner, name, arguments,
    /// the method that built the receiver)`.
    #[allow(clippy::type_complexity)]
    fn callees(
        &self,
        function: &Function,
    ) -> Vec<(String, String, Vec<String>, Option<(String, String)>)> {
        let mut bindings: BTreeMap<String, String> = function
            .params
            .iter()
            .filter_map(|(name, ty)| Some((name.clone(), self.known_type(ty)?)))
            .collect();
        bindings.insert("self".into(), function.owner.clone());
        let body = &function.body;
        // `let name = <receiver chain>;` binds `name` to the chain's type.
        let mut from = 0;
        while let Some(p) = body[from..].find("let") {
            let at = from + p + 3;
            from = at;
            if at > 3 && is_ident_byte(body.as_bytes()[at - 4]) {
                continue;
            }
            let rest = match body[at..].strip_prefix(' ') {
                Some(rest) => rest.trim_start_matches("mut "),
                None if body[at..].starts_with('(') => &body[at..],
                None => continue,
            };
            let Some(eq) = rest.find(" = ") else { continue };
            let name = &rest[..eq];
            let value = &rest[eq + 3..];
            let value = &value[..value.find(';').unwrap_or(value.len())];
            // `let (a, b) = (x, y);` binds each name to its value.
            let pairs: Vec<(String, String)> = match name.strip_prefix('(') {
                Some(names) => split_arguments(names)
                    .into_iter()
                    .zip(split_arguments(value.strip_prefix('(').unwrap_or_default()))
                    .collect(),
                None => vec![(name.to_owned(), value.to_owned())],
            };
            for (name, value) in pairs {
                let name = name.trim_start_matches("mut ").to_owned();
                if !is_ident(&name) {
                    continue;
                }
                if let Some(ty) = self.chain_type(&value, &bindings) {
                    bindings.insert(name, ty);
                }
            }
        }
        let mut found = Vec::new();
        let bytes = body.as_bytes();
        for (open, _) in body.match_indices('(') {
            let mut start = open;
            while start > 0 && is_ident_byte(bytes[start - 1]) {
                start -= 1;
            }
            let name = &body[start..open];
            if name.is_empty() || !is_ident(name) {
                continue;
            }
            let arguments = split_arguments(&body[open + 1..]);
            let before = &body[..start];
            if let Some(receiver) = before.strip_suffix('.') {
                let chain = receiver_chain(receiver);
                if let Some(owner) = self.chain_type(chain, &bindings) {
                    let built_by = self.builder_of(chain, &bindings);
                    found.push((owner, name.to_owned(), arguments, built_by));
                }
            } else if let Some(path) = before.strip_suffix("::") {
                let tail = path_tail(receiver_chain(path));
                if let Some(owner) = self.path_owner(function, &tail, name) {
                    found.push((owner, name.to_owned(), arguments, None));
                }
            } else if !before.ends_with("fn ") && self.has(&function.module, name) {
                found.push((function.module.clone(), name.to_owned(), arguments, None));
            }
        }
        found
    }

    /// Who owns `tail::name` called from `function`: a type, `Self`, or a module (of the
    /// caller's crate first).
    fn path_owner(&self, function: &Function, tail: &str, name: &str) -> Option<String> {
        if tail == "Self" {
            return Some(function.owner.clone());
        }
        if tail.starts_with(char::is_uppercase) {
            return Some(tail.to_owned());
        }
        let krate = function.module.split("::").next().unwrap_or_default();
        let own = format!("{krate}::{tail}");
        if self.has(&own, name) {
            return Some(own);
        }
        let suffix = format!("::{tail}");
        self.functions
            .keys()
            .find(|(owner, n)| n == name && owner.ends_with(&suffix))
            .map(|(owner, _)| owner.clone())
    }

    /// The method whose value a receiver chain ends with (`self.row(job)`: `row`), if any.
    fn builder_of(
        &self,
        chain: &str,
        bindings: &BTreeMap<String, String>,
    ) -> Option<(String, String)> {
        let chain = chain.trim_end_matches('?');
        let parts = chain_parts(chain);
        let (last, before) = parts.split_last()?;
        let method = last.split_once('(')?.0;
        let owner = self.chain_type(&before.join("."), bindings)?;
        self.has(&owner, method).then(|| (owner, method.to_owned()))
    }

    /// The type a receiver chain (`self.store`, `app.reactions()?`, `viewer`) evaluates to.
    fn chain_type(&self, chain: &str, bindings: &BTreeMap<String, String>) -> Option<String> {
        let chain = chain
            .trim()
            .trim_start_matches('&')
            .trim_end_matches(".await")
            .trim_end_matches('?');
        let mut parts = chain_parts(chain).into_iter();
        let mut ty = bindings.get(parts.next()?)?.clone();
        for part in parts {
            let part = part.trim_end_matches('?');
            if let Some((method, _)) = part.split_once('(') {
                // A method of the type gives its return type; any other (`as_ref`,
                // `ok_or(..)`, `clone`) is taken to pass the value through.
                if let Some(f) = self.functions.get(&(ty.clone(), method.to_owned())) {
                    ty = self.known_type(&f.returns)?;
                }
            } else if part == "await" {
                continue;
            } else {
                ty = self
                    .fields
                    .get(&(ty.clone(), part.to_owned()))
                    .and_then(|t| self.known_type(t))?;
            }
        }
        Some(ty)
    }

    /// The first type named in `text` that has functions here.
    fn known_type(&self, text: &str) -> Option<String> {
        identifiers(text)
            .into_iter()
            .find(|id| id.starts_with(char::is_uppercase) && self.owns(id))
    }

    fn owns(&self, ty: &str) -> bool {
        self.functions
            .range((ty.to_owned(), String::new())..)
            .next()
            .is_some_and(|((o, _), _)| o == ty)
    }
}

fn operations(body: &str) -> Vec<(usize, &'static str)> {
    let mut found: Vec<(usize, &'static str)> = OPERATIONS
        .iter()
        .flat_map(|(token, action)| {
            body.match_indices(token)
                // `Update::builder()` and not `AttributeValueUpdate::builder()`.
                .filter(|(at, _)| {
                    token.starts_with('.') || *at == 0 || !is_ident_byte(body.as_bytes()[at - 1])
                })
                .map(|(at, _)| (at, *action))
        })
        .collect();
    found.sort_unstable();
    found
}

fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_stem().is_some_and(|s| s != "tests")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// A file's module, named with its crate's directory: `store::batch`, `api::reactions`
/// (`mod.rs` by its directory, `lib.rs` by its crate's).
fn module_name(file: &Path) -> String {
    let parts: Vec<&str> = file.iter().filter_map(|p| p.to_str()).collect();
    let src = parts.iter().rposition(|p| *p == "src").unwrap_or(0);
    let krate = src.checked_sub(1).map_or("", |i| parts[i]);
    let mut path: Vec<&str> = parts[src + 1..].to_vec();
    if let Some(last) = path.last_mut() {
        *last = last.trim_end_matches(".rs");
    }
    if matches!(path.last(), Some(&"mod") | Some(&"lib")) {
        path.pop();
    }
    match path.last() {
        Some(module) => format!("{krate}::{module}"),
        None => krate.to_owned(),
    }
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| {
            let mut in_string = false;
            let bytes = line.as_bytes();
            for i in 0..bytes.len() {
                match bytes[i] {
                    b'"' if i == 0 || bytes[i - 1] != b'\\' => in_string = !in_string,
                    b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
                    _ => {}
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text with its whitespace dropped where Rust allows it, so a builder chain broken
/// over lines reads `client.update_item().table_name(..)`.
fn squeeze(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space {
            let last = out.chars().last().unwrap_or(' ');
            if is_ident_char(last) && is_ident_char(c)
                || last == '=' && c != '='
                || c == '=' && !matches!(last, '!' | '<' | '>' | '=' | '+' | '-')
            {
                out.push(' ');
            }
            pending_space = false;
        }
        out.push(c);
    }
    out
}

fn impl_owner(line: &str) -> String {
    let head = line.split('{').next().unwrap_or(line);
    let head = strip_generics(head);
    let head = head.rsplit(" for ").next().unwrap_or(&head).to_owned();
    path_tail(head.split_whitespace().last().unwrap_or_default())
}

fn strip_generics(text: &str) -> String {
    let mut depth = 0;
    text.chars()
        .filter(|&c| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

fn path_tail(path: &str) -> String {
    let path = strip_generics(path);
    path.rsplit("::")
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn struct_name(line: &str) -> Option<String> {
    let rest = line
        .strip_prefix("pub struct ")
        .or_else(|| line.strip_prefix("pub(crate) struct "))
        .or_else(|| line.strip_prefix("struct "))?;
    if !line.trim_end().ends_with('{') {
        return None;
    }
    Some(strip_generics(rest.trim_end_matches('{')).trim().to_owned())
}

fn field_of(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    let line = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub(super) "))
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    let (name, ty) = line.split_once(": ")?;
    is_ident(name).then(|| (name.to_owned(), ty.trim_end_matches(',').to_owned()))
}

fn fn_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !is_ident_char(c))?;
    Some(rest[..end].to_owned())
}

/// A signature's parameters (without `self`) and its return type.
fn signature(text: &str) -> (Vec<(String, String)>, String) {
    let text = squeeze(text);
    let Some(open) = text
        .find("fn ")
        .and_then(|at| text[at..].find('(').map(|p| at + p))
    else {
        return (Vec::new(), String::new());
    };
    let params = split_arguments(&text[open + 1..])
        .into_iter()
        .filter_map(|param| {
            let (name, ty) = param.split_once(':')?;
            let name = name.trim().trim_start_matches("mut ").to_owned();
            (name != "self" && is_ident(&name)).then(|| (name, ty.trim().to_owned()))
        })
        .collect();
    let returns = text
        .rfind("->")
        .map(|at| {
            text[at + 2..]
                .split(" where")
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default();
    (params, returns)
}

/// The comma-separated arguments up to the parenthesis that closes the one before `text`.
fn split_arguments(text: &str) -> Vec<String> {
    let mut arguments = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    let mut last = ' ';
    for c in text.chars() {
        let after = std::mem::replace(&mut last, c);
        match c {
            // `->` and `=>` close nothing.
            '>' if after == '-' || after == '=' => {}
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' if depth == 0 => break,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                arguments.push(std::mem::take(&mut current).trim().to_owned());
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        arguments.push(current.trim().to_owned());
    }
    arguments
}

/// A chain's parts between its top-level dots: `self`, `store`, `ok_or(a.b)?`.
fn chain_parts(chain: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in chain.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '.' if depth == 0 => {
                parts.push(&chain[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&chain[start..]);
    parts
}

fn first_argument(text: &str) -> String {
    split_arguments(text).into_iter().next().unwrap_or_default()
}

/// The receiver chain that ends at the end of `text`: `self.store`, `app.reactions()?`.
fn receiver_chain(text: &str) -> &str {
    let bytes = text.as_bytes();
    let mut start = bytes.len();
    let mut depth = 0;
    while start > 0 {
        let c = bytes[start - 1];
        match c {
            b')' => depth += 1,
            b'(' if depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            b'.' | b'?' | b'&' => {}
            _ if is_ident_byte(c) => {}
            _ => break,
        }
        start -= 1;
    }
    &text[start..]
}

fn identifiers(text: &str) -> Vec<String> {
    text.split(|c: char| !is_ident_char(c))
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn is_ident(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(is_ident_char)
        && !text.starts_with(|c: char| c.is_ascii_digit())
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}
