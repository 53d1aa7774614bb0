//! Documented definitions of a code file, read with the chunker's
//! tree-sitter grammars: each function or method with the doc comment that
//! belongs to it, and every doc comment's bytes (blanked in the hard copy).

use tree_sitter::Node;
use weft_chunking::CodeLanguage;

use super::text::DocStyle;

/// A function-like definition with a doc comment.
#[derive(Debug, Clone)]
pub(crate) struct Documented {
    /// Its name.
    pub name: String,
    /// The names of the types or modules around it, `.`-joined.
    pub owner: String,
    /// What it is (`method`, `function`, `const_fn`).
    pub kind: &'static str,
    /// Its lines without the doc comment (1-based, inclusive).
    pub lines: (u32, u32),
    /// The doc comment's text and syntax.
    pub doc: String,
    /// How the doc comment is written.
    pub style: DocStyle,
    /// Statements of its body, the docstring left out; `None`: no body (an
    /// abstract or interface method, an overload signature).
    pub statements: Option<usize>,
    /// Its text with whitespace and doc comments left out, to find copies.
    pub normalised: String,
}

/// What a file holds.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    /// Documented definitions, in source order.
    pub documented: Vec<Documented>,
    /// Definitions seen (with or without a doc comment).
    pub definitions: usize,
    /// Bytes of every doc comment: what the hard copy blanks.
    pub doc_spans: Vec<(usize, usize)>,
}

/// Node kinds that are functions or methods, by language, with the kind
/// recorded on a query.
fn function_kind(language: CodeLanguage, node: Node<'_>) -> Option<&'static str> {
    use CodeLanguage as L;
    let k = node.kind();
    Some(match (language, k) {
        (L::Java | L::CSharp, "method_declaration") => "method",
        (L::Java | L::CSharp, "constructor_declaration") => "constructor",
        (L::TypeScript | L::Tsx | L::JavaScript, "function_declaration")
        | (L::TypeScript | L::Tsx | L::JavaScript, "generator_function_declaration") => "function",
        (L::TypeScript | L::Tsx | L::JavaScript, "method_definition") => "method",
        (L::Python, "function_definition") => "function",
        (L::Rust, "function_item") => "function",
        (L::Go, "function_declaration") => "function",
        (L::Go, "method_declaration") => "method",
        (L::Kotlin, "function_declaration") => "function",
        (L::C | L::Cpp, "function_definition") => "function",
        (L::Php, "function_definition") => "function",
        (L::Php, "method_declaration") => "method",
        (L::Ruby, "method" | "singleton_method") => "method",
        _ => return None,
    })
}

/// Whether `node` is `const f = (…) => …` (or a `function` expression) at
/// the top of a module, a namespace or a block (`const_fn`), or an exported
/// `const` whose value is a call or whose type is a function's
/// (`export const map = dual(…)`: `const_api`). Gives the kind, the name
/// and the value.
fn const_function<'t>(
    language: CodeLanguage,
    text: &str,
    node: Node<'t>,
) -> Option<(&'static str, Node<'t>, Node<'t>)> {
    if !matches!(
        language,
        CodeLanguage::TypeScript | CodeLanguage::Tsx | CodeLanguage::JavaScript
    ) || !matches!(node.kind(), "lexical_declaration" | "variable_declaration")
        || !node.parent().is_some_and(|p| {
            matches!(
                p.kind(),
                "program" | "export_statement" | "statement_block" | "internal_module"
            )
        })
    {
        return None;
    }
    let mut cursor = node.walk();
    let declarators: Vec<Node<'t>> = node
        .named_children(&mut cursor)
        .filter(|c| c.kind() == "variable_declarator")
        .collect();
    let [declarator] = declarators.as_slice() else {
        return None;
    };
    let name = declarator.child_by_field_name("name")?;
    let value = declarator.child_by_field_name("value")?;
    if name.kind() != "identifier" {
        return None;
    }
    if matches!(
        value.kind(),
        "arrow_function" | "function_expression" | "function"
    ) {
        return Some(("const_fn", name, value));
    }
    let exported = node
        .parent()
        .is_some_and(|p| p.kind() == "export_statement");
    // A type annotation that reads as a signature: `const f: (a: A) => B`.
    let function_type = declarator
        .child_by_field_name("type")
        .and_then(|t| text.get(t.byte_range()))
        .is_some_and(|t| t.contains("=>") || t.contains('('));
    (function_type || (exported && value.kind() == "call_expression")).then_some((
        "const_api",
        name,
        value,
    ))
}

/// Kinds that may stand between a doc comment and its definition.
const BETWEEN: &[&str] = &[
    "decorator",
    "annotation",
    "marker_annotation",
    "attribute_item",
    "attribute_list",
    "attribute",
];

fn is_comment(node: Node<'_>) -> bool {
    node.kind().contains("comment")
}

/// The doc style of a comment in `language`, if it is a doc comment.
fn doc_style(language: CodeLanguage, text: &str) -> Option<DocStyle> {
    use CodeLanguage as L;
    let t = text.trim_start();
    if t.starts_with("/**") && !t.starts_with("/**/") && !matches!(language, L::Python | L::Ruby) {
        return Some(DocStyle::Block);
    }
    let lines_with = |marker: &str, not: &str| {
        t.lines().all(|l| {
            let l = l.trim_start();
            l.starts_with(marker) && (not.is_empty() || !l.starts_with(not))
        })
    };
    match language {
        L::Rust | L::CSharp | L::C | L::Cpp if lines_with("///", "////") => Some(DocStyle::Lines),
        L::Go if lines_with("//", "") => Some(DocStyle::Lines),
        L::Ruby if lines_with("#", "#!") => Some(DocStyle::Lines),
        _ => None,
    }
}

/// The doc comment attached to `anchor`: the comments right above it (no
/// more than one blank line away; decorators and attributes may stand
/// between), joined, with their bytes.
fn attached_doc(
    language: CodeLanguage,
    text: &str,
    anchor: Node<'_>,
) -> Option<(String, DocStyle, (usize, usize))> {
    let mut prev = anchor.prev_sibling();
    while let Some(p) = prev
        && BETWEEN.contains(&p.kind())
    {
        prev = p.prev_sibling();
    }
    let nearest = prev.filter(|p| is_comment(*p))?;
    if anchor.start_position().row > nearest.end_position().row + 2 {
        return None;
    }
    let nearest_text = text.get(nearest.byte_range())?;
    let style = doc_style(language, nearest_text)?;
    let mut first = nearest;
    if style == DocStyle::Lines {
        // A run of line comments, each on the line after the one before.
        while let Some(p) = first.prev_sibling()
            && is_comment(p)
            && p.end_position().row + 1 >= first.start_position().row
            && text
                .get(p.byte_range())
                .and_then(|t| doc_style(language, t))
                == Some(DocStyle::Lines)
        {
            first = p;
        }
    }
    let span = (first.start_byte(), nearest.end_byte());
    Some((text.get(span.0..span.1)?.to_owned(), style, span))
}

/// A Python definition's docstring: the string that is its body's first
/// statement.
fn docstring<'t>(node: Node<'t>) -> Option<Node<'t>> {
    let body = node.child_by_field_name("body")?;
    let first = body.named_child(0)?;
    if first.kind() != "expression_statement" {
        return None;
    }
    let string = first.named_child(0)?;
    (string.kind() == "string" && first.named_child_count() == 1).then_some(first)
}

/// The names of the types, impls and modules around `node`.
fn owner(text: &str, node: Node<'_>) -> String {
    let mut names = Vec::new();
    let mut p = node.parent();
    while let Some(n) = p {
        let k = n.kind();
        let container = k.contains("class")
            || k.contains("interface")
            || k.contains("enum")
            || k.contains("struct")
            || k.contains("trait")
            || k.contains("record")
            || k.contains("object_declaration")
            || k == "impl_item"
            || k == "module"
            || k == "internal_module"
            || k == "namespace_declaration";
        if container
            && !k.ends_with("body")
            && let Some(name) = n
                .child_by_field_name("name")
                .or_else(|| n.child_by_field_name("type"))
            && let Some(t) = text.get(name.byte_range())
        {
            names.push(t.to_owned());
        }
        p = n.parent();
    }
    names.reverse();
    names.join(".")
}

/// Statements of a block body (the docstring left out with `skip_first`);
/// an expression body (`x => x.id`, a `const_api`'s call) counts as many,
/// so that it is never taken for a trivial accessor.
fn statements(body: Node<'_>, skip_first: bool) -> usize {
    let k = body.kind();
    if !(k.contains("block") || k.contains("body") || k == "compound_statement") {
        return usize::MAX;
    }
    let mut cursor = body.walk();
    body.named_children(&mut cursor)
        .filter(|c| !is_comment(*c))
        .count()
        .saturating_sub(usize::from(skip_first))
}

/// Whitespace and the given spans left out of `text[range]`.
fn normalise(text: &str, range: (usize, usize), skip: &[(usize, usize)]) -> String {
    let mut out = String::new();
    for (i, c) in text.get(range.0..range.1).unwrap_or("").char_indices() {
        let at = range.0 + i;
        if !c.is_whitespace() && !skip.iter().any(|&(s, e)| s <= at && at < e) {
            out.push(c);
        }
    }
    out
}

/// Reads `text` as `language` and lists its documented definitions and
/// every doc comment. `None` when the grammar cannot read it.
pub(crate) fn scan(language: CodeLanguage, text: &str) -> Option<Scanned> {
    let tree = weft_chunking::parse(language, text)?;
    let mut out = Scanned::default();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
        // Every doc comment goes from the hard copy, attached or not.
        if is_comment(node)
            && let Some(t) = text.get(node.byte_range())
            && match doc_style(language, t) {
                Some(DocStyle::Block) => true,
                // `///` is doc syntax in these; a Go or Ruby comment is a
                // doc comment only where it is attached.
                Some(DocStyle::Lines) => matches!(
                    language,
                    CodeLanguage::Rust | CodeLanguage::CSharp | CodeLanguage::C | CodeLanguage::Cpp
                ),
                _ => false,
            }
        {
            out.doc_spans.push((node.start_byte(), node.end_byte()));
        }
        let (kind, name_node, body, decl) = if let Some(kind) = function_kind(language, node) {
            let name = node.child_by_field_name("name");
            (kind, name, node.child_by_field_name("body"), node)
        } else if let Some((kind, name, value)) = const_function(language, text, node) {
            let body = match kind {
                "const_fn" => value.child_by_field_name("body"),
                _ => Some(value),
            };
            (kind, Some(name), body, node)
        } else {
            continue;
        };
        out.definitions += 1;
        // Exported or decorated: the doc comment sits above the wrapper.
        let anchor = match node.parent() {
            Some(p) if matches!(p.kind(), "export_statement" | "decorated_definition") => p,
            _ => decl,
        };
        let name = match name_node.and_then(|n| text.get(n.byte_range())) {
            Some(n) => n.to_owned(),
            None if kind == "constructor" => "<init>".to_owned(),
            None => continue,
        };
        let (doc, style, doc_span, skip_first) = if language == CodeLanguage::Python {
            let Some(ds) = docstring(node) else { continue };
            let Some(t) = text.get(ds.byte_range()) else {
                continue;
            };
            (
                t.to_owned(),
                DocStyle::Docstring,
                (ds.start_byte(), ds.end_byte()),
                true,
            )
        } else {
            let Some((doc, style, span)) = attached_doc(language, text, anchor) else {
                continue;
            };
            (doc, style, span, false)
        };
        if style != DocStyle::Block {
            out.doc_spans.push(doc_span);
        }
        let start = anchor.start_position().row as u32 + 1;
        let end = anchor.end_position().row as u32 + 1;
        // A Ruby or Go body is the node's own children.
        let statements = match body {
            Some(b) => Some(statements(b, skip_first)),
            None if language == CodeLanguage::Ruby => Some(statements(node, false)),
            None => None,
        };
        out.documented.push(Documented {
            name,
            owner: owner(text, node),
            kind,
            lines: (start, end),
            doc,
            style,
            statements,
            normalised: normalise(text, (anchor.start_byte(), anchor.end_byte()), &[doc_span]),
        });
    }
    out.doc_spans.sort_unstable();
    out.doc_spans.dedup();
    Some(out)
}

/// `text` with the bytes of `spans` made spaces (line breaks kept, so
/// every line keeps its number).
pub(crate) fn blank(text: &str, spans: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut spans = spans.iter().peekable();
    for (i, c) in text.char_indices() {
        while spans.peek().is_some_and(|&&(_, e)| e <= i) {
            spans.next();
        }
        let inside = spans.peek().is_some_and(|&&(s, e)| s <= i && i < e);
        if inside && c != '\n' && c != '\r' {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_methods_with_their_javadoc() {
        let text = "package a;\n\nclass Sum {\n  /**\n   * Adds two numbers without overflow.\n   */\n  @Override\n  int add(int x, int y) {\n    return Math.addExact(x, y);\n  }\n\n  int bare() { return 1; }\n}\n";
        let s = scan(CodeLanguage::Java, text).unwrap();
        assert_eq!(s.definitions, 2);
        assert_eq!(s.documented.len(), 1);
        let d = &s.documented[0];
        assert_eq!((d.name.as_str(), d.owner.as_str()), ("add", "Sum"));
        assert_eq!(d.lines, (7, 10));
        assert_eq!(d.statements, Some(1));
        let hard = blank(text, &s.doc_spans);
        assert_eq!(hard.lines().count(), text.lines().count());
        assert!(!hard.contains("overflow") && hard.contains("addExact"));
    }

    #[test]
    fn rust_go_python_and_typescript_docs() {
        let rust = "/// Parses a header line.\n#[inline]\npub fn parse(x: &str) -> u8 {\n    x.len() as u8\n}\n\n// plain\nfn other() {}\n";
        let s = scan(CodeLanguage::Rust, rust).unwrap();
        assert_eq!(s.documented.len(), 1);
        assert_eq!(s.documented[0].lines, (3, 5), "attributes are siblings");
        assert!(!blank(rust, &s.doc_spans).contains("header"));
        assert!(blank(rust, &s.doc_spans).contains("// plain"));

        let go = "package a\n\n// Sum adds the numbers\n// of a slice.\nfunc Sum(xs []int) int {\n\treturn 0\n}\n";
        let s = scan(CodeLanguage::Go, go).unwrap();
        assert_eq!(s.documented.len(), 1);
        assert!(s.documented[0].doc.contains("of a slice"));

        let py = "class A:\n    def run(self, x):\n        \"\"\"Run the job now.\"\"\"\n        return x\n";
        let s = scan(CodeLanguage::Python, py).unwrap();
        assert_eq!(s.documented.len(), 1);
        assert_eq!(s.documented[0].owner, "A");
        assert_eq!(s.documented[0].statements, Some(1));
        assert!(!blank(py, &s.doc_spans).contains("Run the job"));

        let ts = "/** Formats a date for humans. */\nexport const format = (d: Date): string => {\n  return d.toISOString();\n};\n";
        let s = scan(CodeLanguage::TypeScript, ts).unwrap();
        assert_eq!(s.documented.len(), 1);
        assert_eq!(s.documented[0].kind, "const_fn");
        assert_eq!(s.documented[0].lines, (2, 4));
    }
}
