//! The tree-sitter code chunker.
//!
//! One chunk per top-level definition, with its leading comments, attributes
//! and decorators; package and import lines join the next definition. A
//! definition over `code.max_chars` is split: a class (any container) into a
//! header chunk (declaration and leading fields) plus its members, each
//! chunked the same way one level down; anything else at statement (child)
//! boundaries into "(Part i/n)". Tiny neighbours merge: a piece under
//! `code.min_chars` joins its neighbour while the two fit `code.max_chars`,
//! except that a definition of at least [`MIN_STANDALONE_LINES`] lines
//! stands alone: no other definition (named, and not a field, comment or
//! import in the language table) shares its chunk. The same rule at every
//! level and in every language: what makes a method stand alone is its
//! size in lines, never its language's table.
//!
//! Pieces at one level always run from one unit's start to the next unit's
//! start (trailing whitespace trimmed), so separators that are not nodes of
//! their own (commas, stray semicolons, closing braces) are never lost.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tree_sitter::{Node, ParseOptions, ParseState, Parser, Tree};

use crate::languages::{CodeLanguage, LanguageSpec, NameRule};
use crate::span::{Measure, Piece, greedy_cuts, number_parts, skip_ws, split_by_size, trim_end};
use crate::typescript;
use weft_config::CodeConfig;

/// How deep classes may nest before the rest is split by size alone.
const MAX_DEPTH: usize = 24;

/// A definition of at least this many non-blank lines (of its own source,
/// from its first token to its last: annotations and decorators in, doc
/// comments before it out) stands alone: it is never merged into a sibling
/// definition, nor a sibling definition into it. Smaller pieces merge as
/// `code.min_chars` and `code.max_chars` say (see [`Ctx::merge_small`]),
/// and comments, fields, imports and class headers still join it.
///
/// Lines, not characters: the same logic takes about as many lines in
/// every language but not as many characters. A 14-line method is ~130–200
/// characters in Ruby's idiom (two-space indent, no braces) and Go's (tabs),
/// ~210–250 in Java's or Python's, so under `code.min_chars` (200) alone a
/// class of six such methods was two chunks in Ruby (five methods filed
/// under the first one's name) and one chunk per method in Java. Ten lines is a method of some substance in any language; over the
/// real corpora it changes the chunk count of Java, TypeScript, Python and
/// Rust by 1.5–3.2% (eight: up to 6% in Java, 9% in C++).
const MIN_STANDALONE_LINES: usize = 10;

/// The result of chunking a code file.
pub(crate) enum CodeOutcome {
    /// The file parsed; here are its pieces (and perhaps a warning).
    Chunked {
        pieces: Vec<Piece>,
        warning: Option<String>,
    },
    /// The file did not parse well enough; the caller falls back to lines.
    Unparsable { reason: String },
}

thread_local! {
    static PARSERS: RefCell<HashMap<CodeLanguage, Parser>> = RefCell::new(HashMap::new());
}

/// The work one parse may do, in the steps at which tree-sitter reports its
/// progress (about 100 parser operations each): a base plus so many per KiB
/// of input. Real code takes at most 20 per KiB (measured over the real
/// corpora and the eval sources, 37,000 files); some grammars' error
/// recovery is quadratic in nesting depth (10,000 nested blocks as shell:
/// over 5,000 per KiB, and minutes), which the budget turns into a fallback
/// to line windows. Counted, not timed: the same input always gives the
/// same chunks. Steps grow costly with depth, though (10,000 nested blocks
/// as Kotlin stay within the budget and took 10 s in a debug build), so the
/// time is bounded as well: [`PARSE_TIME_BASE`] plus [`PARSE_TIME_PER_MIB`]
/// per MiB, ten times what real code takes on this project's machines (an
/// 88 KB minified bundle parses in 36 ms; 4 MB, the most
/// `code.max_parse_bytes` lets through by default, in about 2 s). Only
/// pathological input reaches it, the one limit that depends on the machine.
const PARSE_BUDGET_BASE: usize = 1_000;
const PARSE_BUDGET_PER_KIB: usize = 40;
const PARSE_TIME_BASE: Duration = Duration::from_secs(1);
const PARSE_TIME_PER_MIB: Duration = Duration::from_secs(4);

/// The longest heredoc word a Ruby file may have to be parsed:
/// tree-sitter-ruby 0.23 saves a heredoc word's length in one byte and
/// asserts, aborting the process, when its saved state does not read back
/// (a word of 256 bytes or more). Kept well under that.
const RUBY_MAX_HEREDOC_WORD: usize = 200;

/// Why `text` must not reach `language`'s grammar at all: an input its
/// external scanner cannot survive (a C `assert` aborts the whole process,
/// no budget can stop it). `None` for every other input.
pub(crate) fn grammar_hazard(language: CodeLanguage, text: &str) -> Option<String> {
    match language {
        CodeLanguage::Ruby => ruby_hazard(text),
        CodeLanguage::Bash => bash_hazard(text),
        _ => None,
    }
}

/// tree-sitter-bash 0.25's scanner reads a brace range (`{1..9}`) with C's
/// `isdigit`, which indexes a table of 384 entries by the character: a
/// character over U+00FF right after `{` and its digits (or after `..` and
/// its digits) reads far outside it, and crashed the process (found by the
/// property tests: `{` and U+DFCCC).
fn bash_hazard(text: &str) -> Option<String> {
    let past_digits = |from: usize| {
        from + text.get(from..).map_or(0, |rest| {
            rest.bytes().take_while(u8::is_ascii_digit).count()
        })
    };
    let wide = |at: usize| {
        text.get(at..)
            .and_then(|rest| rest.chars().next())
            .filter(|c| u32::from(*c) > 0xFF)
    };
    for (brace, _) in text.match_indices('{') {
        let mut at = past_digits(brace + 1);
        if wide(at).is_none() && text.get(at..).is_some_and(|rest| rest.starts_with("..")) {
            at = past_digits(at + 2);
        }
        if let Some(c) = wide(at) {
            return Some(format!(
                "{c:?} (U+{:04X}) after '{{' at byte {brace}: the shell grammar cannot read a character over U+00FF there",
                u32::from(c)
            ));
        }
    }
    None
}

fn ruby_hazard(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let word_char = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    let mut at = 0;
    while let Some(found) = text.get(at..).and_then(|rest| rest.find("<<")) {
        let mut i = at + found + 2;
        at += found + 1;
        if matches!(bytes.get(i), Some(b'~' | b'-')) {
            i += 1;
        }
        let length = match bytes.get(i) {
            Some(&quote @ (b'"' | b'\'' | b'`')) => bytes[i + 1..]
                .iter()
                .position(|&b| b == quote || b == b'\n')
                .unwrap_or(bytes.len() - i - 1),
            _ => bytes[i.min(bytes.len())..]
                .iter()
                .position(|&b| !word_char(b))
                .unwrap_or(bytes.len() - i.min(bytes.len())),
        };
        if length > RUBY_MAX_HEREDOC_WORD {
            return Some(format!(
                "a heredoc word of {length} bytes at byte {}: the ruby grammar cannot hold words over 255 bytes",
                at - 1
            ));
        }
    }
    None
}

/// Parses `text` with the grammar of `language`, reusing this thread's parser.
/// TypeScript is parsed from [`typescript::parse_input`]: the same bytes but
/// for constructs its grammar cannot read, so node ranges are `text`'s.
/// `None` when the parser gives up: over its work budget (a pathological
/// input), an input the grammar cannot survive ([`grammar_hazard`]), or no
/// grammar.
pub fn parse(language: CodeLanguage, text: &str) -> Option<Tree> {
    if grammar_hazard(language, text).is_some() {
        return None;
    }
    let input = match language {
        CodeLanguage::TypeScript => typescript::parse_input(text, false),
        CodeLanguage::Tsx => typescript::parse_input(text, true),
        _ => std::borrow::Cow::Borrowed(text),
    };
    PARSERS.with(|parsers| {
        let mut parsers = parsers.borrow_mut();
        let parser = match parsers.entry(language) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let mut parser = Parser::new();
                // The grammars are compiled in; a version mismatch is a build error
                // in practice, and is reported as unparsable rather than a panic.
                if parser.set_language(&language.grammar()).is_err() {
                    return None;
                }
                e.insert(parser)
            }
        };
        let bytes = input.as_bytes();
        let budget = PARSE_BUDGET_BASE + PARSE_BUDGET_PER_KIB * (bytes.len() / 1024);
        let mut steps = 0usize;
        let time_limit =
            PARSE_TIME_BASE + PARSE_TIME_PER_MIB.mul_f64(bytes.len() as f64 / 1048576.0);
        let started = Instant::now();
        let mut within_budget = |_: &ParseState| {
            steps += 1;
            if steps > budget || started.elapsed() > time_limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let tree = parser.parse_with_options(
            &mut |offset, _| bytes.get(offset..).unwrap_or_default(),
            None,
            Some(ParseOptions::new().progress_callback(&mut within_budget)),
        );
        if tree.is_none() {
            // A cancelled parse would otherwise resume with the next input.
            parser.reset();
        }
        tree
    })
}

pub(crate) fn chunk(language: CodeLanguage, text: &str, config: &CodeConfig) -> CodeOutcome {
    if let Some(reason) = grammar_hazard(language, text) {
        return CodeOutcome::Unparsable { reason };
    }
    let Some(tree) = parse(language, text) else {
        return CodeOutcome::Unparsable {
            reason: format!(
                "the {} parser gave up (over its work or time budget: deeply nested or pathological input)",
                language.name()
            ),
        };
    };
    let root = tree.root_node();
    let mut warning = None;
    if root.has_error() {
        let error_bytes = error_bytes(root);
        let ratio = error_bytes as f64 / text.len().max(1) as f64;
        if ratio > config.max_error_ratio {
            return CodeOutcome::Unparsable {
                reason: format!(
                    "{:.0}% of the file is in {} syntax errors (limit chunking.code.max_error_ratio = {})",
                    ratio * 100.0,
                    language.name(),
                    config.max_error_ratio
                ),
            };
        }
        warning = Some(format!(
            "{} syntax errors in {:.1}% of the file; chunked around them",
            language.name(),
            ratio * 100.0
        ));
    }
    let ctx = Ctx {
        text,
        measure: Measure::new(text),
        spec: language.spec(),
        language,
        config,
    };
    let mut cursor = root.walk();
    let children: Vec<Node> = root.children(&mut cursor).collect();
    // The text without its outer whitespace, widened to every node: grammars
    // and Rust disagree on what whitespace is (U+FEFF is whitespace to the
    // JavaScript grammars, U+00A0 is a token to the Rust grammar).
    let mut range = (skip_ws(text, 0, text.len()), trim_end(text, 0, text.len()));
    if let (Some(first), Some(last)) = (children.first(), children.last()) {
        range = (
            range.0.min(first.start_byte()),
            range.1.max(last.end_byte()),
        );
    }
    if range.0 >= range.1 {
        return CodeOutcome::Chunked {
            pieces: Vec::new(),
            warning,
        };
    }
    let children = ctx.expand_transparent(&children);
    let pieces = ctx.chunk_level(&children, range, "", 0);
    CodeOutcome::Chunked {
        pieces: pieces.into_iter().map(|m| m.piece).collect(),
        warning,
    }
}

/// Bytes under ERROR and MISSING nodes (not counting nested ones twice).
fn error_bytes(root: Node<'_>) -> usize {
    let mut total = 0;
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            total += node.byte_range().len().max(1);
        } else if node.has_error() {
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
    }
    total
}

struct Ctx<'a> {
    text: &'a str,
    measure: Measure<'a>,
    spec: &'static LanguageSpec,
    language: CodeLanguage,
    config: &'a CodeConfig,
}

/// A run of sibling nodes that chunk together: leading comments, attributes
/// and imports, then the definition (absent for a trailing run of comments).
struct Unit<'t> {
    start: usize,
    def: Option<Node<'t>>,
}

/// A piece, whether it may merge with its tiny neighbours, and whether it
/// holds a definition, and one that stands alone.
struct Mergeable {
    piece: Piece,
    mergeable: bool,
    /// Holds a named unit that is not a field (nor a comment, import or
    /// class header).
    definition: bool,
    /// Holds a definition of at least [`MIN_STANDALONE_LINES`] lines: it
    /// shares its chunk with no other definition.
    standalone: bool,
}

impl<'a> Ctx<'a> {
    fn is(&self, kinds: &[&str], node: Node<'_>) -> bool {
        kinds.contains(&node.kind())
    }

    /// Groups siblings into units. Imports and attributes always join the
    /// next definition; comments join it only when nothing but a single line
    /// break separates them (a doc comment), else a run of comments is a
    /// unit of its own (a licence header, a module doc, commented-out code).
    fn group_units<'t>(&self, nodes: &[Node<'t>]) -> Vec<Unit<'t>> {
        let mut units = Vec::new();
        // The pending run: its start, its end, and whether it is only comments.
        let mut pending: Option<(usize, usize, bool)> = None;
        // Zero-width nodes (MISSING tokens of error recovery) hold no text.
        let nodes = nodes
            .iter()
            .filter(|n| (n.is_named() || n.is_error()) && n.end_byte() > n.start_byte());
        for &node in nodes {
            let is_comment = self.is(self.spec.comments, node);
            if let Some((start, end, true)) = pending
                && self.blank_line_between(end, node.start_byte())
            {
                units.push(Unit { start, def: None });
                pending = None;
            }
            if is_comment || self.is(self.spec.attach_forward, node) {
                let (start, _, only_comments) = pending.unwrap_or((node.start_byte(), 0, true));
                pending = Some((start, node.end_byte(), only_comments && is_comment));
            } else {
                let start = pending
                    .take()
                    .map_or(node.start_byte(), |(start, _, _)| start);
                units.push(Unit {
                    start,
                    def: Some(node),
                });
            }
        }
        // A trailing run of comments is a unit of its own; if tiny, it merges back.
        if let Some((start, _, _)) = pending {
            units.push(Unit { start, def: None });
        }
        units
    }

    fn blank_line_between(&self, from: usize, to: usize) -> bool {
        to > from && self.text[from..to].matches('\n').count() >= 2
    }

    /// Chunks the sibling `nodes` that span `range`, at symbol path `path`.
    fn chunk_level(
        &self,
        nodes: &[Node<'_>],
        range: (usize, usize),
        path: &str,
        depth: usize,
    ) -> Vec<Mergeable> {
        let mut units = self.group_units(nodes);
        if units.is_empty() {
            return self.size_parts(range, path, "code", None);
        }
        units[0].start = range.0;
        let mut out = Vec::new();
        for (i, unit) in units.iter().enumerate() {
            let next = units.get(i + 1).map_or(range.1, |u| u.start);
            let end = trim_end(self.text, unit.start, next);
            if end > unit.start {
                out.extend(self.chunk_unit((unit.start, end), unit.def, path, depth));
            }
        }
        self.merge_small(out)
    }

    /// Chunks one unit: whole if it fits, else split by what it is.
    fn chunk_unit(
        &self,
        range: (usize, usize),
        def: Option<Node<'_>>,
        path: &str,
        depth: usize,
    ) -> Vec<Mergeable> {
        let Some(def) = def else {
            return self.size_parts(range, path, "comment", None);
        };
        let inner = unwrap_definition(def);
        let name = self.definition_name(inner);
        let section = join_path(path, self.qualifier(inner).as_deref(), name.as_deref());
        let node_type = inner.kind().to_owned();
        if self.measure.chars(range.0, range.1) <= self.config.max_chars {
            let definition = name.is_some() && !self.is(self.spec.fields, inner);
            let standalone = definition && self.long_enough_to_stand_alone(def);
            let mut piece = Piece::new(range.0, range.1, section, node_type);
            piece.node_name = name;
            return vec![Mergeable {
                piece,
                mergeable: true,
                definition,
                standalone,
            }];
        }
        if let Some((owner, body)) = find_body(def, self.spec.bodies).filter(|_| depth < MAX_DEPTH)
        {
            if !self.is(self.spec.containers, owner) {
                return self.statement_parts(range, body, &section, &node_type, name);
            }
            if let Some(pieces) = self.members(range, owner, body, &section, name.as_deref(), depth)
            {
                return pieces;
            }
        }
        self.size_parts(range, &section, &node_type, name)
    }

    /// A container: a header (declaration and leading fields) plus members.
    fn members(
        &self,
        range: (usize, usize),
        owner: Node<'_>,
        body: Node<'_>,
        section: &str,
        name: Option<&str>,
        depth: usize,
    ) -> Option<Vec<Mergeable>> {
        let members = self.member_nodes(body);
        let units = self.group_units(&members);
        if units.is_empty() {
            return None;
        }
        let unit_end = |i: usize| units.get(i + 1).map_or(range.1, |u: &Unit<'_>| u.start);
        // Fields right after the declaration join the header while it fits.
        let mut first_member = 0;
        while first_member < units.len()
            && units[first_member]
                .def
                .is_some_and(|d| self.is(self.spec.fields, unwrap_definition(d)))
            && self.measure.chars(range.0, unit_end(first_member)) <= self.config.max_chars
        {
            first_member += 1;
        }
        let header_end = trim_end(
            self.text,
            range.0,
            units.get(first_member).map_or(range.1, |u| u.start),
        );
        let mut out = self.size_parts(
            (range.0, header_end),
            section,
            owner.kind(),
            name.map(str::to_owned),
        );
        if let Some(first) = out.first_mut() {
            first.piece.outline = self.outline(section, &units[first_member..]);
        }
        for (i, unit) in units.iter().enumerate().skip(first_member) {
            let end = trim_end(self.text, unit.start, unit_end(i));
            if end > unit.start {
                out.extend(self.chunk_unit((unit.start, end), unit.def, section, depth + 1));
            }
        }
        Some(self.merge_small(out))
    }

    /// The member nodes of a container body, with flattened sub-bodies.
    fn member_nodes<'t>(&self, body: Node<'t>) -> Vec<Node<'t>> {
        let mut out = Vec::new();
        let mut cursor = body.walk();
        for child in body.named_children(&mut cursor) {
            if self.is(self.spec.flatten, child) {
                let mut inner = child.walk();
                out.extend(child.named_children(&mut inner));
            } else {
                out.push(child);
            }
        }
        if self.spec.transparent.is_empty() {
            out
        } else {
            self.expand_transparent(&out)
        }
    }

    /// `nodes` with every transparent wrapper (namespace, `#ifdef` guard…)
    /// replaced by its contents, recursively, in source order. The
    /// wrapper's own lines (`namespace a {`, `#endif`) lie between the
    /// units and so still fall in a chunk.
    fn expand_transparent<'t>(&self, nodes: &[Node<'t>]) -> Vec<Node<'t>> {
        let mut out = Vec::with_capacity(nodes.len());
        for &node in nodes {
            self.expand_into(node, &mut out, 0);
        }
        out
    }

    fn expand_into<'t>(&self, node: Node<'t>, out: &mut Vec<Node<'t>>, depth: usize) {
        if depth >= MAX_DEPTH || !node.is_named() || !self.is(self.spec.transparent, node) {
            out.push(node);
            return;
        }
        let contents: Vec<Node<'t>> = match node.child_by_field_name("body") {
            Some(body) => {
                let mut cursor = body.walk();
                body.named_children(&mut cursor).collect()
            }
            None => {
                let mut cursor = node.walk();
                let mut contents = Vec::new();
                if cursor.goto_first_child() {
                    loop {
                        let child = cursor.node();
                        if child.is_named()
                            && matches!(cursor.field_name(), None | Some("alternative"))
                        {
                            contents.push(child);
                        }
                        if !cursor.goto_next_sibling() {
                            break;
                        }
                    }
                }
                contents
            }
        };
        if contents.is_empty() {
            out.push(node);
            return;
        }
        for child in contents {
            self.expand_into(child, out, depth + 1);
        }
    }

    /// "Members of Outer.Inner: a, b, c" for the header's embedded text.
    fn outline(&self, section: &str, units: &[Unit<'_>]) -> Option<String> {
        let names: Vec<String> = units
            .iter()
            .filter_map(|u| u.def.map(unwrap_definition))
            .filter_map(|d| self.definition_name(d))
            .take(60)
            .collect();
        (!names.is_empty()).then(|| format!("Members of {section}: {}", names.join(", ")))
    }

    /// A long function (or other node): its body's children grouped into parts.
    fn statement_parts(
        &self,
        range: (usize, usize),
        body: Node<'_>,
        section: &str,
        node_type: &str,
        name: Option<String>,
    ) -> Vec<Mergeable> {
        let mut cursor = body.walk();
        let children: Vec<Node> = body.named_children(&mut cursor).collect();
        let units = self.group_units(&children);
        let max = self.config.max_chars;
        let cuts = greedy_cuts(
            self.measure,
            range,
            units.iter().map(|u| u.start),
            max,
            self.config.min_chars,
        );
        let mut pieces = Vec::new();
        for (i, &cut) in cuts.iter().enumerate() {
            let next = cuts.get(i + 1).copied().unwrap_or(range.1);
            let end = trim_end(self.text, cut, next);
            for (s, e) in split_by_size(self.text, self.measure, cut, end, max, &[]) {
                let mut piece = Piece::new(s, e, section, node_type);
                piece.node_name = name.clone();
                pieces.push(piece);
            }
        }
        number_parts(&mut pieces);
        pieces
            .into_iter()
            .map(|piece| Mergeable {
                piece,
                mergeable: false,
                definition: false,
                standalone: false,
            })
            .collect()
    }

    /// The last resort: split by size at line starts, as "(Part i/n)".
    fn size_parts(
        &self,
        range: (usize, usize),
        section: &str,
        node_type: &str,
        name: Option<String>,
    ) -> Vec<Mergeable> {
        let ranges = split_by_size(
            self.text,
            self.measure,
            range.0,
            range.1,
            self.config.max_chars,
            &[],
        );
        let whole = ranges.len() == 1;
        let mut pieces: Vec<Piece> = ranges
            .into_iter()
            .map(|(s, e)| {
                let mut piece = Piece::new(s, e, section, node_type);
                piece.node_name = name.clone();
                piece
            })
            .collect();
        number_parts(&mut pieces);
        pieces
            .into_iter()
            .map(|piece| Mergeable {
                piece,
                mergeable: whole,
                definition: false,
                standalone: false,
            })
            .collect()
    }

    /// Whether the definition `node` has at least [`MIN_STANDALONE_LINES`]
    /// non-blank lines of its own (its leading comments not counted).
    fn long_enough_to_stand_alone(&self, node: Node<'_>) -> bool {
        self.text[node.byte_range()]
            .lines()
            .filter(|line| !line.trim().is_empty())
            .nth(MIN_STANDALONE_LINES - 1)
            .is_some()
    }

    /// Merges tiny neighbours: two pieces, either under `min_chars`, merge
    /// while the result fits `max_chars` — unless one holds a definition
    /// that stands alone ([`MIN_STANDALONE_LINES`]) and the other holds a
    /// definition. So a comment, a field or a class header joins the
    /// definition beside it and a run of one-line definitions shares a
    /// chunk, but a run of 14-line methods just under `min_chars` (Ruby's,
    /// Go's) is not merged into one chunk filed under the first method's
    /// name while the same methods in a wordier language are one chunk each.
    fn merge_small(&self, pieces: Vec<Mergeable>) -> Vec<Mergeable> {
        let (min, max) = (self.config.min_chars, self.config.max_chars);
        let mut out: Vec<Mergeable> = Vec::with_capacity(pieces.len());
        for next in pieces {
            if let Some(last) = out.last_mut() {
                let last_size = self.measure.chars(last.piece.start, last.piece.end);
                let next_size = self.measure.chars(next.piece.start, next.piece.end);
                let apart =
                    (last.standalone && next.definition) || (next.standalone && last.definition);
                if last.mergeable
                    && next.mergeable
                    && !apart
                    && (last_size < min || next_size < min)
                    && self.measure.chars(last.piece.start, next.piece.end) <= max
                {
                    let end = next.piece.end;
                    if next_size > last_size {
                        let start = last.piece.start;
                        let outline = last.piece.outline.take();
                        last.piece = next.piece;
                        last.piece.start = start;
                        last.piece.outline = last.piece.outline.take().or(outline);
                    }
                    last.piece.end = end;
                    last.definition |= next.definition;
                    last.standalone |= next.standalone;
                    continue;
                }
            }
            out.push(next);
        }
        out
    }

    /// The name of a definition node, where it has one.
    fn definition_name(&self, node: Node<'_>) -> Option<String> {
        let text = |n: Node<'_>| clean_name(&self.text[n.byte_range()]);
        if self.spec.names == NameRule::Declarators {
            if self.is(self.spec.unnamed, node) {
                return None;
            }
            let mut name = self.declared_name(node)?;
            while name.kind() == "qualified_identifier" {
                name = name.child_by_field_name("name")?;
            }
            return Some(text(name));
        }
        match node.kind() {
            // `impl<T> Display for Wrapper<T>` is named `Wrapper`.
            "impl_item" => node.child_by_field_name("type").map(|t| {
                let name = text(t);
                name.split('<').next().unwrap_or(&name).trim().to_owned()
            }),
            "lexical_declaration"
            | "variable_declaration"
            | "field_declaration"
            | "const_declaration"
            | "var_declaration"
            | "type_declaration" => {
                let mut cursor = node.walk();
                let found = node.named_children(&mut cursor).find_map(|c| {
                    c.child_by_field_name("name")
                        .or_else(|| c.child_by_field_name("declarator"))
                });
                match found {
                    Some(n) if n.kind() == "variable_declarator" => {
                        n.child_by_field_name("name").map(text)
                    }
                    Some(n) => Some(text(n)),
                    None => node.child_by_field_name("name").map(text),
                }
            }
            "expression_statement" if self.language == CodeLanguage::Python => {
                let first = node.named_child(0)?;
                (first.kind() == "assignment")
                    .then(|| first.child_by_field_name("left").map(text))
                    .flatten()
            }
            "property_identifier" => Some(text(node)),
            _ => node.child_by_field_name("name").map(text),
        }
    }

    /// The node that names a definition under [`NameRule::Declarators`]:
    /// its `name` field, else the end of its `declarator` chain, else the
    /// first child of a `name_via` node. A C++ `qualified_identifier`
    /// (`A::f`) is returned whole.
    fn declared_name<'t>(&self, node: Node<'t>) -> Option<Node<'t>> {
        let mut n = node;
        for _ in 0..16 {
            if n.kind() == "qualified_identifier" {
                return Some(n);
            }
            if let Some(name) = n.child_by_field_name("name") {
                return Some(name);
            }
            if let Some(declarator) = n.child_by_field_name("declarator") {
                n = declarator;
                continue;
            }
            // C++'s `Cell& at()`: a reference declarator holds its
            // declarator in no field.
            if n.kind().ends_with("_declarator")
                && let Some(inner) = n
                    .named_child_count()
                    .checked_sub(1)
                    .and_then(|i| n.named_child(i as u32))
            {
                n = inner;
                continue;
            }
            let mut cursor = n.walk();
            let via = n
                .named_children(&mut cursor)
                .find(|c| self.is(self.spec.name_via, *c));
            if let Some(via) = via {
                n = via;
                continue;
            }
            if n.id() == node.id() {
                return None;
            }
            if self.is(self.spec.name_via, n) {
                return n.named_child(0);
            }
            return Some(n);
        }
        None
    }

    /// The type a Go method belongs to: its section is `Type.method`. Under
    /// [`NameRule::Declarators`], the scope of a qualified name: C++'s
    /// `int A::B::f()` is `A.B.f`.
    fn qualifier(&self, node: Node<'_>) -> Option<String> {
        if self.spec.names == NameRule::Declarators {
            if self.is(self.spec.unnamed, node) {
                return None;
            }
            let mut name = self.declared_name(node)?;
            let mut scopes = Vec::new();
            while name.kind() == "qualified_identifier" {
                if let Some(scope) = name.child_by_field_name("scope") {
                    scopes.push(clean_name(&self.text[scope.byte_range()]).replace("::", "."));
                }
                name = name.child_by_field_name("name")?;
            }
            return (!scopes.is_empty()).then(|| scopes.join("."));
        }
        if self.language != CodeLanguage::Go || node.kind() != "method_declaration" {
            return None;
        }
        let receiver = node.child_by_field_name("receiver")?;
        let mut stack = vec![receiver];
        while let Some(n) = stack.pop() {
            if n.kind() == "type_identifier" {
                return Some(clean_name(&self.text[n.byte_range()]));
            }
            let mut cursor = n.walk();
            let children: Vec<Node> = n.named_children(&mut cursor).collect();
            stack.extend(children.into_iter().rev());
        }
        None
    }
}

/// Looks through wrappers (`export …`, decorators, `declare …`) to the definition.
fn unwrap_definition(mut node: Node<'_>) -> Node<'_> {
    for _ in 0..4 {
        let inner = match node.kind() {
            "export_statement" => node
                .child_by_field_name("declaration")
                .or_else(|| node.child_by_field_name("value")),
            "decorated_definition" => node.child_by_field_name("definition"),
            "ambient_declaration" => node.named_child(0),
            // C++ `template <…> class A`: the declaration is the last child.
            "template_declaration" => node
                .named_child_count()
                .checked_sub(1)
                .and_then(|i| node.named_child(i as u32)),
            _ => None,
        };
        match inner {
            Some(inner) => node = inner,
            None => break,
        }
    }
    node
}

/// Finds the node whose children a large definition splits at, and the node
/// that owns it: the `body` field, found by descending into the child that
/// holds most of the text (export wrappers, declarators, arrow functions…).
fn find_body<'t>(def: Node<'t>, bodies: &[&str]) -> Option<(Node<'t>, Node<'t>)> {
    let mut node = def;
    for _ in 0..8 {
        let body = node.child_by_field_name("body").or_else(|| {
            let mut cursor = node.walk();
            node.named_children(&mut cursor)
                .find(|c| bodies.contains(&c.kind()))
        });
        if let Some(body) = body {
            return (body.named_child_count() > 0).then_some((node, body));
        }
        let mut cursor = node.walk();
        let largest = node
            .named_children(&mut cursor)
            .max_by_key(|c| c.byte_range().len())?;
        if largest.byte_range().len() * 2 < node.byte_range().len() {
            // No single child dominates: split at this node's children.
            return (node.named_child_count() > 1).then_some((node, node));
        }
        node = largest;
    }
    (node.named_child_count() > 1).then_some((node, node))
}

fn join_path(path: &str, qualifier: Option<&str>, name: Option<&str>) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if !path.is_empty() {
        parts.push(path);
    }
    if let Some(q) = qualifier {
        parts.push(q);
    }
    if let Some(n) = name {
        parts.push(n);
    }
    parts.join(".")
}

/// Collapses whitespace and bounds the length of a name taken from source.
fn clean_name(raw: &str) -> String {
    let mut name: String = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    if name.len() > 120 {
        let mut cut = 120;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}
