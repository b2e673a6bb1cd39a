//! A screen's face: how it looks and answers keys as it runs (its glyphs, the themes `t`
//! cycles through and the one in use, the key map, whether the help is up), made from the
//! loaded `ui::Look`. The dashboard and `infertop watch` each hold one.

use ratatui::crossterm::event::KeyEvent;

use super::keys::{Action, KeyMap};
use super::theme::{Glyphs, Theme};

#[derive(Clone, Debug)]
pub struct Face {
    pub keys: KeyMap,
    pub glyphs: Glyphs,
    /// Never empty: the fallback theme stands in for none.
    themes: Vec<Theme>,
    theme_index: usize,
    pub show_help: bool,
}

impl Face {
    /// `themes`: the ones `t` cycles through, the one in use at start first.
    pub fn new(keys: KeyMap, glyphs: Glyphs, themes: Vec<Theme>) -> Face {
        let themes = if themes.is_empty() {
            vec![Theme::fallback()]
        } else {
            themes
        };
        Face {
            keys,
            glyphs,
            themes,
            theme_index: 0,
            show_help: false,
        }
    }

    /// Which theme is in use (a frame's cache key).
    pub fn theme_index(&self) -> usize {
        self.theme_index
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme_index % self.themes.len()]
    }

    /// `t`: the next theme, round.
    pub fn next_theme(&mut self) {
        self.theme_index = (self.theme_index + 1) % self.themes.len();
    }

    /// The action of a key; while the help is up, Esc closes it rather than quitting from
    /// under it.
    pub fn action(&mut self, key: &KeyEvent) -> Option<Action> {
        self.keys.action_over_help(key, &mut self.show_help)
    }
}
