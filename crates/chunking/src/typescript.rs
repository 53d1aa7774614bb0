//! What the TypeScript grammar is given to parse: the source with the
//! constructs it cannot read rewritten, byte for byte the same length.
//!
//! tree-sitter-typescript 0.23 fails on two things valid TypeScript does
//! often, and its error recovery can then swallow the whole file (so the
//! file falls back to line windows):
//!
//! - modifiers of type parameters: variance, `interface Edge<out E>`,
//!   `<in out A>` (TypeScript 4.7), and `<const K>` (5.0);
//! - a generic call signature on its own line after another member of a
//!   type literal with no `;` between them, the overload style of
//!   `dual` APIs:
//!
//!   ```text
//!   export const map: {
//!     <A, B>(f: (a: A) => B): (self: Option<A>) => Option<B>
//!     <A, B>(self: Option<A>, f: (a: A) => B): Option<B>
//!   } = dual(2, …)
//!   ```
//!
//!   The grammar reads `Option<A>` + newline + `<A, B>(` as one type.
//!
//! The parse copy blanks the modifiers to spaces and turns the
//! indentation space before such a `<` into `;`. Both are ASCII for ASCII, so
//! every node's byte range and line are those of the original text, which is
//! what chunks are cut from: nothing a user sees changes.

use std::borrow::Cow;

/// The text to hand the TypeScript (`tsx = false`) or TSX grammar for
/// `text`: `text` itself when nothing needs rewriting. The separator rule is
/// not applied to TSX, where a line may start with a JSX element.
pub fn parse_input(text: &str, tsx: bool) -> Cow<'_, str> {
    let mut bytes: Option<Vec<u8>> = None;
    blank_type_parameter_modifiers(text.as_bytes(), &mut bytes);
    if !tsx {
        separate_call_signatures(text.as_bytes(), &mut bytes);
    }
    match bytes {
        // Only ASCII bytes were replaced by ASCII bytes: still UTF-8.
        Some(b) => Cow::Owned(String::from_utf8(b).unwrap_or_else(|_| text.to_owned())),
        None => Cow::Borrowed(text),
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$'
}

fn is_ident(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit()
}

fn skip_ws(src: &[u8], mut i: usize) -> usize {
    while i < src.len() && src[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// If a whole word `word` followed by whitespace starts at `i`: the index
/// after the word.
fn word_at(src: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    let end = i + word.len();
    (src.get(i..end) == Some(word) && src.get(end).is_some_and(|b| b.is_ascii_whitespace()))
        .then_some(end)
}

/// Blanks `in`, `out`, `in out` and `const` where they modify a type
/// parameter: after `<` or `,`, followed by a name and then `,`, `>`, `=` or
/// `extends`.
fn blank_type_parameter_modifiers(src: &[u8], out: &mut Option<Vec<u8>>) {
    for (i, &b) in src.iter().enumerate() {
        if b != b'<' && b != b',' {
            continue;
        }
        let start = skip_ws(src, i + 1);
        let end = if let Some(after_in) = word_at(src, start, b"in") {
            // `in T` or `in out T`
            word_at(src, skip_ws(src, after_in), b"out").unwrap_or(after_in)
        } else if let Some(end) =
            word_at(src, start, b"out").or_else(|| word_at(src, start, b"const"))
        {
            end
        } else {
            continue;
        };
        let name = skip_ws(src, end);
        if !src.get(name).copied().is_some_and(is_ident_start) {
            continue;
        }
        let mut j = name;
        while src.get(j).copied().is_some_and(is_ident) {
            j += 1;
        }
        let next = skip_ws(src, j);
        let follows = match src.get(next) {
            Some(b',' | b'>' | b'=') => true,
            _ => word_at(src, next, b"extends").is_some(),
        };
        if follows {
            let copy = out.get_or_insert_with(|| src.to_vec());
            for b in &mut copy[start..end] {
                if !b.is_ascii_whitespace() {
                    *b = b' ';
                }
            }
        }
    }
}

/// Puts `;` in the indentation before a line that starts with `<Name` or is
/// a lone `<` when the previous non-blank line that is not a line comment
/// ends a member or statement (a name, `>`, `)`, `]`, `}` or a block
/// comment's `/`).
fn separate_call_signatures(src: &[u8], out: &mut Option<Vec<u8>>) {
    let mut last_end: Option<u8> = None;
    let mut line_start = 0;
    while line_start < src.len() {
        let line_end = src[line_start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(src.len(), |p| line_start + p);
        let line = &src[line_start..line_end];
        let indent = line
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let rest = &line[indent..];
        // `<Name` or a lone `<` (type parameters one per line).
        let opens_type_parameters = rest.first() == Some(&b'<')
            && (rest.get(1).copied().is_some_and(is_ident_start)
                || rest[1..].iter().all(|b| b.is_ascii_whitespace()));
        if indent > 0
            && opens_type_parameters
            && last_end.is_some_and(|b| is_ident(b) || b")]}>/".contains(&b))
        {
            let copy = out.get_or_insert_with(|| src.to_vec());
            copy[line_start + indent - 1] = b';';
        }
        // Line comments between the members do not end one.
        if !rest.starts_with(b"//")
            && let Some(&b) = line.iter().rev().find(|b| !b.is_ascii_whitespace())
        {
            last_end = Some(b);
        }
        line_start = line_end + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifiers_are_blanked_in_type_parameters_only() {
        let text = "interface Edge<out E> {}\ntype F<in out A, in B extends C> = A\nfor (const k in obj) {}\nf(a, out, b)\nfunction g<const K extends string>() {}\n";
        let parsed = parse_input(text, false);
        assert_eq!(parsed.len(), text.len());
        assert_eq!(
            parsed,
            "interface Edge<    E> {}\ntype F<       A,    B extends C> = A\nfor (const k in obj) {}\nf(a, out, b)\nfunction g<      K extends string>() {}\n"
        );
    }

    #[test]
    fn a_generic_call_signature_after_a_member_gets_a_separator() {
        let text = "const m: {\n  <A>(f: A): Option<A>\n  // ---\n\n  <A>(self: A, f: A): B\n  <\n    A\n  >(a: A): A\n} = dual(\n  2,\n  <A>(self: A) => self\n)\n";
        let parsed = parse_input(text, false);
        assert_eq!(
            parsed,
            "const m: {\n  <A>(f: A): Option<A>\n  // ---\n\n ;<A>(self: A, f: A): B\n ;<\n    A\n  >(a: A): A\n} = dual(\n  2,\n  <A>(self: A) => self\n)\n"
        );
        // Not in TSX, where `<Name` starts an element.
        assert_eq!(parse_input(text, true), text);
    }

    #[test]
    fn text_without_either_is_borrowed() {
        let text = "export function f<T>(x: T): T {\n  return x < y ? x : y\n}\n";
        assert!(matches!(parse_input(text, false), Cow::Borrowed(_)));
    }
}
