//! Plain text (paragraphs merged to a target size, with overlap) and the
//! line-window fallback for everything else.

use crate::span::{Measure, Piece, skip_ws, split_by_size, trim_end};
use weft_config::{LinesConfig, TextConfig};

/// Paragraphs (separated by blank lines) merged up to `target_chars`; each
/// chunk after the first starts about `overlap_chars` before the previous one
/// ends (at a word start), and records that overlap.
pub(crate) fn paragraphs(text: &str, config: &TextConfig, section: &str) -> Vec<Piece> {
    let measure = Measure::new(text);
    // Units: paragraphs, with oversize ones split by size.
    let mut units: Vec<(usize, usize)> = Vec::new();
    for (s, e) in paragraph_ranges(text) {
        if measure.chars(s, e) > config.target_chars {
            units.extend(split_by_size(text, measure, s, e, config.target_chars, &[]));
        } else {
            units.push((s, e));
        }
    }
    let mut pieces: Vec<Piece> = Vec::new();
    let mut i = 0;
    while i < units.len() {
        let mut start = units[i].0;
        let mut end = units[i].1;
        i += 1;
        while i < units.len() && measure.chars(start, units[i].1) <= config.target_chars {
            end = units[i].1;
            i += 1;
        }
        let mut overlap = 0;
        if let Some(prev) = pieces.last() {
            let back = overlap_start(text, measure, prev.start, prev.end, config.overlap_chars);
            if back > prev.start && back < prev.end {
                overlap = prev.end - back;
                start = back;
            }
        }
        let mut piece = Piece::new(start, end, section, "paragraphs");
        piece.overlap = overlap;
        pieces.push(piece);
    }
    pieces
}

/// A word start about `chars` characters before `end`, inside `(start, end)`.
fn overlap_start(
    text: &str,
    measure: Measure<'_>,
    start: usize,
    end: usize,
    chars: usize,
) -> usize {
    if chars == 0 {
        return end;
    }
    let total = measure.chars(start, end);
    if total <= chars {
        return end;
    }
    let back = measure.advance(start, total - chars, end);
    // Forward to the start of the next word.
    match text[back..end].find(char::is_whitespace) {
        Some(ws) => skip_ws(text, back + ws, end),
        None => end,
    }
}

fn paragraph_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut para_start: Option<usize> = None;
    let mut last_non_blank_end = 0;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let line_start = pos;
        pos += line.len();
        if line.trim().is_empty() {
            if let Some(s) = para_start.take() {
                out.push((s, last_non_blank_end));
            }
        } else {
            if para_start.is_none() {
                para_start = Some(skip_ws(text, line_start, pos));
            }
            last_non_blank_end = trim_end(text, line_start, pos);
        }
    }
    if let Some(s) = para_start {
        out.push((s, last_non_blank_end));
    }
    out
}

/// Windows of `window_lines` lines, each repeating the last `overlap_lines`
/// of the previous one, and also cut at `max_chars`.
pub(crate) fn line_windows(text: &str, config: &LinesConfig, section: &str) -> Vec<Piece> {
    let measure = Measure::new(text);
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| i < text.len())
        .collect();
    let line_of = |pos: usize| line_starts.partition_point(|&s| s <= pos).saturating_sub(1);
    let mut pieces: Vec<Piece> = Vec::new();
    let mut cur = skip_ws(text, 0, text.len());
    while cur < text.len() {
        let first_line = line_of(cur);
        let by_lines = line_starts
            .get(first_line + config.window_lines)
            .copied()
            .unwrap_or(text.len());
        // Only the first piece is wanted: look no further than one piece
        // ahead (splitting the whole rest of one 50 MB line for every window
        // was quadratic). The first piece is the same either way.
        let reach = measure.advance(cur, config.max_chars.saturating_add(1), by_lines);
        let (s, e) = split_by_size(text, measure, cur, reach, config.max_chars, &[])
            .into_iter()
            .next()
            .unwrap_or((cur, trim_end(text, cur, by_lines)));
        let prev_end = pieces.last().map_or(0, |p| p.end);
        if e <= prev_end {
            // Only whitespace or already covered: move on without a piece.
            cur = skip_ws(text, prev_end.max(cur + 1).min(text.len()), text.len());
            continue;
        }
        let mut piece = Piece::new(s, e, section, "lines");
        piece.overlap = prev_end.saturating_sub(s);
        pieces.push(piece);
        if e >= trim_end(text, 0, text.len()) {
            break;
        }
        // The next window starts `overlap_lines` lines before this one ends,
        // when this window had more lines than that; else right after it.
        let last_line = line_of(e.saturating_sub(1));
        let back_line = (last_line + 1).saturating_sub(config.overlap_lines);
        let back = line_starts.get(back_line).copied().unwrap_or(e);
        let next = if back_line > first_line && back < e {
            skip_ws(text, back, e)
        } else {
            skip_ws(text, e, text.len())
        };
        cur = if next >= e || next <= s {
            skip_ws(text, e, text.len())
        } else {
            next
        };
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_merge_to_the_target_with_recorded_overlap() {
        let text =
            "one two three four five.\n\nsix seven eight nine ten.\n\neleven twelve thirteen.\n";
        let config = TextConfig {
            target_chars: 55,
            overlap_chars: 10,
        };
        let pieces = paragraphs(text, &config, "t");
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert_eq!(pieces[0].overlap, 0);
        assert!(pieces[1].overlap > 0);
        assert_eq!(pieces[1].start + pieces[1].overlap, pieces[0].end);
        assert!(
            text[pieces[1].start..].starts_with("nine")
                || text[pieces[1].start..].starts_with("ten")
        );
    }

    #[test]
    fn line_windows_overlap_by_the_configured_lines() {
        let text: String = (1..=120).map(|i| format!("line {i}\n")).collect();
        let config = LinesConfig {
            window_lines: 50,
            overlap_lines: 10,
            max_chars: 100_000,
        };
        let pieces = line_windows(&text, &config, "");
        let first_lines: Vec<&str> = pieces
            .iter()
            .map(|p| text[p.start..].lines().next().unwrap_or(""))
            .collect();
        assert_eq!(first_lines, vec!["line 1", "line 41", "line 81"]);
        assert!(text[pieces[0].start..pieces[0].end].ends_with("line 50"));
        assert_eq!(pieces[1].overlap, pieces[0].end - pieces[1].start);
    }
}
