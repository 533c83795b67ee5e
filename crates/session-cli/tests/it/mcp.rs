//! `session mcp` talked to as an agent does: the official SDK's client (`rmcp`) starts
//! the command on its stdio, lists the tools and calls each on a home holding sessions of
//! pi, Claude Code and Codex. Bad arguments are MCP errors (`-32602`); a tool that ran and
//! failed answers with an error result; no home changes.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ErrorCode};
use rmcp::service::ServiceError;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use session_testkit::Tree;

use super::import::fixture;
use super::{HEADER, Result, TempDir, USER, in_home};

/// Calls `tool` with `args`: the structured answer, or the error result's text as `Err`.
async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Result<std::result::Result<Value, String>> {
    let Value::Object(args) = args else { return Err("arguments are an object".into()) };
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(args)).await?;
    if result.is_error == Some(true) {
        let text = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<String>();
        return Ok(Err(text));
    }
    let value = result.structured_content.ok_or("a structured answer")?;
    // The text block is the same JSON, for clients that read only text.
    let text = result.content.first().and_then(|c| c.as_text()).ok_or("a text block")?;
    assert_eq!(serde_json::from_str::<Value>(&text.text)?, value);
    Ok(Ok(value))
}

/// The MCP error code of a call that failed as a protocol error.
async fn protocol_error(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Result<(ErrorCode, String)> {
    let Value::Object(args) = args else { return Err("arguments are an object".into()) };
    match client.call_tool(CallToolRequestParams::new(tool).with_arguments(args)).await {
        Err(ServiceError::McpError(e)) => Ok((e.code, e.message.into_owned())),
        other => Err(format!("{tool}: expected an MCP error, got {other:?}").into()),
    }
}

#[test]
fn an_agent_lists_searches_and_reads_sessions() -> Result<()> {
    let tmp = TempDir::try_new("mcp")?;
    let home = tmp.path().join("home");
    let claude_id = "7f3c2a10-5b6e-4d8f-9a21-0c4e8b7d6f51";
    let claude = home.join(".claude/projects/-home-me-proj").join(format!("{claude_id}.jsonl"));
    let codex_name = "rollout-2026-03-03T08-00-00-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl";
    let codex = home.join(".codex/sessions/2026/03/03").join(codex_name);
    let pi = home.join(".pi/agent/sessions/--p--/2026-01-01T00-00-00-000Z_01a228d5-0000-7000-8000-000000000001.jsonl");
    for (to, bytes) in [
        (&claude, fs_err::read(fixture("claude/branched.jsonl"))?),
        (&codex, fs_err::read(fixture(&format!("codex/{codex_name}")))?),
        (&pi, format!("{HEADER}\n{USER}\n").into_bytes()),
    ] {
        fs_err::create_dir_all(to.parent().ok_or("a folder")?)?;
        fs_err::write(to, bytes)?;
    }
    // A file outside every agent's folders, which no call may read.
    let outside = tmp.path().join("secret.jsonl");
    fs_err::write(&outside, format!("{HEADER}\n{USER}\n"))?;
    let before = Tree::read(&home)?;
    let mut command = in_home(&home, tmp.path());
    command.arg("mcp").env("XDG_CACHE_HOME", tmp.path().join("cache"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let child = TokioChildProcess::new(tokio::process::Command::from(command))?;
        let client = ().serve(child).await?;
        let info = client.peer_info().ok_or("the server's info")?;
        assert_eq!(info.server_info.as_ref().map(|s| s.name.as_str()), Some("session"));
        let tools = client.list_all_tools().await?;
        let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
        assert_eq!(names, ["list_sessions", "search_sessions", "read_session", "read_entry"]);
        for t in &tools {
            assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{}", t.name);
            assert!(t.description.as_deref().is_some_and(|d| !d.is_empty()), "{}", t.name);
        }

        // list_sessions: every agent's, newest first, in pages.
        let all = call(&client, "list_sessions", json!({})).await??;
        let agents: Vec<&str> =
            all["sessions"].as_array().ok_or("sessions")?.iter().filter_map(|s| s["agent"].as_str()).collect();
        assert_eq!(agents, ["codex", "claude", "pi"], "{all}");
        assert_eq!((all["total"].as_u64(), all["nextOffset"].as_u64()), (Some(3), None));
        let page = call(&client, "list_sessions", json!({"limit": 1, "offset": 1})).await??;
        assert_eq!(page["sessions"][0]["id"], claude_id);
        assert_eq!(page["nextOffset"], 2);
        let only = call(&client, "list_sessions", json!({"agent": ["pi", "codex"], "cwd": "/home/me/proj"})).await??;
        assert_eq!(only["total"], 1, "{only}");
        assert_eq!(only["sessions"][0]["agent"], "codex");
        let recent = call(&client, "list_sessions", json!({"since": "2026-02-01T00:00:00Z"})).await??;
        assert_eq!(recent["total"], 2, "{recent}");
        let none = call(&client, "list_sessions", json!({"since": "1d"})).await??;
        assert_eq!(none["total"], 0, "{none}");

        // search_sessions, then read_entry of the hit.
        let found = call(&client, "search_sessions", json!({"query": "subtracts", "limit": 3})).await??;
        let hit = &found["hits"][0];
        assert_eq!((hit["agent"].as_str(), hit["sessionId"].as_str()), (Some("claude"), Some(claude_id)), "{found}");
        assert!(hit["snippet"].as_str().is_some_and(|s| s.contains("subtracts")));
        let path = hit["path"].as_str().ok_or("a path")?;
        let entry = call(&client, "read_entry", json!({"session": path, "entryId": hit["entryId"]})).await??;
        assert_eq!(entry["entry"]["id"], hit["entryId"]);
        assert_eq!(entry["truncated"], false);

        // read_session: pages of the context, within the byte budget.
        let first = call(&client, "read_session", json!({"session": "7f3c2a10", "limit": 2})).await??;
        assert_eq!(first["messages"].as_array().map(Vec::len), Some(2));
        assert_eq!(first["messages"][0]["role"], "user");
        let total = first["total"].as_u64().ok_or("a total")?;
        assert!(total > 2 && first["nextOffset"] == 2, "{first}");
        let mut seen = 2;
        let mut next = first["nextOffset"].clone();
        while let Some(offset) = next.as_u64() {
            let page =
                call(&client, "read_session", json!({"session": path, "offset": offset, "maxBytes": 1024})).await??;
            let texts: usize = page["messages"]
                .as_array()
                .ok_or("messages")?
                .iter()
                .map(|m| m["text"].as_str().map_or(0, str::len))
                .sum();
            assert!(texts <= 1024 + 64 * 4, "a page of {texts} bytes for a budget of 1024");
            seen += page["messages"].as_array().map_or(0, Vec::len);
            next = page["nextOffset"].clone();
        }
        assert_eq!(seen as u64, total);
        let at = call(&client, "read_session", json!({"session": path, "leaf": hit["entryId"]})).await??;
        assert_eq!(at["leafId"], hit["entryId"]);
        let codex_read = call(&client, "read_session", json!({"session": codex.to_string_lossy()})).await??;
        assert!(codex_read["total"].as_u64() > Some(2), "{codex_read}");

        // Errors: a tool's failure is a result the model reads; bad arguments are MCP errors.
        let refused = call(&client, "read_session", json!({"session": outside.to_string_lossy()})).await?;
        assert!(refused.as_ref().is_err_and(|e| e.contains("not in the agents' session folders")), "{refused:?}");
        let missing = call(&client, "read_entry", json!({"session": path, "entryId": "nope"})).await?;
        assert!(missing.as_ref().is_err_and(|e| e.contains("no entry \"nope\"")), "{missing:?}");
        let unknown = call(&client, "read_session", json!({"session": "ffffffff"})).await?;
        assert!(unknown.as_ref().is_err_and(|e| e.contains("no session's id begins with")), "{unknown:?}");
        for (tool, args, says) in [
            ("search_sessions", json!({}), "query is required"),
            ("list_sessions", json!({"limit": 0}), "limit must be a whole number from 1 to 200"),
            ("list_sessions", json!({"agent": ["gemini"]}), "no agent \"gemini\""),
            ("list_sessions", json!({"since": "last week"}), "neither a duration"),
            ("read_session", json!({"session": "7f3c2a10", "colour": "red"}), "unknown argument \"colour\""),
            ("read_entry", json!({"session": 7, "entryId": "x"}), "session must be a string"),
            ("no_such_tool", json!({}), "no tool named"),
        ] {
            let (code, message) = protocol_error(&client, tool, args).await?;
            assert_eq!(code, ErrorCode::INVALID_PARAMS, "{tool}: {message}");
            assert!(message.contains(says), "{tool}: {message}");
        }
        // The server still answers after them.
        call(&client, "list_sessions", json!({"limit": 1})).await??;
        client.cancel().await?;
        Ok::<(), session_testkit::BoxError>(())
    })?;
    assert_eq!(Tree::read(&home)?, before, "no home changed");
    Ok(())
}
