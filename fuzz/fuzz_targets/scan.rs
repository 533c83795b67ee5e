//! Fuzzes the validating JSON scanner (`session_model::scan`) on any text (bytes that
//! are not UTF-8 are decoded as the loader decodes them, invalid sequences as U+FFFD).
//!
//! Asserts, on every input:
//! * `parse_whole` accepts exactly what serde_json accepts as one value when it skips
//!   it (serde_json's skipping allows escaped lone surrogates, as `JSON.parse` does),
//!   with the same raw span; and it fails with `Incomplete` exactly when the naive
//!   reader of `session_fuzz::model` runs out of text, `Syntax` when it meets a bad byte;
//! * `skip_value`, `Tape::parse` at several depths, `Obj::parse_line` and, for
//!   objects, `Obj::parse` accept and reject the same texts;
//! * on valid text, every value a `Tape` records has the model's span, its children
//!   are the model's members or elements (none below the recorded depth),
//!   `Tape::get` and `Obj::get` find the last member of a decoded name,
//!   `object_fields` finds the same members and end, `array_elements` the model's
//!   elements, `skip_value` every value's end, and the unchecked variants
//!   (`Tape::parse_validated`, `Obj::parse_validated`) find the same spans;
//! * decoded strings equal serde_json's decoding, numbers serde_json's `f64`;
//! * on any text, the unchecked variants and `array_elements` stay in bounds
//!   (do not panic) and give spans inside the text;
//! * any bytes read as a stored parse (`session_model::stored::decode`) are refused or
//!   give records whose fields and texts read without a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;
use session_fuzz::model::{self, Children, Node};
use session_fuzz::offset_in;
use session_model::scan::{self, Obj, ScanError, Tape};

/// The recorded depths tried on each input.
const DEPTHS: [usize; 4] = [0, 1, 3, 64];

fuzz_target!(|data: &[u8]| {
    let text = session_model::decode_utf8_lossy(data);
    check(&text);
    // Any bytes as a stored parse: refused or read, never a panic, and what is read
    // answers its skeleton and (through bodies of the same bytes) its texts.
    let bodies = std::sync::Arc::new(session_model::Bodies::new(Box::new(data.to_vec())));
    if let Some(p) = session_model::stored::decode(data, &bodies) {
        for r in &p.records {
            let _ = (r.id(), r.parent(), r.timestamp(), r.message_role(), r.load(), r.text());
        }
    }
});

fn check(text: &str) {
    let b = text.as_bytes();
    let start = scan::skip_ws(b, 0);
    let got = scan::parse_whole(text);

    // serde_json as the accept/reject and span oracle.
    let serde = serde_json::from_str::<&RawValue>(text).map(RawValue::get);
    assert_eq!(got.ok(), serde.as_ref().ok().copied(), "parse_whole and serde_json disagree on {text:?}: {serde:?}");

    // The naive reader as the error-kind and span oracle.
    let model = model::parse_whole(text);
    match (&got, &model) {
        (_, Err(model::Error::TooDeep)) => {}
        (Ok(raw), Ok(node)) => {
            assert_eq!((offset_in(text, raw), offset_in(text, raw) + raw.len()), (node.start, node.end))
        }
        (Err(ScanError::Incomplete), Err(model::Error::Incomplete))
        | (Err(ScanError::Syntax), Err(model::Error::Syntax)) => {}
        (got, model) => panic!("parse_whole gives {got:?}, the model {model:?}, on {text:?}"),
    }

    // Every entry point agrees on what is valid.
    let whole_end = got.ok().map(|raw| offset_in(text, raw) + raw.len());
    let skipped = scan::skip_value(b, start);
    match whole_end {
        Some(end) => assert_eq!(skipped, Ok(end), "skip_value on valid {text:?}"),
        None => {
            if let Ok(end) = skipped {
                assert!(scan::skip_ws(b, end) != b.len(), "skip_value accepts invalid {text:?}");
            }
        }
    }
    for depth in DEPTHS {
        let tape = Tape::parse(text, depth);
        assert_eq!(tape.as_ref().map(|t| t.raw(0)).ok(), got.ok(), "Tape::parse({depth}) on {text:?}");
        if let (Err(t), Err(g)) = (&tape, &got) {
            assert_eq!(t, g, "Tape::parse({depth}) and parse_whole fail differently on {text:?}");
        }
    }
    let line = Obj::parse_line(text);
    assert_eq!(line.as_ref().map(|(_, raw)| *raw).ok(), got.ok(), "Obj::parse_line on {text:?}");
    if let Ok((obj, raw)) = &line {
        assert_eq!(obj.is_some(), raw.starts_with('{'), "Obj::parse_line splits exactly the objects");
    }
    if b.get(start) == Some(&b'{') {
        // A raw object: its span from the `{` on (trailing whitespace allowed).
        assert_eq!(Obj::parse(&text[start..]).is_some(), got.is_ok(), "Obj::parse on {text:?}");
    }

    // The unchecked variants never panic and stay inside the text, whatever it is.
    if let Ok(t) = Tape::parse_validated(text, 3) {
        walk_in_bounds(text, &t, 0, 0);
    }
    if let Some(o) = Obj::parse_validated(&text[start..]) {
        let _ = o.get("type");
        let _ = o.get_str("id");
    }
    for element in scan::array_elements(&text[start..]) {
        let _ = offset_in(text, element);
    }

    let (Ok(raw), Ok(node)) = (got, model) else { return };
    let base = offset_in(text, raw);
    assert_eq!(base, node.start);
    for depth in DEPTHS {
        let tape = Tape::parse(text, depth).expect("valid above");
        check_node(text, &tape, 0, &node, 0, depth);
        let unchecked = Tape::parse_validated(text, depth).expect("valid text parses unchecked");
        check_node(text, &unchecked, 0, &node, 0, depth);
    }
    check_values(text, &node, 0);
}

/// Checks the tape's value `id` (at `depth`, recorded to `max`) against the model's.
fn check_node(text: &str, tape: &Tape<'_>, id: usize, node: &Node, depth: usize, max: usize) {
    let raw = tape.raw(id);
    assert_eq!(
        (offset_in(text, raw), offset_in(text, raw) + raw.len()),
        (node.start, node.end),
        "tape value {id} at depth {depth} has the wrong span in {text:?}"
    );
    let children: Vec<usize> = tape.children(id).collect();
    if depth == max {
        assert!(children.is_empty(), "a tape recorded below its depth {max}");
        return;
    }
    match &node.children {
        Children::Scalar => assert!(children.is_empty(), "a scalar has children on the tape"),
        Children::Elements(elements) => {
            assert_eq!(children.len(), elements.len(), "element count of {raw:?}");
            for (&c, e) in children.iter().zip(elements) {
                check_node(text, tape, c, e, depth + 1, max);
            }
        }
        Children::Members(members) => {
            assert_eq!(children.len(), members.len(), "member count of {raw:?}");
            for (&c, (_, v)) in children.iter().zip(members) {
                check_node(text, tape, c, v, depth + 1, max);
            }
            for ((ks, ke), _) in members {
                let name = scan::decode_string(&text[*ks..*ke]).expect("a key is a string");
                let last = last_member(text, members, &name).expect("the name is a member");
                let found = tape.get(id, &name).map(|c| offset_in(text, tape.raw(c)));
                assert_eq!(found, Some(last.start), "Tape::get({name:?}) in {raw:?}");
                assert_eq!(tape.get_str(id, &name), scan::decode_string(&text[last.start..last.end]));
            }
            let absent = format!("{}\u{0}absent", members.len());
            if last_member(text, members, &absent).is_none() {
                assert_eq!(tape.get(id, &absent), None);
            }
        }
    }
}

/// Returns the value of the last member of `members` whose decoded name is `name`.
fn last_member<'n>(text: &str, members: &'n [((usize, usize), Node)], name: &str) -> Option<&'n Node> {
    members
        .iter()
        .rev()
        .find(|((ks, ke), _)| scan::decode_string(&text[*ks..*ke]).as_deref() == Some(name))
        .map(|(_, v)| v)
}

/// Checks the splitters and decoders on `node` and its descendants (to a few levels).
fn check_values(text: &str, node: &Node, depth: usize) {
    let raw = &text[node.start..node.end];
    assert_eq!(scan::skip_value(text.as_bytes(), node.start), Ok(node.end), "skip_value of {raw:?}");
    let _ = (scan::kind(raw), scan::truthy(raw), scan::js_join_string(raw));
    match &node.children {
        Children::Scalar if raw.starts_with('"') => {
            let decoded = scan::decode_string(raw).expect("a string decodes");
            if let Ok(s) = serde_json::from_str::<String>(raw) {
                assert_eq!(decoded, s, "decode_string of {raw:?}");
            }
            let mut pushed = String::new();
            assert!(scan::push_decoded(raw, &mut pushed));
            assert_eq!(pushed, decoded);
        }
        Children::Scalar => {
            if let Ok(f) = serde_json::from_str::<f64>(raw) {
                assert_eq!(scan::number(raw), Some(f), "number of {raw:?}");
            }
        }
        Children::Elements(elements) => {
            let got: Vec<(usize, usize)> =
                scan::array_elements(raw).iter().map(|e| (offset_in(text, e), offset_in(text, e) + e.len())).collect();
            let want: Vec<(usize, usize)> = elements.iter().map(|e| (e.start, e.end)).collect();
            assert_eq!(got, want, "array_elements of {raw:?}");
        }
        Children::Members(members) => {
            let obj = Obj::parse(raw).expect("a valid object splits");
            let unchecked = Obj::parse_validated(raw).expect("a valid object splits unchecked");
            let names: Vec<String> = members
                .iter()
                .map(|((ks, ke), _)| scan::decode_string(&text[*ks..*ke]).expect("a key").into_owned())
                .collect();
            for name in &names {
                let last = last_member(text, members, name).map(|v| v.start);
                assert_eq!(obj.get(name).map(|v| offset_in(text, v)), last, "Obj::get({name:?}) in {raw:?}");
                assert_eq!(unchecked.get(name).map(|v| offset_in(text, v)), last, "parse_validated get({name:?})");
            }
            // Three distinct names: members, or names no member has.
            let absent = ["\u{0}a", "\u{0}b", "\u{0}c"];
            let key = |i: usize| names.get(i).filter(|n| !names[..i].contains(n)).map_or(absent[i], String::as_str);
            let (fields, end) = scan::object_fields(text, node.start, [key(0), key(1), key(2)]).expect("valid object");
            assert_eq!(end, node.end, "object_fields end of {raw:?}");
            for (i, field) in fields.iter().enumerate() {
                let last = last_member(text, members, key(i)).map(|v| v.start);
                assert_eq!(field.map(|v| offset_in(text, v)), last, "object_fields({:?}) in {raw:?}", key(i));
            }
        }
    }
    if depth < 3 {
        match &node.children {
            Children::Scalar => {}
            Children::Elements(elements) => elements.iter().for_each(|e| check_values(text, e, depth + 1)),
            Children::Members(members) => members.iter().for_each(|(_, v)| check_values(text, v, depth + 1)),
        }
    }
}

/// Visits every value of a tape of unchecked text: each span lies inside the text.
fn walk_in_bounds(text: &str, tape: &Tape<'_>, id: usize, depth: usize) {
    let _ = offset_in(text, tape.raw(id));
    let _ = tape.get(id, "type");
    if depth < 8 {
        for c in tape.children(id) {
            walk_in_bounds(text, tape, c, depth + 1);
        }
    }
}
