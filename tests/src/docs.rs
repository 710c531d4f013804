//! Figures in docs/performance.md (and the README's summary of them) are the benches' own: a
//! bench prints its report with [`say!`](crate::say), which keeps each line, and writes what
//! it said (or any text) into its section of the page, between
//! `<!-- {name}: written by {command} -->` and `<!-- {name} end -->`.

use std::sync::Mutex;

/// The page the benches write into, from the workspace root.
pub const PERFORMANCE: &str = "docs/performance.md";
/// The README, whose performance summary quotes the ledger's headline.
pub const README: &str = "README.md";

/// The lines said since the last [`take_said`].
static SAID: Mutex<String> = Mutex::new(String::new());

/// Prints `line` and keeps it for the bench's section ([`take_said`]); [`say!`](crate::say)
/// calls it as `println!` is called.
pub fn say(line: std::fmt::Arguments) {
    let line = line.to_string();
    println!("{line}");
    let mut said = SAID.lock().expect("no bench panicked while saying");
    said.push_str(&line);
    said.push('\n');
}

/// Every line said since the last call, and forgets them.
pub fn take_said() -> String {
    std::mem::take(&mut *SAID.lock().expect("no bench panicked while saying"))
}

/// `println!` that also keeps the line for the bench's section of docs/performance.md.
#[macro_export]
macro_rules! say {
    () => {
        $crate::docs::say(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::docs::say(format_args!($($arg)*))
    };
}

/// Replaces section `name` of docs/performance.md with `text` ([`write_section_of`]).
pub fn write_section(name: &str, text: &str) {
    write_section_of(PERFORMANCE, name, text);
}

/// Replaces section `name` of `page` (from the workspace root) with `text`: everything after
/// the line `<!-- {name}: written by … -->` up to `<!-- {name} end -->`. Panics unless the
/// page has each marker exactly once, in that order.
pub fn write_section_of(page_path: &str, name: &str, text: &str) {
    let path = likes_local::repo_root().join(page_path);
    let page = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("{} does not read: {err}", path.display()));
    let begin = once(page_path, &page, &format!("<!-- {name}: written by "), name);
    let end = once(page_path, &page, &format!("<!-- {name} end -->"), name);
    let after_begin = page[begin..]
        .find("-->\n")
        .map(|at| begin + at + "-->\n".len())
        .filter(|&at| at <= end)
        .unwrap_or_else(|| {
            panic!("{page_path}: the `<!-- {name}: written by … -->` line does not end before `<!-- {name} end -->`")
        });
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    let written = format!("{}{text}{newline}{}", &page[..after_begin], &page[end..]);
    std::fs::write(&path, written)
        .unwrap_or_else(|err| panic!("{} does not write: {err}", path.display()));
}

/// Writes what the bench said ([`take_said`]) into section `name`, as a text block under a
/// line naming the `command` that wrote it.
pub fn write_said(name: &str, command: &str) {
    let said = take_said();
    write_section(
        name,
        &format!("Written by `{command}`:\n\n```text\n{said}```\n"),
    );
}

/// Where `marker` is in `page` (the text of `page_path`), which must hold it exactly once.
fn once(page_path: &str, page: &str, marker: &str, name: &str) -> usize {
    match page
        .match_indices(marker)
        .map(|(at, _)| at)
        .collect::<Vec<_>>()[..]
    {
        [at] => at,
        [] => panic!("{page_path} has no `{marker}` marker: section {name:?} has nowhere to go"),
        _ => panic!("{page_path} has `{marker}` more than once: section {name:?} is ambiguous"),
    }
}
