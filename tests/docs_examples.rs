//! Every example command in README.md and docs/*.md is one the CLI accepts, so the docs cannot
//! drift from the flags. A command is a line (with its `\` continuations) of a fenced code block
//! that runs infertop: `infertop …`, `target/release/infertop …` or `cargo run --release -- …`,
//! after a pipe, `nohup`, `ssh HOST`, `srun …` or `VAR=value` too, and the commands that
//! `follow --agent NAME=COMMAND` starts. In a block with `$ ` prompts only the prompt lines are
//! commands (the rest is their output). Each is split as a shell splits it and given to clap
//! (`Cli::try_parse_from`): parsing only, nothing runs.

use clap::Parser;
use infertop::cli::Cli;
use std::path::{Path, PathBuf};

/// Shell variables the examples use, with a value of the shape the flag takes.
const VARIABLES: &[(&str, &str)] = &[
    // `AT=$(( $(date +%s) + 60 ))` a line before: a unix time.
    ("$AT", "1767225600"),
    ("$ANTHROPIC_API_KEY", "sk-ant-placeholder"),
];

/// Commands left unchecked, by their text: only where a value cannot be resolved here. Keep it
/// short; a command with an unknown `$VARIABLE` not listed here fails the test.
const SKIPPED: &[&str] = &[];

/// One command found in a doc.
#[derive(Debug)]
struct Example {
    file: String,
    line: usize,
    /// The command as written (continuations joined).
    text: String,
    /// infertop's arguments, without the program name.
    args: Vec<String>,
}

/// A word of a shell line, or an operator that ends a simple command.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    /// `|`, `||`, `&`, `&&`, `;`.
    Separator,
}

/// Splits a shell line as sh does, far enough for the docs: single and double quotes,
/// backslashes, `$(…)` kept inside its word, `#` comments, command separators, and redirections
/// (`>`, `2>&1`, `< FILE`) dropped with their targets. `None` when a quote is left open.
fn shell_tokens(line: &str) -> Option<Vec<Token>> {
    let chars: Vec<char> = line.chars().collect();
    let mut tokens = Vec::new();
    let mut word = String::new();
    // Whether a word has started (an empty quoted string is a word).
    let mut in_word = false;
    // The next word is a redirection's target, to be dropped.
    let mut drop_next = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' => {
                end_word(&mut tokens, &mut word, &mut in_word, &mut drop_next);
                i += 1;
            }
            '#' if !in_word => break,
            '\'' => {
                in_word = true;
                let close = chars[i + 1..].iter().position(|&c| c == '\'')?;
                word.extend(&chars[i + 1..i + 1 + close]);
                i += close + 2;
            }
            '"' => {
                in_word = true;
                i += 1;
                loop {
                    match chars.get(i)? {
                        '"' => break,
                        '\\' if matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`')) => {
                            word.push(chars[i + 1]);
                            i += 2;
                        }
                        '$' if chars.get(i + 1) == Some(&'(') => {
                            i = copy_substitution(&chars, i, &mut word)?;
                        }
                        &c => {
                            word.push(c);
                            i += 1;
                        }
                    }
                }
                i += 1;
            }
            '\\' => {
                in_word = true;
                if let Some(&next) = chars.get(i + 1) {
                    word.push(next);
                }
                i += 2;
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                in_word = true;
                i = copy_substitution(&chars, i, &mut word)?;
            }
            '|' | '&' | ';' => {
                // `2>&1`'s `&` is part of its redirection, handled below.
                end_word(&mut tokens, &mut word, &mut in_word, &mut drop_next);
                tokens.push(Token::Separator);
                i += 1;
                while matches!(chars.get(i), Some('|' | '&')) {
                    i += 1;
                }
            }
            '>' | '<' => {
                // A word of digits just before is the descriptor (`2>`): not an argument.
                if in_word && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                } else {
                    end_word(&mut tokens, &mut word, &mut in_word, &mut drop_next);
                }
                i += 1;
                while matches!(chars.get(i), Some('>')) {
                    i += 1;
                }
                if chars.get(i) == Some(&'&') {
                    // `>&1`: the target is a descriptor.
                    i += 1;
                    while matches!(chars.get(i), Some(c) if c.is_ascii_digit()) {
                        i += 1;
                    }
                } else {
                    drop_next = true;
                }
            }
            c => {
                in_word = true;
                word.push(c);
                i += 1;
            }
        }
    }
    end_word(&mut tokens, &mut word, &mut in_word, &mut drop_next);
    Some(tokens)
}

/// Ends the word being read, if one is: kept, or dropped as a redirection's target.
fn end_word(tokens: &mut Vec<Token>, word: &mut String, in_word: &mut bool, drop_next: &mut bool) {
    if *in_word {
        let w = std::mem::take(word);
        if !*drop_next {
            tokens.push(Token::Word(w));
        }
        *drop_next = false;
        *in_word = false;
    }
}

/// Copies `$(…)` (nested parentheses included) from `chars[start]` into `word`; returns the index
/// after its closing parenthesis.
fn copy_substitution(chars: &[char], start: usize, word: &mut String) -> Option<usize> {
    let mut depth = 0;
    for (i, &c) in chars.iter().enumerate().skip(start + 1) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    word.extend(&chars[start..=i]);
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// infertop's arguments in one simple command, if it runs infertop.
fn infertop_args(words: &[String]) -> Option<Vec<String>> {
    let mut rest = words;
    loop {
        match rest.first().map(String::as_str) {
            // `VAR=value` before the command.
            Some(w)
                if !w.starts_with('-') && w.split_once('=').is_some_and(|(k, _)| is_name(k)) =>
            {
                rest = &rest[1..]
            }
            Some("nohup") => rest = &rest[1..],
            Some("ssh") => {
                // Its options (`-o X`, `-t`), then the host.
                rest = &rest[1..];
                while let Some(w) = rest.first().filter(|w| w.starts_with('-')) {
                    let takes_value = matches!(w.as_str(), "-o" | "-p" | "-i" | "-l" | "-J");
                    let skip = if takes_value { 2 } else { 1 };
                    rest = &rest[skip.min(rest.len())..];
                }
                rest = rest.get(1..)?;
            }
            Some("srun") => {
                rest = &rest[1..];
                while rest.first().is_some_and(|w| w.starts_with('-')) {
                    rest = &rest[1..];
                }
            }
            _ => break,
        }
    }
    match rest {
        [program, args @ ..] if program == "infertop" || program.ends_with("/infertop") => {
            Some(args.to_vec())
        }
        [cargo, run, release, args @ ..]
            if cargo == "cargo" && run == "run" && release == "--release" =>
        {
            match args {
                [] => Some(Vec::new()),
                [dashes, args @ ..] if dashes == "--" => Some(args.to_vec()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A build without the `cuda` feature refuses `--device cuda[:N]` as it parses, saying why: the
/// flag is then checked with `cpu`.
fn without_cuda(mut args: Vec<String>) -> Vec<String> {
    if cfg!(feature = "cuda") {
        return args;
    }
    for i in 0..args.len() {
        if args[i] == "--device" && args.get(i + 1).is_some_and(|v| v.starts_with("cuda")) {
            args[i + 1] = "cpu".to_string();
        } else if args[i].starts_with("--device=cuda") {
            args[i] = "--device=cpu".to_string();
        }
    }
    args
}

/// A shell variable's name.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// The commands in one line of shell (its continuations joined), with the ones `--agent` starts.
fn commands_in(line: &str) -> Result<Vec<Vec<String>>, String> {
    let mut line = line.to_string();
    for (name, value) in VARIABLES {
        line = line
            .replace(&format!("\"{name}\""), value)
            .replace(name, value);
    }
    let tokens = shell_tokens(&line).ok_or("a quote is left open")?;
    let mut commands = Vec::new();
    for segment in tokens.split(|t| *t == Token::Separator) {
        let words: Vec<String> = segment
            .iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some(w.clone()),
                Token::Separator => None,
            })
            .collect();
        let Some(args) = infertop_args(&words) else {
            continue;
        };
        if let Some(w) = args.iter().find(|w| w.contains('$')) {
            return Err(format!(
                "`{w}` is a shell variable or substitution this test does not know \
                 (give it a value in VARIABLES, or list the command in SKIPPED)"
            ));
        }
        // `follow --agent NAME=COMMAND`: the command it starts is an example too.
        for pair in args.windows(2).filter(|p| p[0] == "--agent") {
            let command = match pair[1].split_once('=') {
                Some((name, command)) if is_name(name) => command,
                _ => pair[1].as_str(),
            };
            commands.extend(commands_in(command)?);
        }
        commands.push(without_cuda(args));
    }
    Ok(commands)
}

/// The commands in a markdown file's fenced code blocks; errors are `file:line: why`.
fn examples(file: &str, text: &str) -> (Vec<Example>, Vec<String>) {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with("```") {
            i += 1;
            continue;
        }
        // A block: its lines up to the closing fence.
        let start = i + 1;
        let end = (start..lines.len())
            .find(|&j| lines[j].trim_start().starts_with("```"))
            .unwrap_or(lines.len());
        let block = &lines[start..end];
        let prompts = block.iter().any(|l| l.trim_start().starts_with("$ "));
        let mut j = 0;
        while j < block.len() {
            let first = j;
            let mut logical = block[j].trim_end().to_string();
            while logical.ends_with('\\') && j + 1 < block.len() {
                logical.pop();
                j += 1;
                logical.push(' ');
                logical.push_str(block[j].trim());
            }
            j += 1;
            let mut command = logical.trim();
            if prompts {
                match command.strip_prefix("$ ") {
                    Some(c) => command = c,
                    None => continue,
                }
            }
            let line = start + first + 1;
            // Only lines that may run infertop are split (the rest of a block is often not shell).
            if !command.contains("infertop") && !command.starts_with("cargo run") {
                continue;
            }
            if SKIPPED.contains(&command) {
                continue;
            }
            match commands_in(command) {
                Ok(commands) => found.extend(commands.into_iter().map(|args| Example {
                    file: file.to_string(),
                    line,
                    text: command.to_string(),
                    args,
                })),
                Err(why) => errors.push(format!("{file}:{line}: {command}\n    {why}")),
            }
        }
        i = end + 1;
    }
    (found, errors)
}

/// Each example clap refuses, as `file:line: command` and clap's error.
fn refused(examples: &[Example]) -> Vec<String> {
    use clap::error::ErrorKind;
    examples
        .iter()
        .filter_map(|e| {
            let argv = std::iter::once("infertop".to_string()).chain(e.args.iter().cloned());
            match Cli::try_parse_from(argv) {
                Ok(_) => None,
                Err(err)
                    if matches!(
                        err.kind(),
                        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
                    ) =>
                {
                    None
                }
                Err(err) => {
                    let clap_says = err.to_string();
                    let clap_says = clap_says.trim_end().replace('\n', "\n    ");
                    Some(format!(
                        "{}:{}: {}\n    {clap_says}",
                        e.file, e.line, e.text
                    ))
                }
            }
        })
        .collect()
}

/// README.md and every docs/*.md, relative to the repository.
fn doc_files() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    std::iter::once(root.join("README.md"))
        .chain(docs)
        .map(|p| {
            let name = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            (name, p)
        })
        .collect()
}

#[test]
fn every_example_command_in_the_docs_parses() {
    let mut all = Vec::new();
    let mut problems = Vec::new();
    for (name, path) in doc_files() {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {name}: {e}"));
        let (found, errors) = examples(&name, &text);
        all.extend(found);
        problems.extend(errors);
    }
    problems.extend(refused(&all));
    assert!(
        problems.is_empty(),
        "{} of the docs' example commands are not ones infertop accepts:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The extractor itself must keep finding them: the docs hold about a hundred.
    assert!(
        all.len() >= 80,
        "only {} example commands found in README.md and docs/*.md",
        all.len()
    );
    assert!(all.iter().any(|e| e.file == "README.md"));
    eprintln!("{} example commands parse", all.len());
}

#[test]
fn a_flag_that_does_not_exist_fails_the_check() {
    let doc =
        "# A page\n\n```sh\ninfertop --endpoint http://localhost:8000 \\\n  --no-such-flag 3\n\
               infertop report RUN.jsonl\n```\n";
    let (found, errors) = examples("docs/wrong.md", doc);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(found.len(), 2);
    let refused = refused(&found);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with("docs/wrong.md:4: infertop --endpoint http://localhost:8000 "),
        "{}",
        refused[0]
    );
    assert!(refused[0].contains("--no-such-flag"), "{}", refused[0]);
}

#[test]
fn a_bad_value_and_a_misplaced_subcommand_flag_fail_the_check() {
    let doc =
        "```sh\ninfertop --prompt-tokens 12x\ninfertop watch http://a:8000 --find-max rate\n```\n";
    let (found, errors) = examples("docs/wrong.md", doc);
    assert!(errors.is_empty(), "{errors:?}");
    let refused = refused(&found);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].starts_with("docs/wrong.md:2: "),
        "{}",
        refused[0]
    );
    assert!(
        refused[1].starts_with("docs/wrong.md:3: "),
        "{}",
        refused[1]
    );
}

#[test]
fn commands_are_found_as_a_shell_reads_them() {
    let doc = r#"Text with infertop --not-in-a-block.

```sh
# a comment: infertop --nothing
cargo run --release
cargo run --release -- --headless -n 8   # a comment
ssh gpu1 infertop --jsonl --requests 1000 | infertop follow -
nohup infertop --headless --record long.jsonl >/dev/null 2>&1 &
X=1 Y=2 srun --overlap infertop watch --gpu-port 9400
infertop --extra-body '{"a": 1}' --header "X-Tenant: blue" --start-at $AT
infertop follow --agent 'c1=ssh c1 infertop --concurrency 64 --jsonl'
llama-server -m model.gguf --port 8080
```

```text
$ infertop report run.jsonl --slice 10s
infertop --runs 3: output, not a command
```
"#;
    let (found, errors) = examples("x.md", doc);
    assert!(errors.is_empty(), "{errors:?}");
    let got: Vec<(usize, Vec<&str>)> = found
        .iter()
        .map(|e| (e.line, e.args.iter().map(String::as_str).collect()))
        .collect();
    let want: Vec<(usize, Vec<&str>)> = vec![
        (5, vec![]),
        (6, vec!["--headless", "-n", "8"]),
        (7, vec!["--jsonl", "--requests", "1000"]),
        (7, vec!["follow", "-"]),
        (8, vec!["--headless", "--record", "long.jsonl"]),
        (9, vec!["watch", "--gpu-port", "9400"]),
        (
            10,
            vec![
                "--extra-body",
                r#"{"a": 1}"#,
                "--header",
                "X-Tenant: blue",
                "--start-at",
                "1767225600",
            ],
        ),
        (11, vec!["--concurrency", "64", "--jsonl"]),
        (
            11,
            vec![
                "follow",
                "--agent",
                "c1=ssh c1 infertop --concurrency 64 --jsonl",
            ],
        ),
        (16, vec!["report", "run.jsonl", "--slice", "10s"]),
    ];
    assert_eq!(got, want);
}

#[test]
fn an_unknown_variable_is_an_error_not_a_pass() {
    let (found, errors) = examples("x.md", "```sh\ninfertop --endpoint $SERVER\n```\n");
    assert!(found.is_empty());
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with("x.md:2: infertop --endpoint $SERVER"),
        "{}",
        errors[0]
    );
}
