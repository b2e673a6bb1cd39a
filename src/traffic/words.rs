//! Prompt text made of words a tokenizer encodes as one token each: exact lengths with the
//! served model's tokenizer (`PromptWords`), about the asked length without one
//! (`approximate_prompt`). Seeded: the same seed makes the same words, so a hash id's block or a
//! group's shared prefix is the same text in every request that has it.

/// Text of roughly `tokens` tokens for a server whose tokenizer we do not have: common English
/// words that are one token in the usual BPE vocabularies, seeded so every request differs
/// (a shared prefix would let a prefix cache shorten the prefill).
pub fn approximate_prompt(tokens: usize, seed: u64) -> String {
    const WORDS: [&str; 48] = [
        "the", "time", "people", "way", "water", "day", "man", "world", "house", "life", "hand",
        "part", "child", "eye", "place", "work", "week", "case", "point", "number", "group",
        "night", "fact", "city", "game", "line", "end", "name", "story", "book", "word", "side",
        "kind", "head", "home", "room", "mother", "area", "money", "month", "body", "face", "door",
        "road", "tree", "light", "river", "music",
    ];
    let mut rng = crate::util::SplitMix64::new(seed);
    let mut s = String::with_capacity(tokens * 7);
    for i in 0..tokens {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.below(WORDS.len())]);
    }
    s
}

/// Words the server's tokenizer encodes as exactly one token each, so that a prompt of `n` of
/// them is exactly `n` prompt tokens (the server may add its own, e.g. a BOS token or a chat
/// template). Byte-level BPEs have one-token words with a leading space (" river"), so every word
/// gets one; SentencePiece marks the space itself, so words are joined by spaces only. Sampled per
/// request, so no two prompts share a prefix.
#[derive(Debug)]
pub struct PromptWords {
    words: Vec<String>,
    /// Every word is written with a leading space.
    lead: bool,
}

impl PromptWords {
    /// Words kept: enough for prompts that differ, few enough to find quickly in a large vocabulary.
    const WANT: usize = 2000;
    pub(crate) const FEWEST: usize = 32;
    const PROBE: usize = 512;

    pub fn from_tokenizer(tk: &tokenizers::Tokenizer) -> Result<PromptWords, String> {
        let mut ids: Vec<u32> = tk.get_vocab(false).into_values().collect();
        ids.sort_unstable();
        let count = |text: &str| tk.encode(text, false).map(|e| e.get_ids().len()).ok();
        // Candidates for each way of writing them: [joined by spaces, each with a leading space].
        let mut found: [Vec<String>; 2] = [Vec::new(), Vec::new()];
        for id in ids {
            let Ok(text) = tk.decode(&[id], false) else {
                continue;
            };
            let w = text.trim();
            if !(3..=10).contains(&w.len()) || !w.bytes().all(|b| b.is_ascii_lowercase()) {
                continue;
            }
            if count(w) == Some(1) && count(&format!("{w} {w}")) == Some(2) {
                found[0].push(w.to_string());
            }
            if count(&format!(" {w}")) == Some(1) && count(&format!(" {w} {w}")) == Some(2) {
                found[1].push(w.to_string());
            }
            if found.iter().any(|f| f.len() >= Self::WANT) {
                break;
            }
        }
        let [plain, lead] = found;
        let words = PromptWords::choose(plain, lead)?;
        // Joined words must not merge across the spaces: check one long prompt end to end.
        let probe = words.probe();
        words.checked(count(&probe))
    }

    /// The words of the way of writing them that has more (`plain`: joined by spaces; `lead`:
    /// each with a leading space), or why there are too few.
    pub fn choose(plain: Vec<String>, lead: Vec<String>) -> Result<PromptWords, String> {
        let use_lead = lead.len() > plain.len();
        let mut words = if use_lead { lead } else { plain };
        words.sort();
        words.dedup();
        if words.len() < Self::FEWEST {
            return Err(format!(
                "it has {} words that are one token each (needs {})",
                words.len(),
                Self::FEWEST
            ));
        }
        Ok(PromptWords {
            words,
            lead: use_lead,
        })
    }

    /// Words joined into a long prompt, to check that they do not merge (`checked`).
    pub fn probe(&self) -> String {
        self.prompt(Self::PROBE, 0x5EED)
    }

    /// The words, when `probe` came to as many tokens as it has words.
    pub fn checked(self, probe_tokens: Option<usize>) -> Result<PromptWords, String> {
        match probe_tokens {
            Some(got) if got == Self::PROBE => Ok(self),
            got => Err(format!(
                "{} one-token words encode to {} tokens together",
                Self::PROBE,
                got.map_or("no".to_string(), |g| g.to_string())
            )),
        }
    }

    pub fn prompt(&self, tokens: usize, seed: u64) -> String {
        let mut rng = crate::util::SplitMix64::new(seed);
        let mut s = String::with_capacity(tokens * 8);
        for i in 0..tokens {
            if i > 0 || self.lead {
                s.push(' ');
            }
            s.push_str(&self.words[rng.below(self.words.len())]);
        }
        s
    }
}

impl PromptWords {
    /// How two made-up parts are joined so their tokens add up: nothing between parts whose
    /// words carry their own leading space, one space otherwise.
    pub fn joiner(&self) -> &'static str {
        if self.lead {
            ""
        } else {
            " "
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approximate_prompts_have_the_asked_word_count_and_differ() {
        let a = approximate_prompt(128, 1);
        assert_eq!(a.split(' ').count(), 128);
        assert_ne!(a, approximate_prompt(128, 2));
        assert_eq!(approximate_prompt(0, 1), "");
    }

    #[test]
    fn prompt_words_make_prompts_of_exactly_the_asked_tokens() {
        let tk = crate::model::tokenizer::train_bpe(2048).unwrap();
        let words = PromptWords::from_tokenizer(&tk).unwrap();
        for (n, seed) in [(1, 1), (7, 2), (128, 3), (2048, 4)] {
            let p = words.prompt(n, seed);
            assert_eq!(
                tk.encode(p.as_str(), false).unwrap().get_ids().len(),
                n,
                "{p}"
            );
        }
        assert_ne!(words.prompt(64, 1), words.prompt(64, 2));
    }
}
