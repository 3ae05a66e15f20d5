//! Registration is complete: the dialect registry (`src/dialect/mod.rs`'s `REGISTRY`) is
//! the only list of dialects, and everything a dialect is made of knows its place there.
//! Every registered dialect has its module, its example transcript giving a row of its
//! own, and its row in `docs/architecture.md`'s dialect table with the agent names it
//! answers to; no module, example or docs row names a dialect the registry lacks.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use fanout_acp::{Dialect, Direction, Tracker, TrackerEvent};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_owned()
}

/// The modules a dialect is not: the registry itself, the state contract, and ACP's
/// own subagent sessions (protocol, whose module is `native`).
const NOT_DIALECTS: [&str; 2] = ["mod", "state"];
const PROTOCOL_MODULE: &str = "native";

/// The module of a dialect (ACP's subagent sessions' is `native`).
fn module_of(dialect: Dialect) -> &'static str {
    if dialect == Dialect::ACP_NATIVE {
        PROTOCOL_MODULE
    } else {
        dialect.name()
    }
}

fn every_dialect() -> impl Iterator<Item = Dialect> {
    Dialect::registered().chain([Dialect::ACP_NATIVE])
}

#[test]
fn every_dialect_module_is_registered_and_every_registered_dialect_has_its_module() {
    let dir = root().join("src/dialect");
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            assert!(
                path.join("mod.rs").exists(),
                "{}: no mod.rs",
                path.display()
            );
        } else if path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        if !NOT_DIALECTS.contains(&name.as_str()) {
            modules.insert(name);
        }
    }
    let registered: BTreeSet<String> = every_dialect()
        .map(|dialect| module_of(dialect).to_owned())
        .collect();
    assert_eq!(
        modules, registered,
        "src/dialect/'s modules are the registry's dialects"
    );
}

/// One row of the dialect table: the modules its first cell names (`claude.rs`,
/// `codex/`) and the agent names of its second.
struct DocsRow {
    modules: Vec<String>,
    agent_names: BTreeSet<String>,
    line: String,
}

fn backticked(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

fn dialect_table() -> Vec<DocsRow> {
    let docs = root().join("../../docs/architecture.md");
    let text = std::fs::read_to_string(&docs).unwrap();
    let table = text
        .split("| dialect (module) | `agentInfo.name` |")
        .nth(1)
        .expect("the dialect table of docs/architecture.md");
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').collect();
            let modules = backticked(cells[1])
                .into_iter()
                .filter_map(|token| {
                    token
                        .strip_suffix(".rs")
                        .or_else(|| token.strip_suffix('/'))
                        .filter(|module| !module.contains('/'))
                })
                .map(str::to_owned)
                .collect();
            let agent_names = backticked(cells[2])
                .into_iter()
                .map(str::to_ascii_lowercase)
                .collect();
            DocsRow {
                modules,
                agent_names,
                line: line.chars().take(60).collect(),
            }
        })
        .collect()
}

#[test]
fn every_dialect_has_its_docs_row_with_its_agent_names() {
    let table = dialect_table();
    for dialect in every_dialect() {
        let module = module_of(dialect);
        let rows: Vec<&DocsRow> = table
            .iter()
            .filter(|row| row.modules.first().map(String::as_str) == Some(module))
            .collect();
        let [row] = rows.as_slice() else {
            panic!(
                "{dialect}: {} rows of the dialect table name `{module}`",
                rows.len()
            );
        };
        let names: BTreeSet<String> = dialect
            .agent_names()
            .iter()
            .map(|name| name.to_ascii_lowercase())
            .collect();
        assert_eq!(
            row.agent_names, names,
            "{dialect}: the docs row's agent names are the dialect's"
        );
    }
    for row in &table {
        let known = row
            .modules
            .first()
            .is_some_and(|module| every_dialect().any(|dialect| module_of(dialect) == module));
        assert!(known, "a docs row for no registered dialect: {}", row.line);
    }
}

/// The dialects whose rows replaying a transcript gives.
fn dialects_of(path: &Path) -> HashSet<Dialect> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut tracker = Tracker::new();
    let mut seen = HashSet::new();
    for record in text.lines().skip(1).filter(|line| !line.trim().is_empty()) {
        let record: Value = serde_json::from_str(record).unwrap();
        let direction = Direction::from_tag(record["dir"].as_str().unwrap()).unwrap();
        for event in tracker.observe(direction, record["line"].as_str().unwrap()) {
            if let TrackerEvent::Tool(frame) = event {
                seen.extend(frame.dialect);
            }
        }
    }
    seen
}

/// Each dialect has its example, `acp-examples/<name>.transcript.jsonl`, giving a row of
/// its own; every example is a dialect's (`<name>` or `<name>-<variant>`).
#[test]
fn every_dialect_has_its_example_and_every_example_is_a_dialects() {
    let dir = root().join("tests/acp-examples");
    for dialect in every_dialect() {
        let path = dir.join(format!("{}.transcript.jsonl", dialect.name()));
        assert!(path.exists(), "{dialect}: no {}", path.display());
        assert!(
            dialects_of(&path).contains(&dialect),
            "{}: no row of {dialect}",
            path.display()
        );
    }
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = file.strip_suffix(".transcript.jsonl") else {
            continue;
        };
        let dialect = every_dialect().find(|dialect| {
            stem == dialect.name()
                || stem
                    .strip_prefix(dialect.name())
                    .is_some_and(|variant| variant.starts_with('-'))
        });
        assert!(dialect.is_some(), "{file}: no registered dialect's example");
    }
}
