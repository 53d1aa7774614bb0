//! A tokenizer for code and prose: identifiers are split at camelCase,
//! snake_case and dots, and the whole identifier is kept too, so `tryAcquire`
//! is found by "acquire", "try acquire" and "tryacquire".

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// The name it is registered under.
pub const CODE_TOKENIZER: &str = "weft_code";

/// Tokens longer than this (in bytes) are dropped: hashes, base64, minified code.
const MAX_TOKEN_BYTES: usize = 64;

/// The code-aware tokenizer. Lowercases everything.
#[derive(Debug, Clone, Default)]
pub struct CodeTokenizer {
    tokens: Vec<Token>,
}

/// The tokens of one text.
pub struct CodeTokenStream<'a> {
    tokens: &'a mut [Token],
    next: usize,
}

impl Tokenizer for CodeTokenizer {
    type TokenStream<'a> = CodeTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> CodeTokenStream<'a> {
        self.tokens.clear();
        tokenize(text, &mut self.tokens);
        CodeTokenStream {
            tokens: &mut self.tokens,
            next: 0,
        }
    }
}

impl TokenStream for CodeTokenStream<'_> {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

fn tokenize(text: &str, out: &mut Vec<Token>) {
    let mut position = 0;
    let mut word_start: Option<usize> = None;
    for (i, ch) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        let in_word = ch.is_alphanumeric() || ch == '_' || ch == '.' || ch == '$';
        match (in_word, word_start) {
            (true, None) => word_start = Some(i),
            (false, Some(start)) => {
                emit_word(text, start, i, &mut position, out);
                word_start = None;
            }
            _ => {}
        }
    }
}

/// Emits the parts of one word (an identifier or dotted path), then the
/// whole word if it had more than one part.
fn emit_word(text: &str, start: usize, end: usize, position: &mut usize, out: &mut Vec<Token>) {
    let word = text[start..end].trim_matches(|c| c == '.' || c == '_' || c == '$');
    if word.is_empty() {
        return;
    }
    let start = start + text[start..end].find(word).unwrap_or(0);
    let first_position = *position;
    let mut parts = 0;
    for (s, e) in split_identifier(word) {
        push(out, &word[s..e], start + s, start + e, *position);
        *position += 1;
        parts += 1;
    }
    if parts > 1 {
        let whole: String = word.chars().filter(|c| c.is_alphanumeric()).collect();
        push(out, &whole, start, start + word.len(), first_position);
    }
}

fn push(out: &mut Vec<Token>, text: &str, from: usize, to: usize, position: usize) {
    if text.is_empty() || text.len() > MAX_TOKEN_BYTES {
        return;
    }
    out.push(Token {
        offset_from: from,
        offset_to: to,
        position,
        text: text.to_lowercase(),
        position_length: 1,
    });
}

/// Byte ranges of the parts of an identifier: split at `_`, `.`, `$`, at
/// lower→upper (`parseHttp`), and before the last capital of a run followed by
/// a lowercase letter (`HTTPServer` → `HTTP`, `Server`). Digits stay with
/// what precedes them (`utf8`, `sha256`).
fn split_identifier(word: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut parts = Vec::new();
    let mut start: Option<usize> = None;
    for (k, &(i, ch)) in chars.iter().enumerate() {
        if ch == '_' || ch == '.' || ch == '$' {
            if let Some(s) = start.take() {
                parts.push((s, i));
            }
            continue;
        }
        let Some(s) = start else {
            start = Some(i);
            continue;
        };
        let prev = chars[k - 1].1;
        let next = chars.get(k + 1).map(|&(_, c)| c);
        let boundary = (prev.is_lowercase() || prev.is_ascii_digit()) && ch.is_uppercase()
            || prev.is_uppercase() && ch.is_uppercase() && next.is_some_and(char::is_lowercase);
        if boundary {
            parts.push((s, i));
            start = Some(i);
        }
    }
    if let Some(s) = start {
        parts.push((s, word.len()));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(input: &str) -> Vec<String> {
        let mut tokenizer = CodeTokenizer::default();
        let mut stream = tokenizer.token_stream(input);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    #[test]
    fn splits_identifiers_and_keeps_them_whole() {
        assert_eq!(texts("tryAcquire"), vec!["try", "acquire", "tryacquire"]);
        assert_eq!(texts("HTTPServer"), vec!["http", "server", "httpserver"]);
        assert_eq!(
            texts("max_file_bytes"),
            vec!["max", "file", "bytes", "maxfilebytes"]
        );
        assert_eq!(
            texts("java.util.Map"),
            vec!["java", "util", "map", "javautilmap"]
        );
        assert_eq!(
            texts("utf8 sha256Hex"),
            vec!["utf8", "sha256", "hex", "sha256hex"]
        );
    }

    #[test]
    fn prose_is_lowercased_words() {
        assert_eq!(
            texts("Reads the File, then (exits)."),
            vec!["reads", "the", "file", "then", "exits"]
        );
        assert_eq!(texts("Größe ändern"), vec!["größe", "ändern"]);
        assert!(texts("  ... ___ ").is_empty());
    }

    #[test]
    fn offsets_point_at_the_source() {
        let input = "x = parseHttp(y)";
        let mut tokenizer = CodeTokenizer::default();
        let mut stream = tokenizer.token_stream(input);
        let mut seen = Vec::new();
        while stream.advance() {
            let t = stream.token();
            seen.push((input[t.offset_from..t.offset_to].to_owned(), t.position));
        }
        assert_eq!(
            seen,
            vec![
                ("x".into(), 0),
                ("parse".into(), 1),
                ("Http".into(), 2),
                ("parseHttp".into(), 1),
                ("y".into(), 3)
            ]
        );
    }
}
