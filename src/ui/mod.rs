//! The dashboard: app state, key bindings, rendering, themes.
