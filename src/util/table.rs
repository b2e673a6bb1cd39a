//! One table layer for the tables infertop prints: a header of named, aligned columns and rows
//! of cells, rendered as a markdown table (what `report`, `compare` and the summaries print). A
//! cell without a value is `MISSING`, written in one place rather than typed as `"-"` in every
//! renderer; a computing function hands over values and the renderer decides how they look.

/// What a cell without a value shows.
pub const MISSING: &str = "-";

/// A column's alignment: labels left, figures right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table: its columns and rows, rows as long as the header (a short row is padded with
/// empty cells, a long one cut).
#[derive(Clone, Debug, Default)]
pub struct TextTable {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

/// The text of an optional value, or `MISSING`.
pub fn or_missing(v: Option<String>) -> String {
    v.unwrap_or_else(|| MISSING.to_string())
}

impl TextTable {
    pub fn new() -> TextTable {
        TextTable::default()
    }

    /// Adds left-aligned columns (labels, names, words).
    pub fn left<S: AsRef<str>>(self, names: impl IntoIterator<Item = S>) -> TextTable {
        self.columns(names, Align::Left)
    }

    /// Adds right-aligned columns (figures).
    pub fn right<S: AsRef<str>>(self, names: impl IntoIterator<Item = S>) -> TextTable {
        self.columns(names, Align::Right)
    }

    fn columns<S: AsRef<str>>(mut self, names: impl IntoIterator<Item = S>, a: Align) -> TextTable {
        let named = names.into_iter().map(|n| (n.as_ref().to_string(), a));
        self.columns.extend(named);
        self
    }

    /// One row of cells, in column order.
    pub fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        let mut cells: Vec<String> = cells.into_iter().take(self.columns.len()).collect();
        cells.resize(self.columns.len(), String::new());
        self.rows.push(cells);
    }

    /// A markdown table: `| a | b |` lines, `---:` under right-aligned columns; an empty cell
    /// is `| |`.
    pub fn markdown(&self) -> String {
        let mut out = String::with_capacity(64 * (self.rows.len() + 2));
        md_line(&mut out, self.columns.iter().map(|(n, _)| n.as_str()));
        out.push('|');
        for (_, a) in &self.columns {
            out.push_str(match a {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        out.push('\n');
        for r in &self.rows {
            md_line(&mut out, r.iter().map(String::as_str));
        }
        out
    }
}

fn md_line<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>) {
    out.push('|');
    for c in cells {
        if c.is_empty() {
            out.push_str(" |");
        } else {
            out.push(' ');
            out.push_str(c);
            out.push_str(" |");
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TextTable {
        let mut t = TextTable::new().left(["metric"]).right(["p50", "n"]);
        t.row(["TTFT".into(), "12.000 ms".into(), "3".into()]);
        t.row(["E2E".into(), or_missing(None), String::new()]);
        t.row(["short".into()]);
        t
    }

    #[test]
    fn markdown_as_the_reports_write_it() {
        assert_eq!(
            table().markdown(),
            "| metric | p50 | n |\n|---|---:|---:|\n| TTFT | 12.000 ms | 3 |\n\
             | E2E | - | |\n| short | | |\n"
        );
    }
}
