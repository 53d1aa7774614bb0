//! Random and hostile input for every chunker: no panic, and the invariants
//! of `weft_core::invariants::check` hold.

use proptest::prelude::*;

mod common;
use common::{FIXTURES, HOSTILE_PIECES, NAMES, chunkers, fixture};

fn check_all(text: &str) -> Result<(), TestCaseError> {
    for chunker in chunkers() {
        for name in NAMES {
            let doc = chunker.chunk_text("prop", name, text);
            if let Err(v) = weft_core::invariants::check(doc.text(text), &doc.chunks) {
                return Err(TestCaseError::fail(format!("{name}: {v}\ninput: {text:?}")));
            }
        }
    }
    Ok(())
}

/// Text made of the characters that matter to parsers and splitters.
fn hostile_text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(HOSTILE_PIECES.to_vec());
    prop::collection::vec(pieces, 0..300).prop_map(|v| v.concat())
}

/// A fixture with random edits: deletions, duplications and insertions.
fn mutated_fixture() -> impl Strategy<Value = String> {
    (
        prop::sample::select(FIXTURES),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
                0u8..3,
                "[{}();\\n\"/*#` a-z]{0,8}",
            ),
            1..8,
        ),
    )
        .prop_map(|(name, edits)| {
            let mut text = fixture(name);
            for (a, b, op, insert) in edits {
                if text.is_empty() {
                    break;
                }
                let mut i = a.index(text.len());
                let mut j = b.index(text.len());
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                while !text.is_char_boundary(j) {
                    j -= 1;
                }
                let (i, j) = (i.min(j), i.max(j).min(i + 400));
                let j = (i..=j)
                    .rev()
                    .find(|&k| text.is_char_boundary(k))
                    .unwrap_or(i);
                match op {
                    0 => text.replace_range(i..j, ""),
                    1 => {
                        let copy = text[i..j].to_owned();
                        text.insert_str(j, &copy);
                    }
                    _ => text.insert_str(i, &insert),
                }
            }
            text
        })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

proptest! {
    // PROPTEST_CASES=N runs more (or fewer) cases than CI's 96.
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_unicode_text(text in "\\PC{0,400}") {
        check_all(&text)?;
    }

    #[test]
    fn hostile_syntax(text in hostile_text()) {
        check_all(&text)?;
    }

    #[test]
    fn mutated_real_files(text in mutated_fixture()) {
        check_all(&text)?;
    }
}

#[test]
fn pathological_shapes() {
    let cases = [
        "a".repeat(20_000),                                          // one long line
        "{".repeat(5_000),                                           // deep nesting
        format!("class A {{{}}}", "int x; ".repeat(3000)),           // huge class of fields
        format!("fn f() {{ {} }}", "g();\n".repeat(3000)),           // huge function
        "\n".repeat(10_000),                                         // only newlines
        "é".repeat(5_000),                                           // multibyte, no whitespace
        "# h\n".repeat(2_000),                                       // only headings
        format!("```\n{}", "code\n".repeat(2000)),                   // unclosed fence
        "/*".repeat(3000),                                           // unclosed comments
        "---\ntitle: x\n".to_owned(),                                // unclosed front matter
        "Title\n=====\n".repeat(2_000),                              // only reST titles
        format!(".. note::\n\n{}", "   x\n".repeat(3000)),           // one huge directive
        format!("= T\n\n----\n{}", "code\n".repeat(2000)),           // unclosed listing block
        "#ifdef A\n".repeat(3_000),                                  // deep unclosed #ifdef
        format!("namespace a {{{}}}", "namespace b { ".repeat(500)), // nested namespaces
    ];
    for text in cases {
        check_all(&text)
            .unwrap_or_else(|e| panic!("{}", &e.to_string()[..e.to_string().len().min(500)]));
    }
}

#[test]
fn characters_grammars_skip_as_whitespace_stay_in_chunks() {
    // Found by `hostile_syntax`: the JavaScript grammars skip U+FEFF as
    // whitespace; Rust does not, so it must lie in a chunk.
    for text in [
        "*]fn \t;}}]漢字\n\n\u{a0}",
        "let a = 1;\n\u{feff}",
        "\u{feff}let a = 1;",
        "f()\u{200b}\n",
        "\u{2060}class A {}\u{2060}",
    ] {
        check_all(text).unwrap();
    }
}

#[test]
fn zero_width_nodes_make_no_empty_chunks() {
    // Found by `hostile_syntax` at 3000 cases: error recovery inserts
    // zero-width MISSING nodes, which must not become units of their own.
    check_all("##func class {---\n\"func func /**class {{\"\n\n\u{a0}[fn \\{{function import {{---\n{##func {---\n]#/**{---\npackage ").unwrap();
}
