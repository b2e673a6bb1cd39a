//! Key bindings: one table from keys to `Action`s (data), overridable from a TOML file.
//!
//! ```toml
//! # keys.toml: list only the actions you rebind; each takes a key or a list of keys.
//! pause = ["p", "space"]
//! theme = "T"
//! ```
//! Key names: a single character (`q`, `+`, `?`, `T`), `space`, `tab`, `backtab`, `esc`,
//! `enter`, `backspace`, `up`, `down`, `left`, `right`, `home`, `end`, `pageup`, `pagedown`,
//! `f1`..`f12`, with optional `ctrl-` / `alt-` prefixes. A key you bind is taken away from the
//! actions you did not rebind. Ctrl-C always quits, whatever the file says: in raw mode it is
//! the only way out a user can count on.

use std::path::Path;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::config;

/// What a key does: data, applied in one place (`App::update`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Quit,
    PauseResume,
    ResetStats,
    ToggleWarmup,
    CycleWindow,
    OutputMore,
    OutputLess,
    PromptMore,
    PromptLess,
    LoadMore,
    LoadLess,
    NextTheme,
    CycleView,
    ToggleServer,
    TogglePhases,
    /// The table: where each TTFT went by the server's own timings.
    ToggleSplit,
    Help,
    /// A replay: play up to the next request's end, then pause.
    Step,
    /// A replay: twice as fast (past 1024×, as fast as it reads).
    SpeedUp,
    /// A replay: half as fast.
    SpeedDown,
    /// The row above / below (`watch`'s node table).
    SelectUp,
    SelectDown,
}

impl Action {
    /// Every action with its name in the keys file, its default keys and its help text.
    pub const TABLE: [(Action, &'static str, &'static [&'static str], &'static str); 22] = [
        (
            Action::Quit,
            "quit",
            &["q", "esc", "ctrl-c"],
            "quit (stops the run, prints the summary)",
        ),
        (
            Action::PauseResume,
            "pause",
            &["space"],
            "pause / resume the run",
        ),
        (
            Action::ResetStats,
            "reset",
            &["r"],
            "reset statistics and histories",
        ),
        (
            Action::ToggleWarmup,
            "warmup",
            &["w"],
            "include / exclude warmup requests",
        ),
        (
            Action::CycleWindow,
            "window",
            &["tab"],
            "cycle window: steady, last 100, all",
        ),
        (
            Action::OutputMore,
            "output_more",
            &["+", "="],
            "more output tokens (next request)",
        ),
        (
            Action::OutputLess,
            "output_less",
            &["-"],
            "fewer output tokens (next request)",
        ),
        (
            Action::PromptMore,
            "prompt_more",
            &["]"],
            "double prompt tokens (next request)",
        ),
        (
            Action::PromptLess,
            "prompt_less",
            &["["],
            "halve prompt tokens (next request)",
        ),
        (
            Action::LoadMore,
            "load_more",
            &["B"],
            "double the load (batch, concurrency or rate)",
        ),
        (
            Action::LoadLess,
            "load_less",
            &["b"],
            "halve the load (batch, concurrency or rate)",
        ),
        (Action::NextTheme, "theme", &["t"], "next colour theme"),
        (
            Action::CycleView,
            "view",
            &["v"],
            "charts: per request, distributions, bands, heatmap",
        ),
        (
            Action::ToggleServer,
            "server",
            &["s"],
            "table: client vs server (--server-metrics)",
        ),
        (
            Action::TogglePhases,
            "phases",
            &["h"],
            "table: the client's HTTP phases (--endpoint)",
        ),
        (
            Action::ToggleSplit,
            "split",
            &["f"],
            "table: TTFT split; drafts; step parts",
        ),
        (Action::Help, "help", &["?"], "this help"),
        (
            Action::Step,
            "step",
            &["n"],
            "replay: the next request, then pause",
        ),
        (Action::SpeedUp, "faster", &[">"], "replay: twice as fast"),
        (Action::SpeedDown, "slower", &["<"], "replay: half as fast"),
        (
            Action::SelectUp,
            "select_up",
            &["up", "k"],
            "watch: the row above",
        ),
        (
            Action::SelectDown,
            "select_down",
            &["down", "j"],
            "watch: the row below",
        ),
    ];

    fn entry(self) -> &'static (Action, &'static str, &'static [&'static str], &'static str) {
        // Every variant is in TABLE (checked by a test), so the fallback is never used.
        Action::TABLE
            .iter()
            .find(|e| e.0 == self)
            .unwrap_or(&Action::TABLE[0])
    }

    /// The name used in the keys file.
    pub fn name(self) -> &'static str {
        self.entry().1
    }

    pub fn describe(self) -> &'static str {
        self.entry().3
    }
}

/// One key, as a binding: the key code plus the modifiers that matter (Shift is part of the
/// character for printable keys, so it is not compared).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
    pub alt: bool,
}

impl Key {
    pub const CTRL_C: Key = Key {
        code: KeyCode::Char('c'),
        ctrl: true,
        alt: false,
    };

    /// Parses a key name (see the module docs).
    pub fn parse(text: &str) -> Result<Key, String> {
        let mut rest = text;
        let (mut ctrl, mut alt) = (false, false);
        loop {
            let lower = rest.to_ascii_lowercase();
            if rest.len() > 5 && lower.starts_with("ctrl-") {
                ctrl = true;
                rest = &rest[5..];
            } else if rest.len() > 4 && lower.starts_with("alt-") {
                alt = true;
                rest = &rest[4..];
            } else {
                break;
            }
        }
        let mut chars = rest.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => KeyCode::Char(if ctrl { c.to_ascii_lowercase() } else { c }),
            _ => match rest.to_ascii_lowercase().as_str() {
                "space" => KeyCode::Char(' '),
                "tab" => KeyCode::Tab,
                "backtab" | "shift-tab" => KeyCode::BackTab,
                "esc" | "escape" => KeyCode::Esc,
                "enter" | "return" => KeyCode::Enter,
                "backspace" => KeyCode::Backspace,
                "up" => KeyCode::Up,
                "down" => KeyCode::Down,
                "left" => KeyCode::Left,
                "right" => KeyCode::Right,
                "home" => KeyCode::Home,
                "end" => KeyCode::End,
                "pageup" => KeyCode::PageUp,
                "pagedown" => KeyCode::PageDown,
                "delete" | "del" => KeyCode::Delete,
                "insert" => KeyCode::Insert,
                f if f.starts_with('f') => match f[1..].parse::<u8>() {
                    Ok(n @ 1..=12) => KeyCode::F(n),
                    _ => return Err(unknown_key(text)),
                },
                _ => return Err(unknown_key(text)),
            },
        };
        Ok(Key { code, ctrl, alt })
    }

    /// Whether a terminal key event is this key.
    pub fn matches(&self, ev: &KeyEvent) -> bool {
        let code = match ev.code {
            // With Ctrl held some terminals report the upper-case letter.
            KeyCode::Char(c) if self.ctrl => KeyCode::Char(c.to_ascii_lowercase()),
            c => c,
        };
        code == self.code
            && ev.modifiers.contains(KeyModifiers::CONTROL) == self.ctrl
            && ev.modifiers.contains(KeyModifiers::ALT) == self.alt
    }

    /// How the key is written in the footer and the help overlay.
    pub fn label(&self) -> String {
        let base = match self.code {
            KeyCode::Char(' ') => "space".to_string(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Tab => "tab".into(),
            KeyCode::BackTab => "backtab".into(),
            KeyCode::Esc => "esc".into(),
            KeyCode::Enter => "enter".into(),
            KeyCode::Backspace => "backspace".into(),
            KeyCode::Up => "up".into(),
            KeyCode::Down => "down".into(),
            KeyCode::Left => "left".into(),
            KeyCode::Right => "right".into(),
            KeyCode::Home => "home".into(),
            KeyCode::End => "end".into(),
            KeyCode::PageUp => "pageup".into(),
            KeyCode::PageDown => "pagedown".into(),
            KeyCode::Delete => "del".into(),
            KeyCode::Insert => "insert".into(),
            KeyCode::F(n) => format!("f{n}"),
            other => format!("{other:?}").to_ascii_lowercase(),
        };
        match (self.ctrl, self.alt) {
            (true, true) => format!("ctrl-alt-{base}"),
            (true, false) => format!("ctrl-{base}"),
            (false, true) => format!("alt-{base}"),
            (false, false) => base,
        }
    }
}

fn unknown_key(text: &str) -> String {
    format!(
        "unknown key `{text}` (use a single character, space, tab, backtab, esc, enter, \
         backspace, up, down, left, right, home, end, pageup, pagedown, f1-f12, with optional \
         ctrl- / alt-)"
    )
}

/// The bindings in force: for each action, its keys.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyMap {
    bindings: Vec<(Action, Vec<Key>)>,
}

impl Default for KeyMap {
    fn default() -> Self {
        let bindings = Action::TABLE
            .iter()
            .map(|(action, _, keys, _)| {
                // The defaults are constants checked by a test; a bad one would just be dropped.
                (
                    *action,
                    keys.iter().filter_map(|k| Key::parse(k).ok()).collect(),
                )
            })
            .collect();
        KeyMap { bindings }
    }
}

/// A key or a list of keys in the keys file.
#[derive(Debug)]
struct KeyList(Vec<Key>);

impl<'de> Deserialize<'de> for KeyList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key name or a list of key names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyList, E> {
                Key::parse(v).map(|k| KeyList(vec![k])).map_err(E::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KeyList, A::Error> {
                let mut keys = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    keys.push(Key::parse(&name).map_err(de::Error::custom)?);
                }
                Ok(KeyList(keys))
            }
        }
        d.deserialize_any(V)
    }
}

/// The keys file as written: one optional entry per action, nothing else.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    quit: Option<Spanned<KeyList>>,
    pause: Option<Spanned<KeyList>>,
    reset: Option<Spanned<KeyList>>,
    warmup: Option<Spanned<KeyList>>,
    window: Option<Spanned<KeyList>>,
    output_more: Option<Spanned<KeyList>>,
    output_less: Option<Spanned<KeyList>>,
    prompt_more: Option<Spanned<KeyList>>,
    prompt_less: Option<Spanned<KeyList>>,
    load_more: Option<Spanned<KeyList>>,
    load_less: Option<Spanned<KeyList>>,
    theme: Option<Spanned<KeyList>>,
    view: Option<Spanned<KeyList>>,
    server: Option<Spanned<KeyList>>,
    phases: Option<Spanned<KeyList>>,
    split: Option<Spanned<KeyList>>,
    help: Option<Spanned<KeyList>>,
    step: Option<Spanned<KeyList>>,
    faster: Option<Spanned<KeyList>>,
    slower: Option<Spanned<KeyList>>,
    select_up: Option<Spanned<KeyList>>,
    select_down: Option<Spanned<KeyList>>,
}

impl KeysFile {
    fn into_entries(self) -> Vec<(Action, Spanned<KeyList>)> {
        [
            (Action::Quit, self.quit),
            (Action::PauseResume, self.pause),
            (Action::ResetStats, self.reset),
            (Action::ToggleWarmup, self.warmup),
            (Action::CycleWindow, self.window),
            (Action::OutputMore, self.output_more),
            (Action::OutputLess, self.output_less),
            (Action::PromptMore, self.prompt_more),
            (Action::PromptLess, self.prompt_less),
            (Action::LoadMore, self.load_more),
            (Action::LoadLess, self.load_less),
            (Action::NextTheme, self.theme),
            (Action::CycleView, self.view),
            (Action::ToggleServer, self.server),
            (Action::TogglePhases, self.phases),
            (Action::ToggleSplit, self.split),
            (Action::Help, self.help),
            (Action::Step, self.step),
            (Action::SpeedUp, self.faster),
            (Action::SpeedDown, self.slower),
            (Action::SelectUp, self.select_up),
            (Action::SelectDown, self.select_down),
        ]
        .into_iter()
        .filter_map(|(a, k)| k.map(|k| (a, k)))
        .collect()
    }
}

impl KeyMap {
    /// The defaults with a keys file's overrides.
    pub fn load(path: &Path) -> anyhow::Result<KeyMap> {
        let text = config::read("keys", path)?;
        KeyMap::from_toml(&text, &format!("keys file {}", path.display()))
    }

    /// The defaults with the overrides in `text`; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> anyhow::Result<KeyMap> {
        let file: KeysFile =
            toml::from_str(text).map_err(|e| config::toml_error(origin, text, &e))?;
        let entries = file.into_entries();
        // Two rebound actions may not share a key.
        let mut seen: Vec<(Key, Action, usize)> = Vec::new();
        for (action, keys) in &entries {
            let line = config::line_of(text, keys.span().start);
            for key in &keys.get_ref().0 {
                if let Some((_, other, other_line)) =
                    seen.iter().find(|(k, a, _)| k == key && a != action)
                {
                    anyhow::bail!(
                        "{origin}, line {line}: key `{}` is bound to both `{}` (line {other_line}) and `{}`",
                        config::escape_controls(&key.label()),
                        other.name(),
                        action.name()
                    );
                }
                seen.push((*key, *action, line));
            }
        }
        let mut map = KeyMap::default();
        let rebound: Vec<Key> = seen.iter().map(|(k, _, _)| *k).collect();
        for (action, keys) in &mut map.bindings {
            match entries.iter().find(|(a, _)| a == action) {
                Some((_, list)) => *keys = list.get_ref().0.clone(),
                None => keys.retain(|k| !rebound.contains(k)),
            }
        }
        Ok(map)
    }

    /// The action of a key event. Only presses count (not releases or repeats reported by
    /// terminals with the kitty protocol); Ctrl-C always quits.
    pub fn action(&self, ev: &KeyEvent) -> Option<Action> {
        if ev.kind != KeyEventKind::Press {
            return None;
        }
        if Key::CTRL_C.matches(ev) {
            return Some(Action::Quit);
        }
        self.bindings
            .iter()
            .find(|(_, keys)| keys.iter().any(|k| k.matches(ev)))
            .map(|(a, _)| *a)
    }

    /// As `action`, for a screen with a help overlay: while it is open, Esc closes it (clearing
    /// `show_help`) rather than quitting from under it.
    pub fn action_over_help(&self, ev: &KeyEvent, show_help: &mut bool) -> Option<Action> {
        if *show_help && ev.kind == KeyEventKind::Press && ev.code == KeyCode::Esc {
            *show_help = false;
            return None;
        }
        self.action(ev)
    }

    pub fn keys(&self, action: Action) -> &[Key] {
        self.bindings
            .iter()
            .find(|(a, _)| *a == action)
            .map(|(_, k)| k.as_slice())
            .unwrap_or(&[])
    }

    /// The keys of an action as shown on screen (`q/esc/ctrl-c`); empty when unbound.
    pub fn label(&self, action: Action) -> String {
        self.keys(action)
            .iter()
            .map(Key::label)
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The first key of an action, for the footer where space is short.
    pub fn short_label(&self, action: Action) -> Option<String> {
        self.keys(action).first().map(Key::label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEventState;

    fn ev(code: KeyCode, modifiers: KeyModifiers, kind: KeyEventKind) -> KeyEvent {
        KeyEvent {
            code,
            modifiers,
            kind,
            state: KeyEventState::NONE,
        }
    }

    fn press(c: char) -> KeyEvent {
        ev(KeyCode::Char(c), KeyModifiers::NONE, KeyEventKind::Press)
    }

    #[test]
    fn table_covers_every_action_and_defaults_parse() {
        for (action, name, keys, _) in Action::TABLE {
            assert_eq!(action.name(), name);
            for k in keys {
                Key::parse(k).unwrap_or_else(|e| panic!("default key {k}: {e}"));
            }
        }
        let map = KeyMap::default();
        for (action, _, keys, _) in Action::TABLE {
            assert_eq!(map.keys(action).len(), keys.len());
        }
    }

    #[test]
    fn defaults_map_keys_to_actions() {
        let map = KeyMap::default();
        let none = KeyModifiers::NONE;
        let cases = [
            (press('q'), Some(Action::Quit)),
            (
                ev(KeyCode::Esc, none, KeyEventKind::Press),
                Some(Action::Quit),
            ),
            (
                ev(
                    KeyCode::Char('c'),
                    KeyModifiers::CONTROL,
                    KeyEventKind::Press,
                ),
                Some(Action::Quit),
            ),
            (press(' '), Some(Action::PauseResume)),
            (press('r'), Some(Action::ResetStats)),
            (press('w'), Some(Action::ToggleWarmup)),
            (
                ev(KeyCode::Tab, none, KeyEventKind::Press),
                Some(Action::CycleWindow),
            ),
            // `+` arrives with Shift on most keyboards; Shift is part of the character.
            (
                ev(KeyCode::Char('+'), KeyModifiers::SHIFT, KeyEventKind::Press),
                Some(Action::OutputMore),
            ),
            (press('-'), Some(Action::OutputLess)),
            (press(']'), Some(Action::PromptMore)),
            (press('['), Some(Action::PromptLess)),
            (press('t'), Some(Action::NextTheme)),
            (press('n'), Some(Action::Step)),
            (
                ev(KeyCode::Char('>'), KeyModifiers::SHIFT, KeyEventKind::Press),
                Some(Action::SpeedUp),
            ),
            (
                ev(KeyCode::Char('<'), KeyModifiers::SHIFT, KeyEventKind::Press),
                Some(Action::SpeedDown),
            ),
            (
                ev(KeyCode::Char('?'), KeyModifiers::SHIFT, KeyEventKind::Press),
                Some(Action::Help),
            ),
            (press('x'), None),
            // Ctrl-r is not r.
            (
                ev(
                    KeyCode::Char('r'),
                    KeyModifiers::CONTROL,
                    KeyEventKind::Press,
                ),
                None,
            ),
        ];
        for (event, want) in cases {
            assert_eq!(map.action(&event), want, "{event:?}");
        }
    }

    #[test]
    fn only_presses_count() {
        let map = KeyMap::default();
        for kind in [KeyEventKind::Release, KeyEventKind::Repeat] {
            assert_eq!(
                map.action(&ev(KeyCode::Char('q'), KeyModifiers::NONE, kind)),
                None
            );
            assert_eq!(
                map.action(&ev(KeyCode::Char(' '), KeyModifiers::NONE, kind)),
                None
            );
        }
    }

    #[test]
    fn overrides_replace_only_listed_actions_and_take_keys_away() {
        let map =
            KeyMap::from_toml("pause = [\"p\", \"q\"]\ntheme = \"ctrl-t\"\n", "k").expect("valid");
        assert_eq!(map.action(&press('p')), Some(Action::PauseResume));
        assert_eq!(map.action(&press('q')), Some(Action::PauseResume));
        assert_eq!(map.action(&press(' ')), None);
        assert_eq!(map.action(&press('t')), None);
        assert_eq!(
            map.action(&ev(
                KeyCode::Char('t'),
                KeyModifiers::CONTROL,
                KeyEventKind::Press
            )),
            Some(Action::NextTheme)
        );
        // quit lost `q` but keeps esc and ctrl-c; reset is untouched.
        assert_eq!(map.label(Action::Quit), "esc/ctrl-c");
        assert_eq!(map.action(&press('r')), Some(Action::ResetStats));
    }

    #[test]
    fn ctrl_c_always_quits() {
        let map = KeyMap::from_toml("quit = \"x\"\n", "k").expect("valid");
        assert_eq!(
            map.action(&ev(
                KeyCode::Char('c'),
                KeyModifiers::CONTROL,
                KeyEventKind::Press
            )),
            Some(Action::Quit)
        );
        assert_eq!(map.action(&press('q')), None);
    }

    #[test]
    fn bad_key_names_and_unknown_actions_name_file_and_line() {
        let err = KeyMap::from_toml("quit = \"q\"\n\npause = [\"spcae\"]\n", "keys file k.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("keys file k.toml, line 3:"), "{err}");
        assert!(err.contains("unknown key `spcae`"), "{err}");

        let err = KeyMap::from_toml("quit = \"q\"\npuase = \"p\"\n", "keys file k.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("keys file k.toml, line 2:"), "{err}");
        assert!(err.contains("puase"), "{err}");

        let err = KeyMap::from_toml("help = 3\n", "k")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("k, line 1:"), "{err}");

        let err = KeyMap::from_toml("quit = \"x\"\nreset = [\"r\", \"x\"]\n", "k")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("k, line 2: key `x` is bound to both `quit` (line 1)"),
            "{err}"
        );
    }

    #[test]
    fn key_names_round_trip_through_labels() {
        for name in [
            "q", "space", "tab", "esc", "ctrl-c", "alt-x", "f5", "pageup", "+", "?", "T",
        ] {
            let key = Key::parse(name).expect(name);
            assert_eq!(key.label(), name);
        }
        assert!(Key::parse("f13").is_err());
        assert!(Key::parse("").is_err());
        assert_eq!(Key::parse("CTRL-C").expect("upper"), Key::CTRL_C);
    }
}
