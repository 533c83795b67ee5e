//! The tape: one line validated as `JSON.parse` would, with the spans of its values
//! down to a depth recorded in the same pass, so that readers of nested fields (a
//! listing, a context) find them without walking the text again.

use std::borrow::Cow;

use super::decode::{decode_string, key_eq};
use super::scan::{NOT_RECORDED, Recorder, walk_recording};
use super::strings::{Checked, Quotes, ScanError, StringEnds};
use super::ws::skip_ws;

/// A line validated as `JSON.parse` would, with the spans of its values down to a
/// depth recorded on the way: nested members and elements are then found without
/// walking the text again.
///
/// Ids are indexes in document order; the line's own value is id 0.
///
/// ```
/// use session_model::scan::Tape;
/// let t = Tape::parse(r#" {"type":"message","message":{"role":"user","content":[{"type":"text","text":"hi"}]}} "#, 4).unwrap();
/// let message = t.get(0, "message").unwrap();
/// assert_eq!(t.raw(t.get(message, "role").unwrap()), r#""user""#);
/// let content = t.get(message, "content").unwrap();
/// let blocks: Vec<&str> = t.children(content).map(|b| t.raw(t.get(b, "text").unwrap())).collect();
/// assert_eq!(blocks, [r#""hi""#]);
/// assert!(Tape::parse("{\"a\":", 2).is_err());
/// ```
#[derive(Debug)]
pub struct Tape<'a> {
    text: &'a str,
    nodes: Vec<Node>,
    depth: usize,
}

/// One recorded value of a [`Tape`].
#[derive(Clone, Copy, Debug)]
struct Node {
    /// The member name's raw span (`start == end`: an array element or the root).
    key: (u32, u32),
    start: u32,
    end: u32,
    /// The id after this value's recorded descendants: its next sibling, if any.
    after: u32,
}

thread_local! {
    /// The node list of the last tape dropped on this thread, reused by the next one
    /// (a listing parses one tape per line).
    static SPARE_NODES: std::cell::Cell<Vec<Node>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Drop for Tape<'_> {
    fn drop(&mut self) {
        SPARE_NODES.set(std::mem::take(&mut self.nodes));
    }
}

impl Recorder for Tape<'_> {
    fn open(&mut self, parent: u32, key: Option<(usize, usize)>, start: usize, depth: usize) -> u32 {
        if depth > self.depth || (depth > 0 && parent == NOT_RECORDED) {
            return NOT_RECORDED;
        }
        let (ks, ke) = key.unwrap_or((0, 0));
        let id = self.nodes.len() as u32;
        let node = Node { key: (ks as u32, ke as u32), start: start as u32, end: start as u32, after: id + 1 };
        self.nodes.push(node);
        id
    }

    fn close(&mut self, id: u32, end: usize) {
        let after = self.nodes.len() as u32;
        if let Some(n) = self.nodes.get_mut(id as usize) {
            n.end = end as u32;
            n.after = after;
        }
    }
}

impl<'a> Tape<'a> {
    /// Validates `line` (one JSON value, surrounding whitespace allowed) and records
    /// its values down to `depth` (the value itself is depth 0, its members 1, …).
    /// Lines of 4 GiB or more are refused as [`ScanError::Syntax`].
    pub fn parse(line: &'a str, depth: usize) -> Result<Tape<'a>, ScanError> {
        Tape::parse_with(line, depth, Checked::new)
    }

    /// [`Tape::parse`] for text already validated (a span of a parsed line): string
    /// contents are not checked again. On text that is not valid JSON the spans are
    /// meaningless, but nothing panics.
    pub fn parse_validated(raw: &'a str, depth: usize) -> Result<Tape<'a>, ScanError> {
        Tape::parse_with(raw, depth, Quotes::new)
    }

    fn parse_with<S: StringEnds>(line: &'a str, depth: usize, strings: fn(usize) -> S) -> Result<Tape<'a>, ScanError> {
        if u32::try_from(line.len()).is_err() {
            return Err(ScanError::Syntax);
        }
        let b = line.as_bytes();
        let start = skip_ws(b, 0);
        let mut nodes = SPARE_NODES.take();
        nodes.clear();
        let mut tape = Tape { text: line, nodes, depth };
        let end = walk_recording(b, start, &mut strings(start), &mut tape)?;
        if skip_ws(b, end) != b.len() {
            return Err(ScanError::Syntax);
        }
        Ok(tape)
    }

    /// The raw text of value `id` (the whole value, without surrounding whitespace).
    pub fn raw(&self, id: usize) -> &'a str {
        self.nodes.get(id).map_or("", |n| &self.text[n.start as usize..n.end as usize])
    }

    /// The ids of the members or elements of value `id`, in order (none beyond the
    /// recorded depth).
    pub fn children(&self, id: usize) -> impl Iterator<Item = usize> + '_ {
        // Descendants follow their parent; each child's `after` is its next sibling.
        let end = self.nodes.get(id).map_or(id + 1, |n| n.after as usize);
        let mut next = id + 1;
        std::iter::from_fn(move || {
            if next >= end {
                return None;
            }
            let child = next;
            next = self.nodes[child].after as usize;
            Some(child)
        })
    }

    /// The member `key` of object `id` (the last one, as in JavaScript).
    pub fn get(&self, id: usize, key: &str) -> Option<usize> {
        // `children`, unrolled: lookups are the listing's inner loop.
        let end = self.nodes.get(id)?.after as usize;
        let mut child = id + 1;
        let mut found = None;
        while let Some(n) = self.nodes.get(child).filter(|_| child < end) {
            let (ks, ke) = (n.key.0 as usize, n.key.1 as usize);
            // A raw key (quotes included) is at least two bytes longer than its value.
            if ke >= ks + key.len() + 2 && key_eq(&self.text[ks..ke], key) {
                found = Some(child);
            }
            child = n.after as usize;
        }
        found
    }

    /// The decoded string value of member `key` of object `id`, if it is a string.
    pub fn get_str(&self, id: usize, key: &str) -> Option<Cow<'a, str>> {
        self.get(id, key).and_then(|c| decode_string(self.raw(c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kind::{Kind, kind};
    use crate::engine::scan::{Obj, array_elements, parse_whole};
    use crate::engine::testing::json_value;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

        /// A tape records exactly the members and elements the splitters find, at every
        /// depth it keeps, and accepts exactly what `parse_whole` accepts.
        #[test]
        fn tape_agrees_with_the_splitters(v in json_value(), depth in 0usize..6, pretty in proptest::bool::ANY, cut in proptest::num::usize::ANY) {
            let text = if pretty {
                serde_json::to_string_pretty(&v).expect("serialises")
            } else {
                crate::json::to_js_string(&v)
            };
            let tape = Tape::parse(&text, depth).expect("valid JSON");
            proptest::prop_assert_eq!(tape.raw(0), parse_whole(&text).expect("valid"));
            let unchecked = Tape::parse_validated(&text, depth).expect("valid JSON");
            let spans = |t: &Tape<'_>| t.nodes.iter().map(|n| (n.key, n.start, n.end, n.after)).collect::<Vec<_>>();
            proptest::prop_assert_eq!(spans(&unchecked), spans(&tape));
            drop(unchecked);
            // Every recorded value, with its depth, reached from the root.
            let mut todo = vec![(0usize, 0usize)];
            let mut seen = 0;
            while let Some((id, node_depth)) = todo.pop() {
                seen += 1;
                let raw = tape.raw(id);
                let children: Vec<usize> = tape.children(id).collect();
                todo.extend(children.iter().map(|&c| (c, node_depth + 1)));
                if node_depth == depth {
                    proptest::prop_assert!(children.is_empty());
                    continue;
                }
                match kind(raw) {
                    Kind::Object => {
                        let members = Obj::parse_validated(raw).expect("an object").members;
                        let got: Vec<(&str, &str)> = children.iter().map(|&c| {
                            let (ks, ke) = tape.nodes[c].key;
                            (&text[ks as usize..ke as usize], tape.raw(c))
                        }).collect();
                        proptest::prop_assert_eq!(&got, &members);
                        // Lookups find the last member of a name, as the splitter's do.
                        let obj = Obj { members };
                        for (k, _) in &got {
                            let name = decode_string(k).expect("a key");
                            proptest::prop_assert_eq!(tape.get(id, &name).map(|c| tape.raw(c)), obj.get(&name));
                        }
                        proptest::prop_assert_eq!(tape.get(id, "\u{0}missing"), None);
                    }
                    Kind::Array => {
                        let got: Vec<&str> = children.iter().map(|&c| tape.raw(c)).collect();
                        proptest::prop_assert_eq!(got, array_elements(raw));
                    }
                    _ => proptest::prop_assert!(children.is_empty()),
                }
            }
            proptest::prop_assert_eq!(seen, tape.nodes.len(), "every recorded value is reachable");
            let cut = &text[..text.floor_char_boundary(cut % (text.len() + 1))];
            proptest::prop_assert_eq!(Tape::parse(cut, depth).map(|t| t.raw(0)), parse_whole(cut));
        }
    }
}
