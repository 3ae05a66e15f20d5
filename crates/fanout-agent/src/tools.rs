//! The agent's tools: their specs for the model, and the read-only workspace
//! tools `read_file` and `list_dir`, confined to the session cwd.

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::model::ToolSpec;

/// The subagent tool's name.
pub const SUBAGENT: &str = "subagent";
/// The file-reading tool's name.
pub const READ_FILE: &str = "read_file";
/// The directory-listing tool's name.
pub const LIST_DIR: &str = "list_dir";

/// Largest file `read_file` returns.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most entries `list_dir` returns.
const MAX_DIR_ENTRIES: usize = 1000;

/// The tools offered to the model.
pub fn tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: SUBAGENT.into(),
            description: "Delegate a self-contained task to a subagent and wait for its final answer. \
                mode `spawn` starts a fresh subagent that sees only `prompt`; mode `fork` starts one \
                that also sees this conversation so far."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A short (3-5 word) description of the task."},
                    "prompt": {"type": "string", "description": "The task for the subagent."},
                    "subagent_type": {"type": "string", "description": "Optional kind of subagent, e.g. `reviewer`."},
                    "mode": {"type": "string", "enum": ["spawn", "fork"]}
                },
                "required": ["description", "prompt", "mode"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: READ_FILE.into(),
            description: "Read a UTF-8 text file inside the working directory.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Path relative to the working directory."}},
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: LIST_DIR.into(),
            description: "List a directory inside the working directory (directories end with `/`).".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Path relative to the working directory; default `.`."}},
                "additionalProperties": false
            }),
        },
    ]
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    #[serde(default)]
    path: Option<String>,
}

/// Runs `read_file` or `list_dir` with parsed arguments. `Err` is a tool error
/// message for the model.
pub fn run_workspace_tool(cwd: &Path, name: &str, input: &Value) -> Result<String, String> {
    let args =
        PathArgs::deserialize(input).map_err(|e| format!("invalid arguments for {name}: {e}"))?;
    match name {
        READ_FILE => {
            let requested = args
                .path
                .filter(|p| !p.is_empty())
                .ok_or_else(|| "read_file needs a path".to_string())?;
            read_file(cwd, &requested)
        }
        LIST_DIR => list_dir(cwd, args.path.as_deref().unwrap_or(".")),
        other => Err(format!("unknown tool {other:?}")),
    }
}

/// Resolves `requested` inside `cwd` (which must be canonical). Paths that
/// leave it, lexically or through symlinks, are refused.
pub fn resolve_in_cwd(cwd: &Path, requested: &str) -> Result<PathBuf, String> {
    let outside = || format!("path {requested:?} is outside the session directory; refused");
    let joined = if Path::new(requested).is_absolute() {
        PathBuf::from(requested)
    } else {
        cwd.join(requested)
    };
    let mut lexical = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                if !lexical.pop() {
                    return Err(outside());
                }
            }
            Component::CurDir => {}
            other => lexical.push(other.as_os_str()),
        }
    }
    if !lexical.starts_with(cwd) {
        return Err(outside());
    }
    let canonical =
        std::fs::canonicalize(&lexical).map_err(|e| format!("cannot access {requested:?}: {e}"))?;
    if !canonical.starts_with(cwd) {
        return Err(outside());
    }
    Ok(canonical)
}

fn read_file(cwd: &Path, requested: &str) -> Result<String, String> {
    let path = resolve_in_cwd(cwd, requested)?;
    let meta = std::fs::metadata(&path).map_err(|e| format!("cannot access {requested:?}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{requested:?} is not a file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{requested:?} is {} bytes; read_file returns files up to {MAX_FILE_BYTES} bytes",
            meta.len()
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {requested:?}: {e}"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn list_dir(cwd: &Path, requested: &str) -> Result<String, String> {
    let path = resolve_in_cwd(cwd, requested)?;
    let entries =
        std::fs::read_dir(&path).map_err(|e| format!("cannot list {requested:?}: {e}"))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {requested:?}: {e}"))?;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            name.push('/');
        }
        names.push(name);
    }
    names.sort();
    let total = names.len();
    names.truncate(MAX_DIR_ENTRIES);
    let mut text = names.join("\n");
    if total > MAX_DIR_ENTRIES {
        text.push_str(&format!("\n… {} more entries", total - MAX_DIR_ENTRIES));
    }
    if text.is_empty() {
        text = "(empty directory)".into();
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_tools_are_confined() {
        let outer = tempfile::tempdir().unwrap();
        let cwd = outer.path().join("ws");
        std::fs::create_dir_all(cwd.join("sub")).unwrap();
        std::fs::write(cwd.join("a.txt"), "hello").unwrap();
        std::fs::write(outer.path().join("secret.txt"), "no").unwrap();
        let cwd = std::fs::canonicalize(&cwd).unwrap();

        assert_eq!(
            run_workspace_tool(&cwd, READ_FILE, &json!({"path": "a.txt"})).unwrap(),
            "hello"
        );
        assert_eq!(
            run_workspace_tool(&cwd, READ_FILE, &json!({"path": "sub/../a.txt"})).unwrap(),
            "hello"
        );
        assert_eq!(
            run_workspace_tool(&cwd, LIST_DIR, &json!({})).unwrap(),
            "a.txt\nsub/"
        );
        assert_eq!(
            run_workspace_tool(&cwd, LIST_DIR, &json!({"path": "sub"})).unwrap(),
            "(empty directory)"
        );

        for path in ["../secret.txt", "/etc/passwd", "sub/../../secret.txt"] {
            let err = run_workspace_tool(&cwd, READ_FILE, &json!({ "path": path })).unwrap_err();
            assert!(
                err.contains("outside the session directory"),
                "{path}: {err}"
            );
        }
        let err = run_workspace_tool(&cwd, LIST_DIR, &json!({"path": ".."})).unwrap_err();
        assert!(err.contains("outside"), "{err}");

        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outer.path().join("secret.txt"), cwd.join("link")).unwrap();
            let err = run_workspace_tool(&cwd, READ_FILE, &json!({"path": "link"})).unwrap_err();
            assert!(err.contains("outside"), "{err}");
        }
        let err = run_workspace_tool(&cwd, READ_FILE, &json!({"path": "missing"})).unwrap_err();
        assert!(err.contains("cannot access"), "{err}");
        let err = run_workspace_tool(&cwd, READ_FILE, &json!({"path": 3})).unwrap_err();
        assert!(err.contains("invalid arguments"), "{err}");
        let err = run_workspace_tool(&cwd, READ_FILE, &json!({"path": "sub"})).unwrap_err();
        assert!(err.contains("not a file"), "{err}");
    }
}
