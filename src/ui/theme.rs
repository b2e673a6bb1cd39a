//! Colour themes: one struct of `Style`s, read from TOML files. The built-in themes in
//! `themes/*.toml` are embedded with `include_str!`; a user file names a `base` theme and
//! overrides only the fields it sets. Unknown keys and bad colours are errors naming the file
//! and the line.
//!
//! Colour depth: the built-in themes use only the 16 ANSI colours (so they look the same on 16,
//! 256 and true-colour terminals); user themes may use `#rrggbb`, which is mapped to the nearest
//! of the 256 xterm colours unless `COLORTERM` says the terminal has true colour. `NO_COLOR`
//! (or `--color never`) removes every colour and keeps bold/dim/reverse, which the built-in
//! themes use for everything that must stand out.

use std::path::Path;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::config;

/// `--color auto|always|never`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorMode {
    /// Colour unless `NO_COLOR` is set (non-empty) or `TERM=dumb`.
    #[default]
    Auto,
    /// Colour even when `NO_COLOR` is set.
    Always,
    /// No colour; bold, dim and reverse still mark what matters.
    Never,
}

/// What the terminal can show, decided once at start-up from `ColorMode` and the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorDepth {
    None,
    /// The 256 xterm colours (includes the 16 ANSI ones).
    Indexed,
    TrueColor,
}

impl ColorDepth {
    /// `env` looks up an environment variable (injected so tests do not touch the process env).
    pub fn detect(mode: ColorMode, env: impl Fn(&str) -> Option<String>) -> ColorDepth {
        let set = |k: &str| env(k).is_some_and(|v| !v.is_empty());
        let no_color = set("NO_COLOR") || env("TERM").is_some_and(|t| t == "dumb");
        if mode == ColorMode::Never || (mode == ColorMode::Auto && no_color) {
            return ColorDepth::None;
        }
        match env("COLORTERM").as_deref() {
            Some("truecolor") | Some("24bit") => ColorDepth::TrueColor,
            _ => ColorDepth::Indexed,
        }
    }

    /// From the real environment.
    pub fn from_env(mode: ColorMode) -> ColorDepth {
        Self::detect(mode, |k| std::env::var(k).ok())
    }
}

/// The built-in themes, in the order `t` cycles through them.
pub const BUILTIN: [(&str, &str); 4] = [
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("mono", include_str!("../../themes/mono.toml")),
];

/// Declares the theme fields once: the `Theme` struct of styles and the `ThemeFile` of optional
/// overrides are generated from the same list, so they cannot drift apart.
macro_rules! theme_fields {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Every style the dashboard draws with.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Theme {
            /// The built-in name or the file stem of a user theme.
            pub name: String,
            $($(#[doc = $doc])* pub $name: Style,)*
        }

        /// A theme file as written: every field optional, nothing else allowed.
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct ThemeFile {
            /// The built-in theme this file starts from (default: `default`).
            base: Option<toml::Spanned<String>>,
            $($name: Option<StyleSpec>,)*
        }

        impl ThemeFile {
            fn apply(&self, theme: &mut Theme) {
                $(if let Some(spec) = &self.$name { theme.$name = spec.0; })*
            }

            #[cfg(test)]
            fn missing(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$name.is_none() { out.push(stringify!($name)); })*
                out
            }
        }

        impl Theme {
            /// Every style unset; the starting point the default theme file fills in.
            fn blank(name: &str) -> Theme {
                Theme { name: name.to_string(), $($name: Style::new(),)* }
            }

            /// Applies `f` to every style.
            fn map_styles(&mut self, f: impl Fn(Style) -> Style) {
                $(self.$name = f(self.$name);)*
            }
        }
    };
}

theme_fields! {
    /// Ordinary text and the background of the whole screen.
    text,
    /// Secondary text: labels, units, hints.
    dim,
    border,
    /// Panel titles.
    title,
    /// Key names in the footer and the help overlay.
    key,
    badge_loading,
    badge_warmup,
    badge_running,
    badge_paused,
    badge_stopped,
    badge_error,
    /// TTFT bars.
    ttft,
    /// TPOT bars.
    tpot,
    /// Decode-step (ITL) bars.
    itl,
    /// Memory-over-time bars.
    memory,
    /// Bars of warmup requests (they must look different from steady ones).
    warmup,
    /// Bars of requests logged as outliers.
    outlier,
    /// The marker row under the sparklines (warmup `w`, workload change `|`).
    marker,
    table_header,
    /// A table cell that crosses its SLO.
    slo_fail,
    gauge_fill,
    gauge_empty,
    event_info,
    event_warn,
    event_error,
    /// The help overlay.
    help,
}

/// A style as written in a theme file: a colour (`"cyan"`, `"#ff8800"`, `208`) for the
/// foreground, or a table `{ fg, bg, bold, dim, italic, underlined, reversed }`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct StyleSpec(Style);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StyleTable {
    fg: Option<ColorSpec>,
    bg: Option<ColorSpec>,
    #[serde(default)]
    bold: bool,
    #[serde(default)]
    dim: bool,
    #[serde(default)]
    italic: bool,
    #[serde(default)]
    underlined: bool,
    #[serde(default)]
    reversed: bool,
}

impl StyleTable {
    fn style(&self) -> Style {
        let mut s = Style::new();
        if let Some(c) = self.fg {
            s = s.fg(c.0);
        }
        if let Some(c) = self.bg {
            s = s.bg(c.0);
        }
        for (on, m) in [
            (self.bold, Modifier::BOLD),
            (self.dim, Modifier::DIM),
            (self.italic, Modifier::ITALIC),
            (self.underlined, Modifier::UNDERLINED),
            (self.reversed, Modifier::REVERSED),
        ] {
            if on {
                s = s.add_modifier(m);
            }
        }
        s
    }
}

impl<'de> Deserialize<'de> for StyleSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StyleSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a colour or a table { fg, bg, bold, dim, italic, underlined, reversed }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StyleSpec, E> {
                Ok(StyleSpec(
                    Style::new().fg(parse_color(v).map_err(E::custom)?),
                ))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<StyleSpec, E> {
                Ok(StyleSpec(Style::new().fg(indexed(v).map_err(E::custom)?)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<StyleSpec, A::Error> {
                let t = StyleTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(StyleSpec(t.style()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Clone, Copy)]
struct ColorSpec(Color);

impl<'de> Deserialize<'de> for ColorSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ColorSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a colour name, \"#rrggbb\" or an xterm index 0-255")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ColorSpec, E> {
                parse_color(v).map(ColorSpec).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ColorSpec, E> {
                indexed(v).map(ColorSpec).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

fn indexed(v: i64) -> Result<Color, String> {
    u8::try_from(v)
        .map(Color::Indexed)
        .map_err(|_| format!("colour index {v} is not in 0-255"))
}

/// Colour names as ratatui reads them (`red`, `light-blue`, `dark-gray`, `reset`), `#rrggbb`,
/// or an index `"0"`..`"255"`.
fn parse_color(text: &str) -> Result<Color, String> {
    Color::from_str(text.trim()).map_err(|_| {
        format!(
            "`{text}` is not a colour (use a name such as red, light-blue, dark-gray, reset; \
             \"#rrggbb\"; or an xterm index 0-255)"
        )
    })
}

impl Theme {
    /// Every style unset: only used if the embedded themes could not be read, which the tests
    /// rule out; the dashboard stays usable (bold/reverse-free) rather than failing.
    pub fn fallback() -> Theme {
        Theme::blank("plain")
    }

    /// A built-in theme by name (`dark` is accepted for `default`).
    pub fn builtin(name: &str) -> anyhow::Result<Theme> {
        let name = if name == "dark" { "default" } else { name };
        let (_, text) = BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| anyhow::anyhow!("no built-in theme `{name}`"))?;
        let origin = format!("built-in theme {name}");
        let base = parse(&origin, BUILTIN[0].1)?;
        let mut theme = Theme::blank(name);
        base.apply(&mut theme);
        if name != BUILTIN[0].0 {
            parse(&origin, text)?.apply(&mut theme);
        }
        Ok(theme)
    }

    /// `--theme`: a built-in name, or a path to a TOML file.
    pub fn load(spec: &str) -> anyhow::Result<Theme> {
        if spec == "dark" || BUILTIN.iter().any(|(n, _)| *n == spec) {
            return Theme::builtin(spec);
        }
        let path = Path::new(spec);
        if !path.exists() {
            anyhow::bail!(
                "--theme: unknown theme `{spec}`: not a built-in theme ({}) nor an existing file",
                Theme::builtin_names().join(", ")
            );
        }
        let text = config::read("theme", path)?;
        let origin = format!("theme file {}", path.display());
        Theme::from_toml(&text, &origin, &theme_name(path))
    }

    /// A user theme from its text: `base` (default `default`) with this file's fields on top.
    pub fn from_toml(text: &str, origin: &str, name: &str) -> anyhow::Result<Theme> {
        let file = parse(origin, text)?;
        let base = match &file.base {
            Some(b) => Theme::builtin(b.get_ref()).map_err(|_| {
                anyhow::anyhow!(
                    "{origin}, line {}: unknown base theme `{}` (built-in: {})",
                    config::line_of(text, b.span().start),
                    config::escape_controls(b.get_ref()),
                    Theme::builtin_names().join(", ")
                )
            })?,
            None => Theme::builtin(BUILTIN[0].0)?,
        };
        let mut theme = base;
        theme.name = name.to_string();
        file.apply(&mut theme);
        Ok(theme)
    }

    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    /// The themes `t` cycles through: the chosen one first, then the built-ins not yet listed.
    pub fn cycle(chosen: Theme) -> anyhow::Result<Vec<Theme>> {
        let mut out = vec![chosen];
        for (name, _) in BUILTIN {
            if out.iter().all(|t| t.name != name) {
                out.push(Theme::builtin(name)?);
            }
        }
        Ok(out)
    }

    /// This theme as the terminal can show it.
    pub fn for_depth(mut self, depth: ColorDepth) -> Theme {
        match depth {
            ColorDepth::TrueColor => {}
            ColorDepth::Indexed => self.map_styles(|s| Style {
                fg: s.fg.map(to_indexed),
                bg: s.bg.map(to_indexed),
                ..s
            }),
            ColorDepth::None => self.map_styles(|s| Style {
                fg: None,
                bg: None,
                underline_color: None,
                ..s
            }),
        }
        self
    }

    /// The badge style of a run phase.
    pub fn badge(&self, phase: crate::event::RunPhase) -> Style {
        use crate::event::RunPhase::*;
        match phase {
            Loading => self.badge_loading,
            Warmup => self.badge_warmup,
            Running => self.badge_running,
            // Idle on purpose, as a pause is.
            Paused | Cooldown => self.badge_paused,
            Stopped => self.badge_stopped,
            Error => self.badge_error,
        }
    }
}

fn theme_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "custom".to_string())
}

fn parse(origin: &str, text: &str) -> anyhow::Result<ThemeFile> {
    toml::from_str(text).map_err(|e| config::toml_error(origin, text, &e))
}

/// The nearest of the 256 xterm colours to an RGB colour (the 6x6x6 cube or the grey ramp).
fn to_indexed(c: Color) -> Color {
    let Color::Rgb(r, g, b) = c else { return c };
    const STEPS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let cube = |v: u8| -> usize {
        STEPS
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| (i32::from(**s) - i32::from(v)).abs())
            .map(|(i, _)| i)
            .unwrap_or(0)
    };
    let (ri, gi, bi) = (cube(r), cube(g), cube(b));
    let dist = |(r2, g2, b2): (u8, u8, u8)| {
        let d = |a: u8, b: u8| (i32::from(a) - i32::from(b)).pow(2);
        d(r, r2) + d(g, g2) + d(b, b2)
    };
    let cube_rgb = (STEPS[ri], STEPS[gi], STEPS[bi]);
    let avg = ((u16::from(r) + u16::from(g) + u16::from(b)) / 3) as u8;
    let grey_i = (avg.saturating_sub(8) / 10).min(23);
    let grey = 8 + 10 * grey_i;
    if dist((grey, grey, grey)) < dist(cube_rgb) {
        Color::Indexed(232 + grey_i)
    } else {
        Color::Indexed(16 + 36 * ri as u8 + 6 * gi as u8 + bi as u8)
    }
}

/// The characters the dashboard draws with: box-drawing borders and eighth-block bars by
/// default (U+2500.. and U+2581..U+2588 are in every common monospace font), plain ASCII with
/// `--ascii` for terminals without UTF-8.
#[derive(Clone, Debug)]
pub struct Glyphs {
    pub ascii: bool,
    pub border: symbols::border::Set<'static>,
    pub bars: symbols::bar::Set<'static>,
    pub gauge_fill: &'static str,
    pub gauge_empty: &'static str,
    pub sep: &'static str,
    pub le: &'static str,
}

const ASCII_BORDER: symbols::border::Set<'static> = symbols::border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

const ASCII_BARS: symbols::bar::Set<'static> = symbols::bar::Set {
    full: "#",
    seven_eighths: "#",
    three_quarters: "#",
    five_eighths: "=",
    half: "=",
    three_eighths: "-",
    one_quarter: "-",
    one_eighth: "_",
    empty: " ",
};

impl Glyphs {
    pub fn new(ascii: bool) -> Glyphs {
        if ascii {
            Glyphs {
                ascii,
                border: ASCII_BORDER,
                bars: ASCII_BARS,
                gauge_fill: "#",
                gauge_empty: "-",
                sep: "|",
                le: "<=",
            }
        } else {
            Glyphs {
                ascii,
                border: symbols::border::PLAIN,
                bars: symbols::bar::NINE_LEVELS,
                gauge_fill: "█",
                gauge_empty: "░",
                sep: "·",
                le: "≤",
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_theme_parses_and_the_default_sets_every_field() {
        let default = parse("default", BUILTIN[0].1).expect("default theme parses");
        assert!(
            default.missing().is_empty(),
            "default.toml must set every field; missing {:?}",
            default.missing()
        );
        for name in Theme::builtin_names() {
            let t = Theme::builtin(name).expect(name);
            assert_eq!(t.name, name);
        }
        assert_eq!(Theme::builtin("dark").expect("alias").name, "default");
    }

    #[test]
    fn builtin_themes_use_only_the_16_ansi_colours() {
        for name in Theme::builtin_names() {
            let t = Theme::builtin(name).expect(name);
            let indexed = t.clone().for_depth(ColorDepth::Indexed);
            assert_eq!(t, indexed, "{name} uses colours outside the 16 ANSI ones");
        }
    }

    #[test]
    fn user_file_overrides_only_its_fields() {
        let text = "base = \"light\"\nborder = \"#ff8800\"\nslo_fail = { fg = \"red\", bg = 17, bold = true }\n";
        let t = Theme::from_toml(text, "theme file x.toml", "x").expect("valid");
        let light = Theme::builtin("light").expect("light");
        assert_eq!(t.name, "x");
        assert_eq!(t.border, Style::new().fg(Color::Rgb(255, 136, 0)));
        assert_eq!(
            t.slo_fail,
            Style::new()
                .fg(Color::Red)
                .bg(Color::Indexed(17))
                .add_modifier(Modifier::BOLD)
        );
        assert_eq!(t.ttft, light.ttft);
        assert_eq!(t.text, light.text);
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let text = "border = \"red\"\n\nbordr = \"blue\"\n";
        let err = Theme::from_toml(text, "theme file my.toml", "my")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("theme file my.toml, line 3:"), "{err}");
        assert!(err.contains("bordr"), "{err}");
    }

    #[test]
    fn bad_colour_names_file_and_line() {
        let text = "border = \"red\"\nttft = \"reddish\"\n";
        let err = Theme::from_toml(text, "theme file my.toml", "my")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("theme file my.toml, line 2:"), "{err}");
        assert!(err.contains("`reddish` is not a colour"), "{err}");

        let text = "border = \"red\"\n\ntitle = { fg = \"cyan\", bold = true }\nkey = { fg = \"#12345\" }\n";
        let err = Theme::from_toml(text, "f", "f").unwrap_err().to_string();
        assert!(err.starts_with("f, line 4:"), "{err}");

        let err = Theme::from_toml("dim = 300\n", "f", "f")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1") && err.contains("0-255"), "{err}");

        let err = Theme::from_toml("\ntext = { fg = \"red\", blink = true }\n", "f", "f")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f, line 2:") && err.contains("blink"),
            "{err}"
        );
    }

    #[test]
    fn unknown_base_names_line() {
        let err = Theme::from_toml("# x\nbase = \"solarized\"\n", "f", "f")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f, line 2: unknown base theme `solarized`"),
            "{err}"
        );
    }

    #[test]
    fn load_reads_files_and_rejects_unknown_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mine.toml");
        std::fs::write(&path, "ttft = \"magenta\"\n").expect("write");
        let t = Theme::load(path.to_str().expect("utf-8 path")).expect("loads");
        assert_eq!(t.name, "mine");
        assert_eq!(t.ttft, Style::new().fg(Color::Magenta));
        let err = Theme::load("nope").unwrap_err().to_string();
        assert!(
            err.contains("unknown theme `nope`") && err.contains("high-contrast"),
            "{err}"
        );
    }

    #[test]
    fn colour_depth_follows_mode_and_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        use ColorDepth as D;
        use ColorMode as M;
        assert_eq!(D::detect(M::Auto, env(&[])), D::Indexed);
        assert_eq!(D::detect(M::Auto, env(&[("NO_COLOR", "1")])), D::None);
        assert_eq!(D::detect(M::Auto, env(&[("NO_COLOR", "")])), D::Indexed);
        assert_eq!(D::detect(M::Auto, env(&[("TERM", "dumb")])), D::None);
        assert_eq!(D::detect(M::Always, env(&[("NO_COLOR", "1")])), D::Indexed);
        assert_eq!(
            D::detect(M::Always, env(&[("COLORTERM", "truecolor")])),
            D::TrueColor
        );
        assert_eq!(
            D::detect(M::Never, env(&[("COLORTERM", "truecolor")])),
            D::None
        );
    }

    #[test]
    fn no_colour_keeps_modifiers_and_rgb_maps_to_256() {
        let t = Theme::builtin("default").expect("default");
        let plain = t.clone().for_depth(ColorDepth::None);
        assert_eq!(plain.slo_fail.fg, None);
        assert_eq!(plain.slo_fail.add_modifier, t.slo_fail.add_modifier);
        assert!(
            plain
                .badge_running
                .add_modifier
                .contains(Modifier::REVERSED)
                || plain.badge_running.add_modifier.contains(Modifier::BOLD)
        );
        assert_eq!(to_indexed(Color::Rgb(255, 0, 0)), Color::Indexed(196));
        assert_eq!(to_indexed(Color::Rgb(128, 128, 128)), Color::Indexed(244));
        assert_eq!(to_indexed(Color::Red), Color::Red);
    }
}
