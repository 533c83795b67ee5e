//! Records built with the `entries` builders survive serialize -> parse -> serialize
//! byte for byte, whatever their ids, strings and numbers, in both dialects.

use proptest::prelude::*;
use serde_json::{Number, Value};
use session_model::entries::{Base, omp, pi};
use session_model::{Dialect, Record, TitleSlot, parse_session_bytes, timestamp};

use crate::support::{arb, is_structural, write_back};

/// The inputs of one builder call; `kind` picks the builder.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    kind: u8,
    id: String,
    parent: Option<String>,
    ts: String,
    s1: String,
    s2: String,
    v1: Value,
    v2: Value,
    flag: bool,
    n: Number,
}

pub(crate) fn id() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[0-9a-f]{8}", 1 => arb::string()]
}

fn ts() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (-62_000_000_000_000i64..253_402_300_799_999).prop_map(timestamp::format_iso_millis),
        1 => arb::string(),
    ]
}

pub(crate) fn spec() -> impl Strategy<Value = Spec> {
    (
        any::<u8>(),
        id(),
        prop::option::of(id()),
        ts(),
        arb::string(),
        arb::string(),
        arb::json(),
        arb::json(),
        any::<bool>(),
        arb::number(),
    )
        .prop_map(|(kind, id, parent, ts, s1, s2, v1, v2, flag, n)| Spec {
            kind,
            id,
            parent,
            ts,
            s1,
            s2,
            v1,
            v2,
            flag,
            n,
        })
}

fn opt<T>(flag: bool, v: T) -> Option<T> {
    flag.then_some(v)
}

pub(crate) fn build(dialect: Dialect, s: &Spec) -> Record {
    let b = Base::new(s.id.clone(), s.parent.as_deref(), s.ts.clone());
    let n = Value::Number(s.n.clone());
    match dialect {
        Dialect::Pi => match s.kind % 12 {
            0 => pi::message(&b, s.v1.clone()),
            1 => pi::thinking_level_change(&b, &s.s1),
            2 => pi::model_change(&b, &s.s1, &s.s2),
            3 => pi::usage(&b, &s.s1, &s.s2, "m", s.v1.clone(), opt(s.flag, s.s2.as_str())),
            4 => pi::compaction(
                &b,
                &s.s1,
                &s.s2,
                n,
                pi::CompactionExtra {
                    details: opt(s.flag, s.v1.clone()),
                    usage: opt(!s.flag, s.v2.clone()),
                    from_hook: Some(s.flag),
                    system_message: opt(s.flag, s.v2.clone()),
                },
            ),
            5 => pi::custom(&b, &s.s1, opt(s.flag, s.v1.clone())),
            6 => pi::session_info(&b, &pi::sanitize_session_name(&s.s1)),
            7 => pi::custom_message(&b, &s.s1, s.v1.clone(), s.flag, opt(s.flag, s.v2.clone())),
            8 => pi::context_edit(&b, &s.s1, s.v1.clone()),
            9 => pi::label(&b, &s.s1, opt(s.flag, s.s2.as_str())),
            10 => pi::branch_summary(&b, &s.s1, &s.s2, opt(s.flag, s.v1.clone()), opt(s.flag, n), Some(s.flag)),
            _ => pi::message(
                &b,
                serde_json::json!({"role": "assistant", "content": [s.v1.clone()], "usage": {"cost": n}}),
            ),
        },
        Dialect::Omp => match s.kind % 16 {
            0 => omp::message(&b, s.v1.clone()),
            1 => omp::thinking_level_change(&b, opt(s.flag, s.s1.as_str()), opt(!s.flag, s.s2.as_str())),
            2 => omp::model_change(&b, &s.s1, opt(s.flag, s.s2.as_str()), s.flag),
            3 => omp::service_tier_change(&b, s.v1.clone()),
            4 => omp::compaction(
                &b,
                &s.s1,
                &s.s2,
                n.clone(),
                omp::CompactionExtra {
                    short_summary: opt(s.flag, s.s2.clone()),
                    tokens_after: opt(s.flag, n),
                    method: opt(!s.flag, s.s1.clone()),
                    provider_replay_through_entry_id: opt(s.flag, s.id.clone()),
                    details: opt(s.flag, s.v1.clone()),
                    from_extension: Some(s.flag),
                    preserve_data: opt(!s.flag, s.v2.clone()),
                },
            ),
            5 => omp::branch_summary(&b, &s.s1, &s.s2, opt(s.flag, s.v1.clone()), Some(s.flag)),
            6 => omp::reset_boundary(&b),
            7 => omp::custom(&b, &s.s1, opt(s.flag, s.v1.clone())),
            8 => omp::custom_message(&b, &s.s1, s.v1.clone(), s.flag, Some(s.v2.clone()), opt(s.flag, s.s2.as_str())),
            9 => omp::label(&b, &s.s1, opt(s.flag, s.s2.as_str())),
            10 => omp::title_change(&b, &omp::sanitize_title(&s.s1), &s.s2, opt(s.flag, s.s1.as_str()), None),
            11 => omp::ttsr_injection(&b, &[s.s1.clone(), s.s2.clone()]),
            12 => omp::credential_pin(&b, &s.s1, &s.s2),
            13 => omp::session_init(&b, s.v1.clone()),
            14 => omp::model_usage(&b, s.v1.clone()),
            _ => omp::mode_change(&b, &s.s1, opt(s.flag, s.v1.clone())),
        },
    }
}

fn check(dialect: Dialect, header_id: &str, title: Option<&str>, specs: &[Spec]) -> Result<(), TestCaseError> {
    let header = match dialect {
        Dialect::Pi => pi::header(header_id, "2026-01-01T00:00:00.000Z", "/tmp", None),
        Dialect::Omp => omp::header(header_id, "2026-01-01T00:00:00.000Z", "/tmp", omp::HeaderExtra::default()),
    };
    let records: Vec<Record> = std::iter::once(header).chain(specs.iter().map(|s| build(dialect, s))).collect();
    let mut file = String::new();
    if let (Dialect::Omp, Some(title)) = (dialect, title) {
        let slot = TitleSlot {
            title: title.to_owned(),
            source: Some("user".into()),
            updated_at: "2026-01-01T00:00:00.000Z".into(),
        };
        file.push_str(&slot.to_line().map_err(|e| TestCaseError::fail(e.to_string()))?);
    }
    for r in &records {
        // A built record is already what JSON.stringify(JSON.parse(text)) writes.
        prop_assert_eq!(r.canonical_line(), r.text());
        file.push_str(r.text());
        file.push('\n');
    }
    let parsed = parse_session_bytes(file.as_bytes(), dialect);
    let unclean: Vec<_> = parsed.diagnostics.iter().filter(|d| !is_structural(&d.kind)).collect();
    prop_assert!(unclean.is_empty(), "{:?}", unclean);
    prop_assert_eq!(&parsed.records, &records);
    for (r, s) in parsed.records[1..].iter().zip(specs) {
        prop_assert_eq!(r.id(), Some(s.id.as_str()));
        prop_assert_eq!(r.parent_id(), s.parent.as_deref());
        prop_assert_eq!(r.timestamp(), Some(s.ts.as_str()));
    }
    prop_assert_eq!(write_back(&parsed), file);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pi_records_round_trip(header_id in id(), specs in prop::collection::vec(spec(), 0..12)) {
        check(Dialect::Pi, &header_id, None, &specs)?;
    }

    #[test]
    fn omp_records_round_trip(header_id in id(), title in prop::option::of(arb::string()), specs in prop::collection::vec(spec(), 0..12)) {
        check(Dialect::Omp, &header_id, title.as_deref(), &specs)?;
    }
}
