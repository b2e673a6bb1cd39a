//! Command-line interface.

pub fn main() -> i32 {
    0
}
