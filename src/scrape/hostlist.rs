//! Slurm hostlists (`SLURM_JOB_NODELIST`): `gpu[01-04,07]`, several comma-separated groups
//! (`a1,b[2-3]`), ranges keeping their zero padding, and several bracket groups in one name
//! (`rack[1-2]-gpu[3-4]`, every combination, the last group varying fastest, as
//! `scontrol show hostnames` lists them).

/// More hosts than this is a mistake (a range such as `n[1-1000000]`).
pub const MAX_HOSTS: usize = 65_536;

/// Expands a hostlist into host names, in order, duplicates kept out.
pub fn expand(list: &str) -> Result<Vec<String>, String> {
    let mut hosts: Vec<String> = Vec::new();
    for item in split_top(list)? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let mut names = vec![String::new()];
        let mut rest = item;
        while !rest.is_empty() {
            match rest.find('[') {
                None => {
                    for n in &mut names {
                        n.push_str(rest);
                    }
                    rest = "";
                }
                Some(open) => {
                    let close = rest[open..]
                        .find(']')
                        .map(|c| open + c)
                        .ok_or_else(|| format!("`{item}`: `[` without `]`"))?;
                    let literal = &rest[..open];
                    let values = range_values(&rest[open + 1..close])
                        .map_err(|e| format!("`{item}`: {e}"))?;
                    let mut next = Vec::with_capacity(names.len() * values.len());
                    for n in &names {
                        for v in &values {
                            next.push(format!("{n}{literal}{v}"));
                        }
                    }
                    if next.len() > MAX_HOSTS {
                        return Err(format!("`{item}`: more than {MAX_HOSTS} hosts"));
                    }
                    names = next;
                    rest = &rest[close + 1..];
                }
            }
        }
        for n in names {
            if n.contains(']') {
                return Err(format!("`{item}`: `]` without `[`"));
            }
            if let Some(c) = n
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
            {
                return Err(format!("`{item}`: `{c}` cannot be in a host name"));
            }
            if !hosts.contains(&n) {
                hosts.push(n);
            }
            if hosts.len() > MAX_HOSTS {
                return Err(format!("more than {MAX_HOSTS} hosts"));
            }
        }
    }
    if hosts.is_empty() {
        return Err("no host names in it".into());
    }
    Ok(hosts)
}

/// The top-level items: commas outside brackets separate them.
fn split_top(list: &str) -> Result<Vec<&str>, String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("`{list}`: unbalanced or nested brackets"));
        }
    }
    if depth != 0 {
        return Err(format!("`{list}`: `[` without `]`"));
    }
    items.push(&list[start..]);
    Ok(items)
}

/// `01-04,07` → `01 02 03 04 07`: ranges keep the width of their lower bound.
fn range_values(spec: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in spec.split(',') {
        let part = part.trim();
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(format!("`{part}` is not a number or a range such as 01-04"));
        }
        let (a, b): (u64, u64) = match (lo.parse(), hi.parse()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return Err(format!("`{part}`: number too large")),
        };
        if b < a {
            return Err(format!("`{part}`: the range goes down"));
        }
        if b - a >= MAX_HOSTS as u64 {
            return Err(format!("`{part}`: more than {MAX_HOSTS} hosts"));
        }
        let width = lo.len();
        for n in a..=b {
            out.push(format!("{n:0width$}"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_as_slurm_does() {
        let cases: &[(&str, &[&str])] = &[
            ("gpu01", &["gpu01"]),
            (
                "gpu[01-04,07]",
                &["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"],
            ),
            ("a1,b[2-3],c", &["a1", "b2", "b3", "c"]),
            ("n[8-11]", &["n8", "n9", "n10", "n11"]),
            ("n[098-101]", &["n098", "n099", "n100", "n101"]),
            (
                "rack[1-2]-gpu[3-4]",
                &["rack1-gpu3", "rack1-gpu4", "rack2-gpu3", "rack2-gpu4"],
            ),
            ("x[1-2]y", &["x1y", "x2y"]),
            ("gpu[1,1-2],gpu1", &["gpu1", "gpu2"]),
            (" a , b ", &["a", "b"]),
            ("node-[5]", &["node-5"]),
        ];
        for (list, want) in cases {
            let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            assert_eq!(expand(list), Ok(want), "{list}");
        }
    }

    #[test]
    fn bad_lists_say_what_is_wrong() {
        for (list, why) in [
            ("gpu[01-04", "without `]`"),
            ("gpu01-04]", "unbalanced"),
            ("gpu[4-1]", "goes down"),
            ("gpu[a-b]", "not a number"),
            ("gpu[1-2[3]]", "nested"),
            ("n[1-1000000]", "more than"),
            ("", "no host names"),
            ("gpu[]", "not a number"),
            ("not a url", "` ` cannot be in a host name"),
            ("a/b", "`/` cannot be in a host name"),
        ] {
            let err = expand(list).unwrap_err();
            assert!(err.contains(why), "{list}: {err}");
        }
    }
}
