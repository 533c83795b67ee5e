//! A naive JSON reader: recursive descent, one byte at a time, written from the
//! grammar of RFC 8259 as `JSON.parse` applies it (escaped lone surrogates are
//! accepted). It is slow and simple on purpose: the scanner of `session_model::scan`
//! (iterative, 64 bytes at a time) must find exactly its spans and its errors.

/// Why a text is not one JSON value, as the scanner's `ScanError` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The text ends inside a value (or holds only whitespace).
    Incomplete,
    /// A byte breaks the grammar before the text ends.
    Syntax,
    /// Nested deeper than [`MAX_DEPTH`]: the model gives no answer.
    TooDeep,
}

/// How deep the model follows nesting before it gives up ([`Error::TooDeep`]).
pub const MAX_DEPTH: usize = 256;

/// One value: its span in the text and its members or elements.
#[derive(Clone, Debug)]
pub struct Node {
    /// Offset of the value's first byte.
    pub start: usize,
    /// Offset after its last byte.
    pub end: usize,
    /// What it holds.
    pub children: Children,
}

/// The contents of a [`Node`].
#[derive(Clone, Debug)]
pub enum Children {
    /// A string, number or literal.
    Scalar,
    /// An array's elements.
    Elements(Vec<Node>),
    /// An object's members in text order: the raw key span (quotes included) and
    /// the value.
    Members(Vec<((usize, usize), Node)>),
}

/// Reads `text` as `JSON.parse` does: one value with optional whitespace around it.
pub fn parse_whole(text: &str) -> Result<Node, Error> {
    let mut r = Reader { b: text.as_bytes(), pos: 0 };
    r.ws();
    let node = r.value(0)?;
    r.ws();
    if r.pos < r.b.len() {
        return Err(Error::Syntax);
    }
    Ok(node)
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Result<u8, Error> {
        self.b.get(self.pos).copied().ok_or(Error::Incomplete)
    }

    fn ws(&mut self) {
        while matches!(self.b.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), Error> {
        if self.peek()? != c {
            return Err(Error::Syntax);
        }
        self.pos += 1;
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<Node, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        let start = self.pos;
        let children = match self.peek()? {
            b'"' => {
                self.string()?;
                Children::Scalar
            }
            b'-' | b'0'..=b'9' => {
                self.number()?;
                Children::Scalar
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'[' => self.array(depth)?,
            b'{' => self.object(depth)?,
            _ => return Err(Error::Syntax),
        };
        Ok(Node { start, end: self.pos, children })
    }

    fn literal(&mut self, lit: &[u8]) -> Result<Children, Error> {
        for &c in lit {
            self.expect(c)?;
        }
        Ok(Children::Scalar)
    }

    fn string(&mut self) -> Result<(), Error> {
        self.expect(b'"')?;
        loop {
            let c = self.peek()?;
            self.pos += 1;
            match c {
                b'"' => return Ok(()),
                0..0x20 => return Err(Error::Syntax),
                b'\\' => match self.peek()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.pos += 1,
                    b'u' => {
                        self.pos += 1;
                        for _ in 0..4 {
                            if !self.peek()?.is_ascii_hexdigit() {
                                return Err(Error::Syntax);
                            }
                            self.pos += 1;
                        }
                    }
                    _ => return Err(Error::Syntax),
                },
                _ => {}
            }
        }
    }

    fn digits(&mut self) -> Result<(), Error> {
        if !self.peek()?.is_ascii_digit() {
            return Err(Error::Syntax);
        }
        while self.b.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        Ok(())
    }

    fn number(&mut self) -> Result<(), Error> {
        if self.peek()? == b'-' {
            self.pos += 1;
        }
        if self.peek()? == b'0' {
            self.pos += 1;
        } else {
            self.digits()?;
        }
        if self.b.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            self.digits()?;
        }
        if matches!(self.b.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek()?, b'+' | b'-') {
                self.pos += 1;
            }
            self.digits()?;
        }
        Ok(())
    }

    fn array(&mut self, depth: usize) -> Result<Children, Error> {
        self.expect(b'[')?;
        self.ws();
        let mut elements = Vec::new();
        if self.peek()? == b']' {
            self.pos += 1;
            return Ok(Children::Elements(elements));
        }
        loop {
            elements.push(self.value(depth + 1)?);
            self.ws();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.ws();
                }
                b']' => {
                    self.pos += 1;
                    return Ok(Children::Elements(elements));
                }
                _ => return Err(Error::Syntax),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Children, Error> {
        self.expect(b'{')?;
        self.ws();
        let mut members = Vec::new();
        if self.peek()? == b'}' {
            self.pos += 1;
            return Ok(Children::Members(members));
        }
        loop {
            let key_start = self.pos;
            if self.peek()? != b'"' {
                return Err(Error::Syntax);
            }
            self.string()?;
            let key = (key_start, self.pos);
            self.ws();
            self.expect(b':')?;
            self.ws();
            members.push((key, self.value(depth + 1)?));
            self.ws();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.ws();
                }
                b'}' => {
                    self.pos += 1;
                    return Ok(Children::Members(members));
                }
                _ => return Err(Error::Syntax),
            }
        }
    }
}
