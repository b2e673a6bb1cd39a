//! Two outputs of one prompt, compared as they were streamed: their texts byte by byte, and
//! the pieces (content chunks, each of one or more tokens) they came in, so a difference is
//! placed at a token, not only noticed (a hash would say only that). Pieces are matched by
//! position in the text, not by number: two servers (or one server at two loads) may group
//! tokens into chunks differently and still generate the same tokens.
//!
//! A token that differs is placed at the piece holding the first differing byte: the tokens
//! of the pieces wholly before it are its position. An output that is the other's beginning
//! (one stopped earlier), or the same text in another number of tokens (tokens whose text a
//! server leaves out), differs in length only. Each output is kept to at most the run's
//! longest output (`Output::of`), so a server that sends more than it was asked for cannot
//! make the comparison grow.

use crate::event::RequestDone;

use super::{Divergence, Kind};

/// Characters of text shown on each side of a divergence.
pub const EXCERPT_CHARS: usize = 24;

/// Bytes of text kept per token at most (on average over an output): a token's text is a few
/// bytes, and no piece of a well-behaved stream comes near this.
const MAX_BYTES_PER_TOKEN: usize = 256;

/// One output as it was streamed: its text, where each piece ends in it, and each piece's
/// tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    text: String,
    /// `text`'s length in bytes after each piece (non-decreasing, on character boundaries).
    ends: Vec<usize>,
    /// Tokens of each piece.
    tokens_per: Vec<usize>,
    /// Tokens in all.
    pub tokens: usize,
}

impl Output {
    /// The output of a completed request, as its `text`, `client.text_ends` and
    /// `client.chunk_tokens` say it, kept to at most `max_tokens` tokens (a piece that starts
    /// below the limit is kept whole). A request without pieces (a text recorded without
    /// them) is one piece of its `output_tokens`.
    pub fn of(r: &RequestDone, max_tokens: usize) -> Output {
        let text = r.text.as_deref().unwrap_or_default();
        let (ends, chunk_tokens) = match &r.client {
            Some(c) => (c.text_ends.as_slice(), c.chunk_tokens.as_slice()),
            None => (&[][..], &[][..]),
        };
        let pieces: Vec<(usize, usize)> = ends
            .iter()
            .enumerate()
            .map(|(i, &end)| {
                let tokens = chunk_tokens.get(i).copied().unwrap_or(1);
                (end as usize, tokens as usize)
            })
            .collect();
        let well_formed = !pieces.is_empty()
            && pieces.windows(2).all(|w| w[0].0 <= w[1].0)
            && pieces
                .iter()
                .all(|&(end, _)| end <= text.len() && text.is_char_boundary(end));
        if well_formed {
            Output::bounded(text, &pieces, max_tokens)
        } else {
            Output::bounded(text, &[(text.len(), r.output_tokens)], max_tokens)
        }
    }

    /// An output of `pieces` (text, tokens), as a test writes one.
    pub fn from_pieces(pieces: &[(&str, usize)]) -> Output {
        let mut text = String::new();
        let mut ends = Vec::new();
        for (piece, _) in pieces {
            text.push_str(piece);
            ends.push((text.len(), 0));
        }
        for (e, (_, tokens)) in ends.iter_mut().zip(pieces) {
            e.1 = *tokens;
        }
        Output::bounded(&text, &ends, usize::MAX)
    }

    /// `text` cut into `pieces` (end, tokens), kept while fewer than `max_tokens` tokens and
    /// `MAX_BYTES_PER_TOKEN` bytes a token are kept. The last piece may end inside a
    /// character only when it is cut there by the byte limit: then it is cut back to one.
    fn bounded(text: &str, pieces: &[(usize, usize)], max_tokens: usize) -> Output {
        let max_bytes = max_tokens.saturating_mul(MAX_BYTES_PER_TOKEN);
        let mut out = Output::default();
        for &(end, tokens) in pieces {
            if out.tokens >= max_tokens {
                break;
            }
            let mut end = end.min(max_bytes).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            out.ends.push(end);
            out.tokens_per.push(tokens);
            out.tokens += tokens;
            if end >= max_bytes {
                break;
            }
        }
        let kept = out.ends.last().copied().unwrap_or(0);
        out.text = text[..kept].to_string();
        out
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Tokens of the pieces that end at or before byte `at`: the position of the token that
    /// holds byte `at` (or follows it).
    fn tokens_before(&self, at: usize) -> usize {
        self.ends
            .iter()
            .zip(&self.tokens_per)
            .take_while(|(&end, _)| end <= at)
            .map(|(_, &t)| t)
            .sum()
    }
}

/// Where two outputs of one prompt part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The same text in the same number of tokens.
    Same,
    /// They part at byte `at_byte`, in token `at_token` (0-based) of `kind`.
    Parted {
        kind: Kind,
        at_token: usize,
        at_byte: usize,
    },
}

/// Compares `alone` with `loaded`.
pub fn compare(alone: &Output, loaded: &Output) -> Verdict {
    let (a, b) = (alone.text.as_bytes(), loaded.text.as_bytes());
    let mut common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    // Both texts hold the same bytes up to `common`: a character cut there is cut in both.
    while !alone.text.is_char_boundary(common) {
        common -= 1;
    }
    let at_token = alone
        .tokens_before(common)
        .min(loaded.tokens_before(common));
    let ended = common == a.len() || common == b.len();
    if ended {
        if a.len() == b.len() && alone.tokens == loaded.tokens {
            return Verdict::Same;
        }
        // One is the other's beginning: the first token only one of them has.
        let shorter = if a.len() == b.len() {
            alone.tokens.min(loaded.tokens)
        } else if common == a.len() {
            alone.tokens
        } else {
            loaded.tokens
        };
        return Verdict::Parted {
            kind: Kind::Length,
            at_token: at_token.min(shorter),
            at_byte: common,
        };
    }
    Verdict::Parted {
        kind: Kind::Tokens,
        at_token,
        at_byte: common,
    }
}

/// The divergence of prompt `index`'s outputs as the summary keeps it: the verdict and a few
/// characters of text on each side; `None` when they are the same.
pub fn divergence(index: u64, alone: &Output, loaded: &Output) -> Option<Divergence> {
    let Verdict::Parted {
        kind,
        at_token,
        at_byte,
    } = compare(alone, loaded)
    else {
        return None;
    };
    let before = &alone.text[..at_byte];
    let skip = before.chars().count().saturating_sub(EXCERPT_CHARS);
    let after = |o: &Output| o.text[at_byte..].chars().take(EXCERPT_CHARS).collect();
    Some(Divergence {
        index,
        kind,
        at_token,
        alone_tokens: alone.tokens,
        loaded_tokens: loaded.tokens,
        before: before.chars().skip(skip).collect(),
        alone: after(alone),
        loaded: after(loaded),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ClientDetail;

    fn one_each(words: &[&str]) -> Output {
        let pieces: Vec<(&str, usize)> = words.iter().map(|w| (*w, 1)).collect();
        Output::from_pieces(&pieces)
    }

    fn parted(kind: Kind, at_token: usize) -> impl Fn(Verdict) -> bool {
        move |v| matches!(v, Verdict::Parted { kind: k, at_token: t, .. } if k == kind && t == at_token)
    }

    /// A row of the table: alone, loaded, and where they part (`None`: the same).
    type Case = (Output, Output, Option<(Kind, usize)>);

    #[test]
    fn outputs_part_at_the_first_token_that_differs() {
        let cases: Vec<Case> = vec![
            // The same tokens.
            (
                one_each(&[" a", " b", " c"]),
                one_each(&[" a", " b", " c"]),
                None,
            ),
            // The same tokens in other chunks (two tokens in one chunk): the same output.
            (
                one_each(&[" a", " b", " c"]),
                Output::from_pieces(&[(" a b", 2), (" c", 1)]),
                None,
            ),
            // The second token differs.
            (
                one_each(&[" a", " b", " c"]),
                one_each(&[" a", " x", " c"]),
                Some((Kind::Tokens, 1)),
            ),
            // The first.
            (
                one_each(&["a", "b"]),
                one_each(&["x", "b"]),
                Some((Kind::Tokens, 0)),
            ),
            // A token that differs only in its last byte is still that token.
            (
                one_each(&[" ab", " cd", " ef"]),
                one_each(&[" ab", " ce", " ef"]),
                Some((Kind::Tokens, 1)),
            ),
            // Inside a chunk of two tokens: the chunk's first token (the finest known).
            (
                Output::from_pieces(&[(" a", 1), (" b c", 2)]),
                Output::from_pieces(&[(" a", 1), (" b x", 2)]),
                Some((Kind::Tokens, 1)),
            ),
            // One stopped two tokens earlier: length only, at the first token it lacks.
            (
                one_each(&[" a", " b", " c", " d"]),
                one_each(&[" a", " b"]),
                Some((Kind::Length, 2)),
            ),
            (
                one_each(&[" a"]),
                one_each(&[" a", " b"]),
                Some((Kind::Length, 1)),
            ),
            // The same text in another number of tokens (a token whose text the server
            // leaves out).
            (
                Output::from_pieces(&[(" a", 1), ("", 1)]),
                one_each(&[" a"]),
                Some((Kind::Length, 1)),
            ),
            // Nothing against something.
            (one_each(&[]), one_each(&[" a"]), Some((Kind::Length, 0))),
            // A character of two bytes whose second byte differs: placed at its token.
            (
                one_each(&[" a", "é", " b"]),
                one_each(&[" a", "è", " b"]),
                Some((Kind::Tokens, 1)),
            ),
        ];
        for (i, (alone, loaded, want)) in cases.iter().enumerate() {
            let got = compare(alone, loaded);
            match want {
                None => assert_eq!(got, Verdict::Same, "case {i}"),
                Some((kind, at)) => assert!(parted(*kind, *at)(got), "case {i}: {got:?}"),
            }
        }
    }

    #[test]
    fn a_divergence_shows_the_text_around_it() {
        let alone = one_each(&["The", " cat", " sat", " on", " the", " mat"]);
        let loaded = one_each(&["The", " cat", " sat", " in", " the", " hat"]);
        let d = divergence(7, &alone, &loaded).unwrap();
        assert_eq!((d.index, d.kind, d.at_token), (7, Kind::Tokens, 3));
        assert_eq!(d.before, "The cat sat ");
        assert_eq!(d.alone, "on the mat");
        assert_eq!(d.loaded, "in the hat");
        let long = "x".repeat(100);
        let d = divergence(0, &one_each(&[&long, "a"]), &one_each(&[&long, "b"])).unwrap();
        assert_eq!(d.before.chars().count(), EXCERPT_CHARS);
        assert!(divergence(0, &alone, &alone.clone()).is_none());
    }

    fn request(text: &str, ends: Vec<u32>, chunk_tokens: Vec<u32>, tokens: usize) -> RequestDone {
        RequestDone {
            text: Some(text.into()),
            output_tokens: tokens,
            client: Some(Box::new(ClientDetail {
                text_ends: ends,
                chunk_tokens,
                ..ClientDetail::default()
            })),
            ..RequestDone::default()
        }
    }

    /// A request's output is its streamed pieces, kept to the run's longest output: a server
    /// that sends more than asked is compared on what was asked.
    #[test]
    fn an_output_is_its_pieces_kept_to_the_longest_asked() {
        let r = request(" a b c d", vec![2, 4, 6, 8], vec![], 4);
        let o = Output::of(&r, 32);
        assert_eq!((o.text(), o.tokens), (" a b c d", 4));
        let o = Output::of(&r, 2);
        assert_eq!((o.text(), o.tokens), (" a b", 2));
        // Chunks of several tokens count as many.
        let r = request(" a b c d", vec![4, 8], vec![2, 2], 4);
        assert_eq!(
            Output::of(&r, 3).tokens,
            4,
            "a chunk that starts below is kept whole"
        );
        // Pieces that do not fit the text (a record edited by hand) make one piece.
        let r = request(" a b", vec![2, 40], vec![], 2);
        let o = Output::of(&r, 32);
        assert_eq!((o.text(), o.tokens), (" a b", 2));
        // A giant piece is cut (at a character) to the bytes a token may have.
        let giant = "é".repeat(10_000);
        let r = request(&giant, vec![giant.len() as u32], vec![], 1);
        let o = Output::of(&r, 1);
        assert!(o.text().len() <= MAX_BYTES_PER_TOKEN && !o.text().is_empty());
        // No text at all: nothing to compare but the count.
        let o = Output::of(&RequestDone::default(), 8);
        assert_eq!((o.text(), o.tokens), ("", 0));
    }
}
