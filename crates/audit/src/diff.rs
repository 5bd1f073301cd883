//! A unified line diff for `audit show`: longest common subsequence over
//! lines, bounded so a huge section cannot take the tool's memory (past the
//! bound only the sizes are printed). Small enough to keep in-house.

/// Cells of the LCS table at most (4 bytes each: 16 MiB).
const MAX_CELLS: usize = 4_000_000;
const CONTEXT: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Keep,
    Del,
    Add,
}

/// The unified diff of `before` and `after` (`---`/`+++` headers named
/// after `name`), or None when they are equal.
pub(crate) fn unified(name: &str, before: &str, after: &str) -> Option<String> {
    if before == after {
        return None;
    }
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let mut out = format!("--- {name} (before)\n+++ {name} (after)\n");
    // Common head and tail need no table.
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    if (am.len() + 1) * (bm.len() + 1) > MAX_CELLS {
        out.push_str(&format!(
            "@@ too large to diff here: {} lines before, {} after @@\n",
            a.len(),
            b.len()
        ));
        return Some(out);
    }
    let mut ops = vec![Op::Keep; head];
    ops.extend(lcs_ops(am, bm));
    ops.extend(std::iter::repeat_n(Op::Keep, tail));
    if before.lines().count() == after.lines().count() && ops.iter().all(|o| *o == Op::Keep) {
        // Only line endings differ.
        out.push_str("@@ the texts differ only in line endings or a final newline @@\n");
        return Some(out);
    }
    hunks(&ops, &a, &b, &mut out);
    Some(out)
}

fn lcs_ops(a: &[&str], b: &[&str]) -> Vec<Op> {
    let (n, m) = (a.len(), b.len());
    let w = m + 1;
    // t[i][j]: LCS length of a[i..] and b[j..].
    let mut t = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i * w + j] = if a[i] == b[j] {
                t[(i + 1) * w + j + 1] + 1
            } else {
                t[(i + 1) * w + j].max(t[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j, mut ops) = (0, 0, Vec::with_capacity(n + m));
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push(Op::Keep);
            i += 1;
            j += 1;
        } else if i < n && (j == m || t[(i + 1) * w + j] >= t[i * w + j + 1]) {
            ops.push(Op::Del);
            i += 1;
        } else {
            ops.push(Op::Add);
            j += 1;
        }
    }
    ops
}

/// Groups the edit script into hunks with `CONTEXT` lines around changes.
fn hunks(ops: &[Op], a: &[&str], b: &[&str], out: &mut String) {
    // Position in a and b before each op.
    let mut pos = Vec::with_capacity(ops.len() + 1);
    let (mut i, mut j) = (0, 0);
    for op in ops {
        pos.push((i, j));
        match op {
            Op::Keep => (i, j) = (i + 1, j + 1),
            Op::Del => i += 1,
            Op::Add => j += 1,
        }
    }
    pos.push((i, j));
    let changed: Vec<usize> = (0..ops.len()).filter(|k| ops[*k] != Op::Keep).collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT {
            end = changed[k];
            k += 1;
        }
        let end = (end + 1 + CONTEXT).min(ops.len());
        let ((a0, b0), (a1, b1)) = (pos[start], pos[end]);
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            a0 + usize::from(a1 > a0),
            a1 - a0,
            b0 + usize::from(b1 > b0),
            b1 - b0
        ));
        for (op, &(x, y)) in ops[start..end].iter().zip(&pos[start..end]) {
            match op {
                Op::Keep => out.push_str(&format!(" {}\n", a[x])),
                Op::Del => out.push_str(&format!("-{}\n", a[x])),
                Op::Add => out.push_str(&format!("+{}\n", b[y])),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("x", "a\nb", "a\nb"), None);
    }

    #[test]
    fn an_append_is_one_hunk_of_additions_with_context() {
        let before = "1\n2\n3\n4\n5\n6";
        let after = "1\n2\n3\n4\n5\n6\nnew";
        let d = unified("tone", before, after).unwrap();
        assert_eq!(
            d,
            "--- tone (before)\n+++ tone (after)\n@@ -4,3 +4,4 @@\n 4\n 5\n 6\n+new\n"
        );
    }

    #[test]
    fn a_replacement_deletes_then_adds_and_far_changes_are_separate_hunks() {
        let before: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let after = before.replace("l2\n", "L2\n").replace("l18\n", "");
        let d = unified("s", &before, &after).unwrap();
        assert!(d.contains("@@ -1,5 +1,5 @@\n l1\n-l2\n+L2\n l3\n"), "{d}");
        assert!(
            d.contains("@@ -15,6 +15,5 @@\n l15\n l16\n l17\n-l18\n l19\n l20\n"),
            "{d}"
        );
    }

    #[test]
    fn a_huge_diff_is_bounded() {
        let a: String = (0..3000).map(|i| format!("a{i}\n")).collect();
        let b: String = (0..3000).map(|i| format!("b{i}\n")).collect();
        let d = unified("s", &a, &b).unwrap();
        assert!(d.contains("too large"), "{d}");
    }
}
