//! The typed context: for every session file of `testdata/` (frozen, corrupt,
//! generated, sample and the conformance corpus) opened in both dialects,
//! `SessionManager::context` and `context_at` read the same context as the JSON
//! projection of `session-tree`, at the current leaf and at other entries, and
//! `Context::to_json` writes it back byte for byte.
use serde_json::Value;
use session::tree::{omp, pi};
use session::{Context, ContextSettings, Dialect, Env, Leaf, SessionManager};

use session_testkit::{TempDir, testdata_files};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A JSON text as the value JavaScript reads (key order aside: maps compare as sets).
/// Read with the model's JSON reader, which reads what `JSON.parse` reads (numbers beyond
/// a double, lone surrogates).
fn value(text: &str) -> Result<Value> {
    let parsed = session::model::json::parse(text).ok_or_else(|| format!("not JSON: {text}"))?;
    Ok(session::model::json::parse(&session::model::json::to_js_string(&parsed)).ok_or("not JSON once written")?)
}

fn json_context(m: &SessionManager, leaf: Leaf<'_>) -> String {
    match m.dialect() {
        Dialect::Pi => pi::build_context(m.tree(), leaf).to_json_string(),
        Dialect::Omp => omp::build_context(m.tree(), leaf, omp::ContextOptions::default()).to_json_string(),
    }
}

fn check(m: &SessionManager, leaf: Leaf<'_>, what: &str) -> Result<Context> {
    let typed = m.context_at(leaf).map_err(|e| format!("{what}: {e}"))?;
    let (typed_json, json) = (typed.to_json(), json_context(m, leaf));
    assert_eq!(value(&typed_json)?, value(&json)?, "{what}");
    // Message structs follow the agents' key orders: even the bytes are the same, except
    // for the hand-written corners, which put keys in orders neither agent writes.
    if !what.contains("conformance-odd") {
        assert_eq!(typed_json, json, "{what}");
    }
    Ok(typed)
}

#[test]
fn typed_context_equals_the_json_context_for_every_testdata_file() -> Result<()> {
    let files = testdata_files();
    assert!(files.len() > 100, "testdata holds the fixtures and the conformance corpus");
    let tmp = TempDir::new("ctx");
    let (mut contexts, mut messages) = (0, 0);
    let mut refused = 0;
    for path in &files {
        // The hand-written corners hold fields of types the agents never write (a string
        // message timestamp): the typed context refuses those, naming the field.
        let odd = path.to_string_lossy().contains("conformance-odd");
        for dialect in [Dialect::Pi, Dialect::Omp] {
            let env = Env::files().with_process_cwd(tmp.path().to_path_buf());
            let Ok(m) = SessionManager::open_read_only(dialect, path, env) else { continue };
            let what = format!("{dialect:?} {}", path.display());
            let mut leaves = vec![Leaf::Current, Leaf::Null];
            // Other leaves: a spread of entries, not all (quadratic on long files).
            let ids: Vec<String> = m.tree().entries().iter().filter_map(|r| r.id().map(str::to_owned)).collect();
            leaves.extend(ids.iter().step_by(ids.len() / 8 + 1).map(|id| Leaf::Id(id)));
            for leaf in leaves {
                let what = format!("{what} at {leaf:?}");
                let ctx = match check(m.as_manager(), leaf, &what) {
                    Ok(ctx) => ctx,
                    Err(e) if odd && e.to_string().contains(": field `") => {
                        refused += 1;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                assert_eq!(ctx.dialect(), dialect);
                match leaf {
                    Leaf::Null => assert!(ctx.messages.is_empty(), "{what}"),
                    Leaf::Current => {
                        // As JSON: a `null` count reads as NaN, which no `==` finds equal.
                        assert_eq!(m.context().map_err(|e| format!("{what}: {e}"))?.to_json(), ctx.to_json());
                        messages += ctx.messages.len();
                    }
                    Leaf::Id(_) => {}
                }
                contexts += 1;
            }
        }
    }
    assert!(refused > 0, "the hand-written corners hold fields the typed context refuses");
    assert!(contexts > 500 && messages > 1000, "{contexts} contexts, {messages} messages");
    Ok(())
}

#[test]
fn omp_settings_are_typed() -> Result<()> {
    use serde_json::json;
    use session::OmpSettings;
    use session::model::typed::ServiceTier;

    let mut m = SessionManager::in_memory(Dialect::Omp, "/p", Env::memory());
    m.omp()?.append_model_change("anthropic/claude", None, false)?;
    m.omp()?.append_model_change("openai/gpt", Some("smol"), false)?;
    m.append_thinking_level_change(Some("high"), Some("auto"))?;
    m.omp()?.append_service_tier_change(json!({"openai": "flex"}))?;
    m.omp()?.append_ttsr_injection(&["a".to_owned(), "b".to_owned()])?;
    m.omp()?.append_ttsr_injection(&["b".to_owned(), "c".to_owned()])?;
    m.omp()?.append_mode_change("plan", Some(json!({"step": 1})))?;
    m.append_message_json(json!({"role": "user", "content": "hi", "timestamp": 1}))?;
    let ctx = check(&m, Leaf::Current, "omp settings")?;
    let ContextSettings::Omp(s) = &ctx.settings else { panic!("{:?}", ctx.settings) };
    let OmpSettings {
        thinking_level,
        configured_thinking_level,
        service_tier,
        models,
        injected_ttsr_rules,
        mode,
        mode_data,
        ..
    } = s;
    assert_eq!(thinking_level, "high");
    assert_eq!(configured_thinking_level.as_deref(), Some("auto"));
    let Some(ServiceTier::ByFamily(tier)) = service_tier else { panic!("{service_tier:?}") };
    assert_eq!(tier.get("openai"), Some(&json!("flex")));
    assert_eq!(
        models,
        &[("default".to_owned(), "anthropic/claude".to_owned()), ("smol".to_owned(), "openai/gpt".to_owned())]
    );
    assert_eq!(injected_ttsr_rules, &["a", "b", "c"]);
    assert_eq!(mode.as_deref(), Some("plan"));
    assert_eq!(mode_data, &Some(json!({"step": 1})));
    Ok(())
}

#[test]
fn pi_settings_are_typed_and_bad_messages_are_named() -> Result<()> {
    use serde_json::json;
    use session::ModelRef;

    let mut m = SessionManager::in_memory(Dialect::Pi, "/p", Env::memory());
    let ctx = m.context()?;
    let ContextSettings::Pi(s) = &ctx.settings else { panic!("{:?}", ctx.settings) };
    assert_eq!((s.thinking_level.clone(), s.model.clone()), (Some(Some("off".to_owned())), None));

    m.pi()?.append_model_change("anthropic", "claude")?;
    m.append_message_json(json!({"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}))?;
    let ctx = check(&m, Leaf::Current, "pi settings")?;
    let ContextSettings::Pi(s) = &ctx.settings else { panic!("{:?}", ctx.settings) };
    let model = s.model.clone().unwrap_or_default();
    assert_eq!(model, ModelRef { provider: Some("anthropic".into()), model_id: Some("claude".into()) });

    // A message of an unexpected shape: the JSON context keeps it, the typed one names it.
    m.append_message_json(json!({"role": "user", "content": 42, "timestamp": 2}))?;
    let err = m.context().err().ok_or("a typed error")?;
    assert_eq!(err.to_string(), "field `messages[1].content`: data did not match any variant of untagged enum Content");
    assert!(json_context(&m, Leaf::Current).contains(r#""content":42"#));
    Ok(())
}
