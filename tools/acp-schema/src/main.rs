//! Writes the JSON schema of ACP protocol version 1 as the official Rust types of
//! `agent-client-protocol-schema` define it: every definition reachable from the
//! messages either side sends, under `$defs`, in JSON Schema 2020-12.
//!
//!     cargo run --manifest-path tools/acp-schema/Cargo.toml -- OUT.json

use std::process::ExitCode;

use agent_client_protocol_schema::v1;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

fn main() -> ExitCode {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: acp-schema OUT.json");
        return ExitCode::from(2);
    };
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let roots = [
        ("AgentRequest", generator.subschema_for::<v1::AgentRequest>()),
        ("AgentResponse", generator.subschema_for::<v1::AgentResponse>()),
        ("AgentNotification", generator.subschema_for::<v1::AgentNotification>()),
        ("ClientRequest", generator.subschema_for::<v1::ClientRequest>()),
        ("ClientResponse", generator.subschema_for::<v1::ClientResponse>()),
        ("ClientNotification", generator.subschema_for::<v1::ClientNotification>()),
        ("Error", generator.subschema_for::<v1::Error>()),
    ];
    let defs = generator.take_definitions(true);
    let document = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Agent Client Protocol v1 (agent-client-protocol-schema 1.20.0)",
        "anyOf": roots.iter().map(|(_, schema)| schema.clone()).collect::<Vec<_>>(),
        "$defs": Value::Object(defs),
    });
    let text = match serde_json::to_string_pretty(&document) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("acp-schema: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(error) = std::fs::write(&out, text + "\n") {
        eprintln!("acp-schema: {out}: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
