//! Property tests for the dashboard's own parsers: theme TOML (`Theme::from_toml`), key-binding
//! TOML (`KeyMap::from_toml`), key names (`Key::parse`) and `--color` (`ColorMode`, through clap).
//! Whatever a file holds, they return a value or an error that is one line, names the file and
//! gives the line of the mistake (within the file).
//!
//! Inputs: arbitrary text; documents built from the real field names with good and bad values;
//! and the built-in theme files with random edits. `FAULTS_FUZZ_CASES` sets the cases per
//! property (default 2,000; 6 file properties + 2 small ones).
#![allow(clippy::unwrap_used)]

use infertop::ui::keys::{Action, Key};
use infertop::ui::{ColorMode, KeyMap, Theme};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    let cases = std::env::var("FAULTS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

const THEME_ORIGIN: &str = "theme file fuzz.toml";
const KEYS_ORIGIN: &str = "keys file fuzz.toml";

/// The checks every error must pass: one line, the file named, a line number within the file.
fn check_error(err: &anyhow::Error, origin: &str, text: &str) -> Result<(), TestCaseError> {
    let msg = err.to_string();
    prop_assert!(
        !msg.contains('\n') && !msg.contains('\r'),
        "not one line: {msg:?}"
    );
    prop_assert!(msg.starts_with(origin), "does not name the file: {msg:?}");
    let rest = msg.strip_prefix(&format!("{origin}, line "));
    prop_assert!(rest.is_some(), "no line number: {msg:?}");
    let digits: String = rest
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let line: usize = digits.parse().unwrap_or(0);
    let lines = text.split('\n').count();
    prop_assert!(
        (1..=lines).contains(&line),
        "line {line} outside 1..={lines}: {msg:?}"
    );
    Ok(())
}

fn check_theme(text: &str) -> Result<(), TestCaseError> {
    match Theme::from_toml(text, THEME_ORIGIN, "fuzz") {
        Ok(theme) => prop_assert_eq!(theme.name, "fuzz"),
        Err(e) => check_error(&e, THEME_ORIGIN, text)?,
    }
    Ok(())
}

fn check_keys(text: &str) -> Result<(), TestCaseError> {
    match KeyMap::from_toml(text, KEYS_ORIGIN) {
        Ok(map) => {
            // Every action keeps a way to be reached or was deliberately emptied; quitting
            // never loses Ctrl-C (the loop handles it apart); nothing to check beyond no panic
            // and labels that render.
            for (action, _) in ACTIONS {
                let _ = map.label(*action);
            }
        }
        Err(e) => check_error(&e, KEYS_ORIGIN, text)?,
    }
    Ok(())
}

const THEME_FIELDS: &[&str] = &[
    "base",
    "text",
    "dim",
    "border",
    "title",
    "key",
    "badge_loading",
    "badge_warmup",
    "badge_running",
    "badge_paused",
    "badge_stopped",
    "badge_error",
    "ttft",
    "tpot",
    "itl",
    "memory",
    "warmup",
    "outlier",
    "marker",
    "table_header",
    "slo_fail",
    "gauge_fill",
    "gauge_empty",
    "event_info",
    "event_warn",
    "event_error",
    "help",
    // Not fields: unknown keys must be refused.
    "colour",
    "ttft_color",
    "\"quoted key\"",
    "\"new\\nline\"",
];

const ACTIONS: &[(Action, &str)] = &[
    (Action::Quit, "quit"),
    (Action::PauseResume, "pause"),
    (Action::ResetStats, "reset"),
    (Action::ToggleWarmup, "warmup"),
    (Action::CycleWindow, "window"),
    (Action::OutputMore, "output_more"),
    (Action::OutputLess, "output_less"),
    (Action::PromptMore, "prompt_more"),
    (Action::PromptLess, "prompt_less"),
    (Action::NextTheme, "theme"),
    (Action::Help, "help"),
];

/// A TOML value a user might write for a colour or style, good or bad.
fn style_value() -> impl Strategy<Value = String> {
    let colour = prop_oneof![
        Just("\"red\"".to_string()),
        Just("\"light-blue\"".to_string()),
        Just("\"dark-gray\"".to_string()),
        Just("\"reset\"".to_string()),
        Just("\"#ff8800\"".to_string()),
        Just("\"#ff88\"".to_string()),
        Just("\"purplish\"".to_string()),
        Just("\"red\\nblue\"".to_string()),
        Just("\"\\u0007\"".to_string()),
        Just("\"\"\"\nred\n\"\"\"".to_string()),
        (-300i64..600).prop_map(|n| n.to_string()),
        (-300i64..600).prop_map(|n| format!("\"{n}\"")),
        "[a-z#0-9 -]{0,10}".prop_map(|s| format!("\"{s}\"")),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        Just("true".to_string()),
        Just("[1, 2]".to_string()),
    ];
    let flag = prop_oneof![
        Just("bold"),
        Just("dim"),
        Just("italic"),
        Just("underlined"),
        Just("reversed"),
        Just("blink"),
    ];
    let table = (
        proptest::option::of(colour.clone()),
        proptest::option::of(colour.clone()),
        proptest::collection::vec(
            (
                flag,
                prop_oneof![Just("true"), Just("false"), Just("1"), Just("\"yes\"")],
            ),
            0..3,
        ),
    )
        .prop_map(|(fg, bg, flags)| {
            let mut parts = Vec::new();
            if let Some(fg) = fg {
                parts.push(format!("fg = {fg}"));
            }
            if let Some(bg) = bg {
                parts.push(format!("bg = {bg}"));
            }
            for (f, v) in flags {
                parts.push(format!("{f} = {v}"));
            }
            format!("{{ {} }}", parts.join(", "))
        });
    prop_oneof![3 => colour, 2 => table]
}

/// A theme file: some fields (with comments and blank lines), maybe a `base`.
fn theme_doc() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        6 => (proptest::sample::select(THEME_FIELDS), style_value())
            .prop_map(|(k, v)| format!("{k} = {v}")),
        1 => prop_oneof![
            Just("base = \"light\"".to_string()),
            Just("base = \"solarized\"".to_string()),
            Just("base = 3".to_string()),
            Just("base = \"mono\"".to_string()),
        ],
        1 => Just("# a comment".to_string()),
        1 => Just(String::new()),
        1 => Just("[section]".to_string()),
    ];
    proptest::collection::vec(line, 0..12).prop_map(|l| l.join("\n"))
}

/// A key name a user might write, good or bad.
fn key_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9?+\\-\\[\\]=]".prop_map(|s| s.to_string()),
        proptest::sample::select(vec![
            "space",
            "tab",
            "backtab",
            "esc",
            "enter",
            "up",
            "pagedown",
            "f1",
            "f12",
            "f13",
            "f0",
            "ctrl-c",
            "ctrl-q",
            "alt-x",
            "ctrl-alt-",
            "ctrl-",
            "Ctrl-X",
            "shift-tab",
            "",
            "banana",
            "ctrl-ctrl-a",
            "\\n",
            "\\t",
            "é",
            "ctrl-é",
            "ä🦀",
        ])
        .prop_map(str::to_string),
        "\\PC{0,6}",
    ]
}

fn toml_string(s: &str) -> String {
    // A TOML basic string; `\\n`/`\\t` above are written as escapes on purpose.
    format!("\"{}\"", s.replace('"', "\\\""))
}

/// A keys file: actions (and a few unknown ones) bound to a key or a list of keys.
fn keys_doc() -> impl Strategy<Value = String> {
    let action = prop_oneof![
        10 => proptest::sample::select(ACTIONS).prop_map(|(_, n)| n.to_string()),
        1 => Just("explode".to_string()),
        1 => Just("Quit".to_string()),
    ];
    let value = prop_oneof![
        3 => key_name().prop_map(|k| toml_string(&k)),
        2 => proptest::collection::vec(key_name(), 0..3)
            .prop_map(|ks| format!("[{}]", ks.iter().map(|k| toml_string(k)).collect::<Vec<_>>().join(", "))),
        1 => Just("7".to_string()),
        1 => Just("{ key = \"q\" }".to_string()),
    ];
    let line = prop_oneof![
        6 => (action, value).prop_map(|(a, v)| format!("{a} = {v}")),
        1 => Just("# comment".to_string()),
        1 => Just(String::new()),
    ];
    proptest::collection::vec(line, 0..10).prop_map(|l| l.join("\n"))
}

/// A built-in theme with up to 4 random edits (delete, insert or replace a character).
fn mutated_theme() -> impl Strategy<Value = String> {
    let sources: Vec<String> = ["default", "light", "high-contrast", "mono"]
        .iter()
        .map(|n| {
            let path = format!("{}/themes/{n}.toml", env!("CARGO_MANIFEST_DIR"));
            std::fs::read_to_string(&path).expect("built-in theme file")
        })
        .collect();
    let edit = (
        any::<prop::sample::Index>(),
        0u8..3,
        proptest::sample::select(vec![
            '"', '=', '{', '}', '[', ']', '#', '\n', ' ', ',', 'x', '1', '\\', '\u{0}', 'é',
        ]),
    );
    (
        proptest::sample::select(sources),
        proptest::collection::vec(edit, 1..5),
    )
        .prop_map(|(text, edits)| {
            let mut chars: Vec<char> = text.chars().collect();
            for (at, kind, c) in edits {
                if chars.is_empty() {
                    chars.push(c);
                    continue;
                }
                let i = at.index(chars.len());
                match kind {
                    0 => {
                        chars.remove(i);
                    }
                    1 => chars.insert(i, c),
                    _ => chars[i] = c,
                }
            }
            chars.into_iter().collect()
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn theme_files_of_any_text_never_panic(text in "\\PC{0,200}|(.|\n){0,200}") {
        check_theme(&text)?;
    }

    #[test]
    fn theme_files_from_the_real_fields_give_one_line_errors(text in theme_doc()) {
        check_theme(&text)?;
    }

    #[test]
    fn edited_built_in_themes_give_one_line_errors(text in mutated_theme()) {
        check_theme(&text)?;
    }

    #[test]
    fn keys_files_of_any_text_never_panic(text in "\\PC{0,200}|(.|\n){0,200}") {
        check_keys(&text)?;
    }

    #[test]
    fn keys_files_from_the_real_actions_give_one_line_errors(text in keys_doc()) {
        check_keys(&text)?;
    }

    #[test]
    fn a_single_binding_takes_effect(which in 0..ACTIONS.len(), key in "[a-z0-9]") {
        // Bind one action to one key: the map has it, and no other action keeps that key.
        let (action, name) = ACTIONS[which];
        let text = format!("{name} = \"{key}\"\n");
        let map = KeyMap::from_toml(&text, KEYS_ORIGIN).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let k = Key::parse(&key).map_err(TestCaseError::fail)?;
        prop_assert_eq!(map.keys(action), &[k][..]);
        for (other, _) in ACTIONS {
            if *other != action {
                prop_assert!(!map.keys(*other).contains(&k), "{:?} still has {}", other, key);
            }
        }
    }

    #[test]
    fn key_names_never_panic_and_errors_are_one_line(name in key_name()) {
        if let Err(e) = Key::parse(&name) {
            prop_assert!(!e.contains('\n'), "{e:?}");
        }
    }

    #[test]
    fn colour_modes_never_panic(s in "\\PC{0,12}") {
        // Through clap, as the CLI parses it.
        match <ColorMode as clap::ValueEnum>::from_str(&s, true) {
            Ok(_) => prop_assert!(["auto", "always", "never"].contains(&s.to_ascii_lowercase().as_str())),
            Err(e) => prop_assert!(!e.contains('\n')),
        }
    }
}

/// Regression cases found by the properties above (kept as plain tests).
#[test]
fn regressions() {
    for text in [
        // A colour holding a newline: the message quotes it, and must stay one line.
        "ttft = \"red\\nblue\"",
        // (A multi-line string around a colour name is trimmed, and fine.)
        "ttft = \"\"\"\nred\n\"\"\"",
        // An unknown field whose name holds a newline.
        "\"new\\nline\" = \"red\"",
        "base = \"sol\\narized\"",
    ] {
        check_theme(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    }
    for text in [
        "quit = \"\\n\"\npause = \"\\n\"",
        "quit = \"ba\\nnana\"",
        "\"ex\\nplode\" = \"x\"",
    ] {
        KeyMap::from_toml(text, KEYS_ORIGIN).expect_err(text);
        check_keys(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    }
}
