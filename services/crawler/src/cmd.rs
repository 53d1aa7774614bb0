//! One file per command of `weft-crawler`.

pub mod crawl;
pub mod generations;

/// Prints `value` as JSON, or `text` for people.
pub fn print(
    json: bool,
    value: &impl serde::Serialize,
    text: &impl std::fmt::Display,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{text}");
    }
    Ok(())
}
